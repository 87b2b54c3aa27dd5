// openai-history.mjs drives chatmem's OpenAI-compatible proxy the way chat
// apps do: the official `openai` npm client keeps the chat's messages and
// sends them with every request, the full history or (CHATMEM_TRIM=N) only
// the newest N messages, and appends each reply as the API returned it. A
// reply with tool calls is answered with a tool result, sent as one more
// request. The conversation is named in the body's metadata, as apps that
// cannot add a header do.
//
// After the turns it edits the third user message and sends the history up
// to it: the proxy, refusing divergent histories by default, must answer
// 409 history_diverged. Then it regenerates the last reply, which the
// proxy answers without storing (X-Chatmem-Retry: true).
//
// It prints one line per request, then `history: ` and the messages it
// holds as JSON, for the test to compare with the stored conversation.
//
// Environment:
//   CHATMEM_PROXY_URL     base URL up to and including /v1 (required)
//   CHATMEM_API_KEY       chatmem API key (required)
//   CHATMEM_CONVERSATION  conversation name (required)
//   CHATMEM_TURNS         user turns (default 20)
//   CHATMEM_TRIM          send only the newest N messages (default 0: all)

import OpenAI from 'openai';

function fail(msg) {
  console.error(`openai-history: ${msg}`);
  process.exit(1);
}

const baseURL = process.env.CHATMEM_PROXY_URL;
const apiKey = process.env.CHATMEM_API_KEY;
const conversation = process.env.CHATMEM_CONVERSATION;
if (!baseURL || !apiKey || !conversation) fail('CHATMEM_PROXY_URL, CHATMEM_API_KEY and CHATMEM_CONVERSATION are required');
const turns = Number(process.env.CHATMEM_TURNS || 20);
const trim = Number(process.env.CHATMEM_TRIM || 0);

const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 30_000 });
const system = { role: 'system', content: 'You are the support assistant of a sports shop.' };
const tools = [{
  type: 'function',
  function: { name: 'track_order', description: 'Where an order is', parameters: { type: 'object', properties: { id: { type: 'string' } } } },
}];

const history = [];

// send asks for a completion over the history (or its newest `trim`
// messages), streamed or not, and returns the reply as a message param.
async function send(where, stream) {
  const msgs = trim > 0 ? history.slice(-trim) : history;
  const params = { model: 'gpt-4o-mini', messages: [system, ...msgs], tools, metadata: { conversation_id: conversation } };
  if (!stream) {
    const res = await client.chat.completions.create(params);
    const msg = res.choices?.[0]?.message;
    if (msg?.role !== 'assistant') fail(`${where}: no assistant message: ${JSON.stringify(res)}`);
    return msg; // as the API returned it, refusal and all
  }
  let content = '';
  const calls = [];
  for await (const chunk of await client.chat.completions.create({ ...params, stream: true })) {
    const d = chunk.choices?.[0]?.delta;
    if (!d) continue;
    if (d.content) content += d.content;
    for (const tc of d.tool_calls ?? []) {
      const c = (calls[tc.index] ??= { id: '', type: 'function', function: { name: '', arguments: '' } });
      if (tc.id) c.id = tc.id;
      if (tc.function?.name) c.function.name += tc.function.name;
      if (tc.function?.arguments) c.function.arguments += tc.function.arguments;
    }
  }
  const msg = { role: 'assistant', content: content || null };
  if (calls.length) msg.tool_calls = calls;
  return msg;
}

try {
  let requests = 0;
  for (let i = 1; i <= turns; i++) {
    history.push({ role: 'user', content: `turn ${i}: ${i === 5 ? 'where is my order SE-10423?' : 'tell me more'}` });
    let reply = await send(`turn ${i}`, i % 4 === 0);
    requests++;
    history.push(reply);
    // A tool call round trip: the app runs the tool and asks again.
    while (reply.tool_calls?.length) {
      for (const c of reply.tool_calls) {
        history.push({ role: 'tool', tool_call_id: c.id, content: `{"order":"SE-10423","status":"in transit"}` });
      }
      reply = await send(`turn ${i}, after the tool`, false);
      requests++;
      history.push(reply);
    }
    console.log(`turn ${i}: ${JSON.stringify(reply.content)}${reply.tool_calls ? ' (tool calls)' : ''}`);
  }
  console.log(`openai-history: ${turns} turns, ${requests} requests, ${history.length} messages, trim ${trim}`);
} catch (err) {
  if (err instanceof OpenAI.APIError) fail(`${err.constructor.name} (status ${err.status ?? 'none'}): ${err.message}`);
  fail(err?.stack ?? err);
}

// An edit of the third user message, with the history up to it, as chat
// UIs send it: refused, since the stored conversation says otherwise.
const third = history.findIndex((m) => m.role === 'user' && m.content.startsWith('turn 3:'));
const edited = [...history.slice(0, third), { role: 'user', content: 'turn 3, edited' }];
try {
  await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [system, ...edited], metadata: { conversation_id: conversation } });
  fail('the edit was not refused');
} catch (err) {
  if (!(err instanceof OpenAI.APIError) || err.status !== 409 || err.code !== 'history_diverged') {
    fail(`the edit: ${err?.status} ${err?.code}: ${err?.message}, want 409 history_diverged`);
  }
  console.log(`edit: ${err.status} ${err.code}: ${err.message}`);
}
// A regeneration of the last reply: the history without it. The proxy
// answers over the stored turn and keeps the stored reply
// (X-Chatmem-Retry: true); this script keeps it too.
try {
  const { data, response } = await client.chat.completions
    .create({ model: 'gpt-4o-mini', messages: [system, ...history.slice(0, -1)], metadata: { conversation_id: conversation } })
    .withResponse();
  if (response.headers.get('x-chatmem-retry') !== 'true') fail(`the regeneration: X-Chatmem-Retry ${response.headers.get('x-chatmem-retry')}, want true`);
  console.log(`regenerate: ${JSON.stringify(data.choices[0].message.content)}, not stored`);
} catch (err) {
  fail(`the regeneration: ${err?.status} ${err?.code}: ${err?.message}`);
}
console.log(`history: ${JSON.stringify(history)}`);
