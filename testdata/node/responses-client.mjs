// responses-client.mjs drives chatmem's Conversations and Responses APIs
// (under /openai/v1) with the official `openai` npm client: a conversation
// with metadata and an initial item, ten responses in it, one streamed, a
// function tool round trip, a previous_response_id chain, the items read
// back, and the errors of bad requests. It exits 1 with a message on the
// first unexpected answer, and prints the conversation's items as JSON on
// its last line for the Go test to compare with the store.
//
// Environment:
//   CHATMEM_OPENAI_URL  base URL up to and including /openai/v1 (required)
//   CHATMEM_API_KEY     chatmem API key (required)
//
// The upstream is expected to answer "answer N" to its Nth request, and a
// call of get_weather({"city":"Paris"}) (call id call_weather) to a turn
// whose input is "weather in Paris?".

import OpenAI from 'openai';

function fail(msg) {
  console.error(`responses-client: ${msg}`);
  process.exit(1);
}

function check(cond, msg) {
  if (!cond) fail(msg);
}

const baseURL = process.env.CHATMEM_OPENAI_URL;
const apiKey = process.env.CHATMEM_API_KEY;
if (!baseURL || !apiKey) fail('CHATMEM_OPENAI_URL and CHATMEM_API_KEY must be set');
const model = 'gpt-4o-mini';
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0 });

let upstreamCalls = 0;
const expected = []; // [type, role or name, text] of every item, in order

const conv = await client.conversations.create({
  metadata: { topic: 'demo' },
  items: [{ type: 'message', role: 'user', content: 'My ticket is SE-10423.' }],
});
check(conv.object === 'conversation' && conv.id.startsWith('conv_'), `create: ${JSON.stringify(conv)}`);
check(conv.metadata.topic === 'demo', `create metadata: ${JSON.stringify(conv)}`);
expected.push(['message', 'user', 'My ticket is SE-10423.']);
const got = await client.conversations.retrieve(conv.id);
check(got.id === conv.id && got.metadata.topic === 'demo', `retrieve: ${JSON.stringify(got)}`);
const updated = await client.conversations.update(conv.id, { metadata: { topic: 'support' } });
check(updated.metadata.topic === 'support', `update: ${JSON.stringify(updated)}`);
check((await client.conversations.retrieve(conv.id)).metadata.topic === 'support', 'update not kept');

// Ten turns in the conversation.
for (let i = 1; i <= 10; i++) {
  const r = await client.responses.create({ model, conversation: conv.id, input: `turn ${i}` });
  upstreamCalls++;
  check(r.object === 'response' && r.status === 'completed', `turn ${i}: ${JSON.stringify(r)}`);
  check(r.output_text === `answer ${upstreamCalls}`, `turn ${i}: output_text ${JSON.stringify(r.output_text)}`);
  check(r.conversation && r.conversation.id === conv.id, `turn ${i}: conversation ${JSON.stringify(r.conversation)}`);
  check(r.usage && r.usage.input_tokens === 42 && r.usage.output_tokens === 7, `turn ${i}: usage ${JSON.stringify(r.usage)}`);
  expected.push(['message', 'user', `turn ${i}`], ['message', 'assistant', `answer ${upstreamCalls}`]);
  const again = await client.responses.retrieve(r.id);
  check(again.id === r.id && again.output_text === r.output_text, `retrieve ${r.id}: ${JSON.stringify(again)}`);
}

// A streamed turn: the Responses event sequence, numbered from 0.
{
  const stream = await client.responses.create({ model, conversation: conv.id, input: 'stream please', stream: true });
  upstreamCalls++;
  const types = [];
  let text = '';
  let completed;
  for await (const ev of stream) {
    check(ev.sequence_number === types.length, `stream: event ${ev.type} has sequence_number ${ev.sequence_number}, want ${types.length}`);
    types.push(ev.type);
    if (ev.type === 'response.output_text.delta') text += ev.delta;
    if (ev.type === 'response.completed') completed = ev.response;
  }
  const want = ['response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added'];
  check(JSON.stringify(types.slice(0, 4)) === JSON.stringify(want), `stream: starts ${types.slice(0, 4)}`);
  check(JSON.stringify(types.slice(-4)) === JSON.stringify(['response.output_text.done', 'response.content_part.done', 'response.output_item.done', 'response.completed']), `stream: ends ${types.slice(-4)}`);
  check(text === `answer ${upstreamCalls}`, `stream: text ${JSON.stringify(text)}`);
  check(completed && completed.output[0].content[0].text === text, `stream: completed ${JSON.stringify(completed)}`);
  // Acknowledged is durable: the response is there once completed is.
  const again = await client.responses.retrieve(completed.id);
  check(again.output[0].content[0].text === text, `stream: retrieve ${JSON.stringify(again)}`);
  expected.push(['message', 'user', 'stream please'], ['message', 'assistant', text]);
}

// A function tool round trip.
{
  const tools = [{ type: 'function', name: 'get_weather', description: 'Weather of a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] }, strict: true }];
  const r1 = await client.responses.create({ model, conversation: conv.id, input: 'weather in Paris?', tools });
  upstreamCalls++;
  const call = r1.output.find((o) => o.type === 'function_call');
  check(call && call.name === 'get_weather' && call.call_id === 'call_weather' && JSON.parse(call.arguments).city === 'Paris', `tool: ${JSON.stringify(r1.output)}`);
  expected.push(['message', 'user', 'weather in Paris?'], ['function_call', 'get_weather', call.arguments]);
  const r2 = await client.responses.create({
    model, conversation: conv.id, tools,
    input: [{ type: 'function_call_output', call_id: call.call_id, output: '{"temp_c":21}' }],
  });
  upstreamCalls++;
  check(r2.output_text === `answer ${upstreamCalls}`, `tool answer: ${JSON.stringify(r2.output)}`);
  expected.push(['function_call_output', 'call_weather', '{"temp_c":21}'], ['message', 'assistant', r2.output_text]);
  const inputs = await client.responses.inputItems.list(r2.id);
  check(inputs.data.length === 1 && inputs.data[0].type === 'function_call_output', `input_items: ${JSON.stringify(inputs.data)}`);
}

// The items, oldest first, page by page: exactly what was added and produced.
const items = [];
for await (const it of client.conversations.items.list(conv.id, { order: 'asc', limit: 7 })) items.push(it);
check(items.length === expected.length, `items: ${items.length}, want ${expected.length}: ${JSON.stringify(items)}`);
items.forEach((it, i) => {
  const [type, who, text] = expected[i];
  let got;
  if (it.type === 'message') got = [it.type, it.role, it.content.map((p) => p.text).join('\n')];
  else if (it.type === 'function_call') got = [it.type, it.name, it.arguments];
  else got = [it.type, it.call_id, it.output];
  check(JSON.stringify(got) === JSON.stringify([type, who, text]), `item ${i}: ${JSON.stringify(it)}, want ${JSON.stringify(expected[i])}`);
});
const newest = await client.conversations.items.list(conv.id, { limit: 1 });
check(newest.data[0].id === items[items.length - 1].id, `items desc: ${JSON.stringify(newest.data)}`);
const one = await client.conversations.items.retrieve(items[1].id, { conversation_id: conv.id });
check(one.id === items[1].id, `item retrieve: ${JSON.stringify(one)}`);

// A previous_response_id chain, outside any conversation.
{
  let prev;
  for (let i = 1; i <= 3; i++) {
    const r = await client.responses.create({ model, input: `chain ${i}`, previous_response_id: prev });
    upstreamCalls++;
    check(r.output_text === `answer ${upstreamCalls}`, `chain ${i}: ${JSON.stringify(r)}`);
    check((r.previous_response_id ?? undefined) === prev, `chain ${i}: previous_response_id ${r.previous_response_id}`);
    prev = r.id;
  }
}

// Bad requests: OpenAI's errors.
async function status(f) {
  try {
    await f();
  } catch (e) {
    if (e instanceof OpenAI.APIError) return [e.status, e.error && e.error.message];
    throw e;
  }
  return [200, ''];
}
let [s, m] = await status(() => client.conversations.retrieve('conv_missing'));
check(s === 404 && /not found/.test(m), `unknown conversation: ${s} ${m}`);
[s, m] = await status(() => client.responses.retrieve('resp_missing'));
check(s === 404, `unknown response: ${s} ${m}`);
[s, m] = await status(() => client.responses.create({ model, input: 'x', conversation: conv.id, previous_response_id: 'resp_x' }));
check(s === 400, `conversation with previous_response_id: ${s} ${m}`);
[s, m] = await status(() => client.conversations.create({ items: Array.from({ length: 21 }, (_, i) => ({ type: 'message', role: 'user', content: `m${i}` })) }));
check(s === 400, `21 items: ${s} ${m}`);
[s, m] = await status(() => client.responses.create({ model, conversation: conv.id, input: [{ type: 'web_search_call', id: 'ws_1', status: 'completed' }] }));
check(s === 400 && /web_search_call/.test(m), `unsupported item: ${s} ${m}`);

console.log(`conversation ${conv.id}: ${items.length} items, ${upstreamCalls} upstream calls`);
console.log(JSON.stringify({ conversation: conv.id, items }));
