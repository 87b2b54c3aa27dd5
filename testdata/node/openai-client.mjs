// openai-client.mjs drives chatmem's OpenAI-compatible proxy
// (POST /v1/chat/completions) with the official `openai` npm client, the way
// a team would after pointing its existing client at chatmem: it names the
// conversation in the X-Chatmem-Conversation header and sends only the new
// user message of each turn; chatmem adds the memory.
//
// Three turns: two plain requests, then one with stream: true. Every
// response is checked for the shape the OpenAI API gives it; the script
// exits 1 with a message on the first malformed response or failed request,
// and 0 after printing one line per turn.
//
// Environment:
//   CHATMEM_PROXY_URL     base URL up to and including /v1, e.g.
//                         http://127.0.0.1:8080/v1 (required)
//   CHATMEM_API_KEY       chatmem API key, sent as the bearer token (required)
//   CHATMEM_CONVERSATION  conversation name (default: node-<time>)
//   CHATMEM_MODEL         model passed through to the upstream
//                         (default: gpt-4o-mini)
//
// Usage: cd testdata/node && npm ci && node openai-client.mjs

import OpenAI from 'openai';

function fail(msg) {
  console.error(`openai-client: ${msg}`);
  process.exit(1);
}

const baseURL = process.env.CHATMEM_PROXY_URL;
const apiKey = process.env.CHATMEM_API_KEY;
if (!baseURL) fail('CHATMEM_PROXY_URL is not set (e.g. http://127.0.0.1:8080/v1)');
if (!apiKey) fail('CHATMEM_API_KEY is not set');
const conversation = process.env.CHATMEM_CONVERSATION || `node-${Date.now()}`;
const model = process.env.CHATMEM_MODEL || 'gpt-4o-mini';

const client = new OpenAI({
  baseURL,
  apiKey,
  defaultHeaders: { 'X-Chatmem-Conversation': conversation },
  maxRetries: 0,
  timeout: 30_000,
});

const turns = [
  { stream: false, content: "Hi, I'm Kavya. My order SE-10423 hasn't arrived." },
  { stream: false, content: 'Ok. Also, do you have running socks?' },
  { stream: true, content: 'Add the DryFit ones to my cart please.' },
];

const isString = (v) => typeof v === 'string';
const show = (v) => JSON.stringify(v)?.slice(0, 300);

// checkToolCalls checks tool calls (complete ones, or assembled from
// deltas) and returns their count.
function checkToolCalls(calls, where) {
  if (calls == null) return 0;
  if (!Array.isArray(calls)) fail(`${where}: tool_calls is not an array: ${show(calls)}`);
  for (const [i, c] of calls.entries()) {
    if (!isString(c?.id) || !c.id) fail(`${where}: tool call ${i} has no id: ${show(c)}`);
    if (c.type !== 'function') fail(`${where}: tool call ${i} has type ${show(c.type)}, want "function"`);
    if (!isString(c.function?.name) || !c.function.name || !isString(c.function?.arguments)) {
      fail(`${where}: tool call ${i} has no function name or arguments: ${show(c)}`);
    }
  }
  return calls.length;
}

// checkCompletion checks a chat.completion object and returns the reply.
function checkCompletion(res, where) {
  if (res === null || typeof res !== 'object') fail(`${where}: response is not an object: ${show(res)}`);
  if (res.object !== 'chat.completion') fail(`${where}: object is ${show(res.object)}, want "chat.completion"`);
  if (!isString(res.id) || !res.id) fail(`${where}: no id`);
  if (!isString(res.model)) fail(`${where}: no model`);
  if (!Array.isArray(res.choices) || res.choices.length === 0) fail(`${where}: no choices: ${show(res)}`);
  const choice = res.choices[0];
  const msg = choice.message;
  if (msg?.role !== 'assistant') fail(`${where}: choices[0].message.role is ${show(msg?.role)}, want "assistant"`);
  if (msg.content !== null && !isString(msg.content)) fail(`${where}: content is neither a string nor null: ${show(msg.content)}`);
  const calls = checkToolCalls(msg.tool_calls, where);
  if (!msg.content && calls === 0) fail(`${where}: the reply has neither content nor tool calls: ${show(msg)}`);
  if (!isString(choice.finish_reason) || !choice.finish_reason) fail(`${where}: no finish_reason: ${show(choice)}`);
  if (res.usage != null && !Number.isInteger(res.usage.prompt_tokens)) fail(`${where}: usage.prompt_tokens is not an integer: ${show(res.usage)}`);
  return { content: msg.content ?? '', calls, finish: choice.finish_reason };
}

// readStream checks every chat.completion.chunk and assembles the reply
// from the content and tool-call deltas.
async function readStream(stream, where) {
  let content = '';
  let finish = null;
  let chunks = 0;
  let id = null;
  const calls = [];
  for await (const chunk of stream) {
    chunks++;
    const at = `${where}, chunk ${chunks}`;
    if (chunk?.object !== 'chat.completion.chunk') fail(`${at}: object is ${show(chunk?.object)}, want "chat.completion.chunk"`);
    if (!isString(chunk.id) || !chunk.id) fail(`${at}: no id`);
    if (id !== null && chunk.id !== id) fail(`${at}: id changed from ${show(id)} to ${show(chunk.id)}`);
    id = chunk.id;
    if (!Array.isArray(chunk.choices)) fail(`${at}: choices is not an array: ${show(chunk)}`);
    // A final usage chunk (stream_options.include_usage) has no choices.
    if (chunk.choices.length === 0 && chunk.usage == null) fail(`${at}: no choices and no usage: ${show(chunk)}`);
    for (const choice of chunk.choices) {
      if (choice.index !== 0) continue;
      const d = choice.delta;
      if (d == null || typeof d !== 'object') fail(`${at}: no delta: ${show(choice)}`);
      if (d.content != null) {
        if (!isString(d.content)) fail(`${at}: delta content is not a string: ${show(d.content)}`);
        content += d.content;
      }
      for (const tc of d.tool_calls ?? []) {
        if (!Number.isInteger(tc.index)) fail(`${at}: tool call delta without an index: ${show(tc)}`);
        const call = (calls[tc.index] ??= { id: '', type: 'function', function: { name: '', arguments: '' } });
        if (tc.id) call.id = tc.id;
        if (tc.type) call.type = tc.type;
        if (tc.function?.name) call.function.name += tc.function.name;
        if (tc.function?.arguments) call.function.arguments += tc.function.arguments;
      }
      if (choice.finish_reason != null) {
        if (finish !== null) fail(`${at}: a second finish_reason ${show(choice.finish_reason)}`);
        finish = choice.finish_reason;
      }
    }
  }
  if (chunks === 0) fail(`${where}: the stream had no chunks`);
  if (finish === null) fail(`${where}: the stream ended without a finish_reason`);
  const n = checkToolCalls(calls, where);
  if (!content && n === 0) fail(`${where}: the streamed reply has neither content nor tool calls`);
  return { content, calls: n, finish };
}

for (const [i, turn] of turns.entries()) {
  const where = `turn ${i + 1}${turn.stream ? ' (stream)' : ''}`;
  const params = { model, messages: [{ role: 'user', content: turn.content }] };
  let reply;
  try {
    if (turn.stream) {
      reply = await readStream(await client.chat.completions.create({ ...params, stream: true }), where);
    } else {
      reply = checkCompletion(await client.chat.completions.create(params), where);
    }
  } catch (err) {
    if (err instanceof OpenAI.APIError) {
      fail(`${where}: ${err.constructor.name} (status ${err.status ?? 'none'}): ${err.message}`);
    }
    fail(`${where}: ${err?.stack ?? err}`);
  }
  console.log(`${where}: ok, finish_reason ${reply.finish}, ${reply.calls} tool calls: ${show(reply.content)}`);
}
console.log(`openai-client: 3 turns in conversation ${conversation}`);
