// mcp-client.mjs drives chatmem's MCP server with the official MCP
// TypeScript SDK client (@modelcontextprotocol/sdk), over stdio (spawning
// `chatmem mcp`, as a desktop client does) and over Streamable HTTP (the
// /mcp endpoint of `chatmem serve`, with an API key), the way an agent
// would: it appends the seed's five messages, gets the window at budget 40,
// sets and reads facts, searches for a detail from far back, reads the
// conversation as a resource, checks that bad input is a tool error and
// that another tenant sees nothing, lists, and deletes. The SDK client also
// checks each result's structured content against the tool's output schema.
//
// It exits 1 with a message on the first failure, and 0 after printing one
// line per step.
//
// Environment:
//   CHATMEM_BIN        the chatmem binary (for stdio; required unless only HTTP)
//   CHATMEM_STORE      store URL for stdio, shared by the two tenants' processes
//                      (e.g. sqlite:/tmp/x.db; default memory:, which skips the
//                      stdio isolation check)
//   CHATMEM_MCP_URL    the /mcp endpoint, e.g. http://127.0.0.1:8080/mcp
//   CHATMEM_API_KEY    a key of tenant A; CHATMEM_OTHER_KEY a key of tenant B
//   CHATMEM_TRANSPORTS comma-separated: stdio,http (default both)
//
// Usage: cd testdata/mcp-node && npm ci && node mcp-client.mjs

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

function fail(msg) {
  console.error(`mcp-client: ${msg}`);
  process.exit(1);
}

function check(cond, msg) {
  if (!cond) fail(msg);
}

const seed = [
  { role: 'user', content: "Hi, I'm Kavya. My order SE-10423 hasn't arrived." },
  { role: 'assistant', content: 'Sorry Kavya! It is out for delivery and should arrive by 8 pm.' },
  { role: 'user', content: 'Ok. Also, do you have running socks?' },
  { role: 'assistant', content: 'Yes: DryFit ankle socks (pack of 3) for Rs 249 and CushionRun for Rs 199.' },
  { role: 'user', content: 'Add the DryFit ones to my cart please.' },
];

const tools = [
  'append_messages', 'delete_conversation', 'delete_fact', 'get_context',
  'get_facts', 'list_conversations', 'search_memory', 'set_fact',
];

async function connect(transport) {
  const client = new Client({ name: 'chatmem-node-test', version: '0.0.0' });
  await client.connect(transport);
  return client;
}

// call calls a tool and returns its structured content, failing on a tool
// error unless wantError.
async function call(client, name, args, wantError = false) {
  const res = await client.callTool({ name, arguments: args });
  const text = (res.content || []).filter((c) => c.type === 'text').map((c) => c.text).join('');
  if (wantError) {
    check(res.isError === true, `${name}(${JSON.stringify(args)}) succeeded, want a tool error`);
    check(text.length > 0, `${name}: a tool error without a message`);
    return text;
  }
  check(!res.isError, `${name}(${JSON.stringify(args)}) failed: ${text}`);
  check(res.structuredContent, `${name}: no structured content`);
  check(text.length > 0, `${name}: no text content`);
  return res.structuredContent;
}

// scenario is the done-when, for one transport; other is a client of
// another tenant on the same store, or null.
async function scenario(label, client, other) {
  const conv = `node-${label}-${Date.now()}`;
  const listed = (await client.listTools()).tools.map((t) => t.name).sort();
  check(JSON.stringify(listed) === JSON.stringify(tools), `tools/list = ${listed}`);
  for (const t of (await client.listTools()).tools) {
    check(t.description && t.description.length > 40, `tool ${t.name} has no useful description`);
    check(t.outputSchema, `tool ${t.name} has no output schema`);
  }
  console.log(`${label}: tools/list: ${listed.length} tools`);

  const app = await call(client, 'append_messages', { conversation: conv, messages: seed });
  check(app.messages.length === 5 && app.messages[0].seq === 1 && app.last_seq === 5, `append_messages = ${JSON.stringify(app)}`);
  console.log(`${label}: append_messages: seqs ${app.messages.map((m) => m.seq).join(',')}, ${app.tokens} tokens`);

  const w = await call(client, 'get_context', { conversation: conv, budget: 40 });
  check(w.messages.length === 3 && w.tokens === 36 && w.dropped === 2,
    `get_context(budget 40) = ${w.messages.length} messages, ${w.tokens} tokens, ${w.dropped} dropped; want 3, 36, 2`);
  check(w.messages[0].content === seed[2].content, `get_context first message ${JSON.stringify(w.messages[0])}`);
  console.log(`${label}: get_context budget 40: ${w.messages.length} messages, ${w.tokens} tokens, first: ${JSON.stringify(w.messages[0].content.slice(0, 30))}`);

  await call(client, 'set_fact', { conversation: conv, key: 'name', value: 'Kavya' });
  const facts = await call(client, 'get_facts', { conversation: conv });
  // The server's rules extractor may have found others (order_id) by now.
  const name = facts.facts.find((f) => f.key === 'name');
  check(name && name.value === 'Kavya' && name.set_by === 'app', `get_facts = ${JSON.stringify(facts)}`);
  console.log(`${label}: set_fact and get_facts: ${facts.facts.map((f) => `${f.key}=${f.value} (${f.set_by})`).join(', ')}`);

  const found = await call(client, 'search_memory', { conversation: conv, query: 'SE-10423' });
  check(found.hits.length > 0 && found.hits[0].seq === 1 && found.hits[0].role === 'user' && found.hits[0].text.includes('SE-10423'),
    `search_memory = ${JSON.stringify(found)}`);
  console.log(`${label}: search_memory SE-10423: seq ${found.hits[0].seq} (${found.hits[0].role}) ${JSON.stringify(found.hits[0].text)}`);

  const uri = `chatmem://conversations/${conv}`;
  const resources = (await client.listResources()).resources.map((r) => r.uri);
  check(resources.includes(uri), `resources/list = ${resources}, want ${uri}`);
  const read = await client.readResource({ uri });
  const body = JSON.parse(read.contents[0].text);
  check(body.messages.length === 5 && body.last_seq === 5, `resources/read = ${read.contents[0].text}`);
  console.log(`${label}: resources: ${resources.length} listed, ${uri} holds ${body.messages.length} messages`);

  const bad = await call(client, 'append_messages', { conversation: conv, messages: [seed[0], { role: 'robot', content: 'x' }] }, true);
  const after = await call(client, 'list_conversations', {});
  check(after.conversations.find((c) => c.id === conv).messages === 5, 'the refused append wrote something');
  console.log(`${label}: bad input is a tool error: ${JSON.stringify(bad)}`);

  if (other) {
    const theirs = await call(other, 'list_conversations', {});
    check(!theirs.conversations.some((c) => c.id === conv), `the other tenant lists ${conv}`);
    await call(other, 'get_context', { conversation: conv, budget: 40 }, true);
    await call(other, 'search_memory', { conversation: conv, query: 'SE-10423' }, true);
    await call(other, 'get_facts', { conversation: conv }, true);
    await call(other, 'delete_conversation', { conversation: conv }, true);
    const otherResources = (await other.listResources()).resources.map((r) => r.uri);
    check(!otherResources.includes(uri), 'the other tenant lists the resource');
    console.log(`${label}: the other tenant sees nothing of ${conv}`);
  }

  const list = await call(client, 'list_conversations', {});
  check(list.conversations.some((c) => c.id === conv), `list_conversations = ${JSON.stringify(list)}`);
  const del = await call(client, 'delete_conversation', { conversation: conv });
  check(del.deleted === true, `delete_conversation = ${JSON.stringify(del)}`);
  const gone = await call(client, 'list_conversations', {});
  check(!gone.conversations.some((c) => c.id === conv), 'the deleted conversation is still listed');
  await call(client, 'get_context', { conversation: conv, budget: 40 }, true);
  console.log(`${label}: list_conversations and delete_conversation: ${conv} listed, then gone`);
}

const transports = (process.env.CHATMEM_TRANSPORTS || 'stdio,http').split(',');

if (transports.includes('stdio')) {
  const bin = process.env.CHATMEM_BIN;
  if (!bin) fail('CHATMEM_BIN is not set');
  const store = process.env.CHATMEM_STORE || 'memory:';
  const spawn = (tenant) => new StdioClientTransport({
    command: bin,
    args: ['mcp', '--store', store, '--tenant', tenant, '--tokenizer', 'estimate', '--log-level', 'warn'],
    stderr: 'inherit',
  });
  const client = await connect(spawn('acme'));
  const other = store === 'memory:' ? null : await connect(spawn('globex'));
  await scenario('stdio', client, other);
  await client.close();
  if (other) await other.close();
}

if (transports.includes('http')) {
  const url = process.env.CHATMEM_MCP_URL;
  const key = process.env.CHATMEM_API_KEY;
  const otherKey = process.env.CHATMEM_OTHER_KEY;
  if (!url || !key || !otherKey) fail('CHATMEM_MCP_URL, CHATMEM_API_KEY and CHATMEM_OTHER_KEY must be set');
  const httpTransport = (k) => new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${k}` } },
  });
  // Without a key the server answers 401.
  const anon = new Client({ name: 'chatmem-node-test', version: '0.0.0' });
  let refused = '';
  try {
    await anon.connect(new StreamableHTTPClientTransport(new URL(url)));
  } catch (e) {
    refused = String(e);
  }
  check(/401|Unauthorized/i.test(refused), `a client without a key: ${refused || 'connected'} (want 401)`);
  console.log('http: no key: 401');
  const client = await connect(httpTransport(key));
  const other = await connect(httpTransport(otherKey));
  await scenario('http', client, other);
  await client.close();
  await other.close();
}
console.log('ok');
