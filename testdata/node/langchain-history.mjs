// langchain-history.mjs drives chatmem's proxy with LangChain.js
// (`@langchain/openai`'s ChatOpenAI): the chat's full message list is
// invoked each turn (streamed every third turn), the reply appended to it.
// Turn 5 makes the model call a tool; the script answers with a
// ToolMessage and invokes again.
//
// Environment: CHATMEM_PROXY_URL (up to and including /v1),
// CHATMEM_API_KEY, CHATMEM_CONVERSATION (all required), CHATMEM_TURNS
// (default 20). Prints one line per turn.

import { ChatOpenAI } from '@langchain/openai';
import { HumanMessage, SystemMessage, ToolMessage } from '@langchain/core/messages';

function fail(msg) {
  console.error(`langchain-history: ${msg}`);
  process.exit(1);
}

const { CHATMEM_PROXY_URL: baseURL, CHATMEM_API_KEY: apiKey, CHATMEM_CONVERSATION: conversation } = process.env;
if (!baseURL || !apiKey || !conversation) fail('CHATMEM_PROXY_URL, CHATMEM_API_KEY and CHATMEM_CONVERSATION are required');
const turns = Number(process.env.CHATMEM_TURNS || 20);

const chat = new ChatOpenAI({
  model: 'gpt-4o-mini',
  apiKey,
  maxRetries: 0,
  configuration: { baseURL, defaultHeaders: { 'X-Chatmem-Conversation': conversation } },
}).bindTools([{
  type: 'function',
  function: { name: 'track_order', description: 'Where an order is', parameters: { type: 'object', properties: { id: { type: 'string' } } } },
}]);

async function reply(messages, stream) {
  if (!stream) return chat.invoke(messages);
  let full;
  for await (const chunk of await chat.stream(messages)) full = full ? full.concat(chunk) : chunk;
  return full;
}

const messages = [new SystemMessage('You are the support assistant of a sports shop.')];
try {
  for (let i = 1; i <= turns; i++) {
    messages.push(new HumanMessage(`turn ${i}: ${i === 5 ? 'where is my order SE-10423?' : 'tell me more'}`));
    let ai = await reply(messages, i % 3 === 0);
    messages.push(ai);
    while (ai.tool_calls?.length) {
      for (const c of ai.tool_calls) messages.push(new ToolMessage({ tool_call_id: c.id, content: `${c.args.id} is in transit` }));
      ai = await reply(messages, false);
      messages.push(ai);
    }
    console.log(`turn ${i}${i % 3 === 0 ? ' (stream)' : ''}: ${JSON.stringify(ai.content)}`);
  }
} catch (err) {
  fail(err?.stack ?? err);
}
console.log(`langchain-history: ${turns} turns, ${messages.length} messages`);
