// ai-sdk-history.mjs drives chatmem's proxy with the Vercel AI SDK (`ai`
// and `@ai-sdk/openai`'s chat model) the way apps built on it do: one
// growing `messages` array, sent whole with each generateText or
// streamText call, the response's messages appended after it. Turn 5
// makes the model call a tool, which the SDK runs before asking again.
//
// Environment: CHATMEM_PROXY_URL (up to and including /v1),
// CHATMEM_API_KEY, CHATMEM_CONVERSATION (all required), CHATMEM_TURNS
// (default 20). Prints one line per turn.

import { createOpenAI } from '@ai-sdk/openai';
import { generateText, streamText, tool, jsonSchema, stepCountIs } from 'ai';

function fail(msg) {
  console.error(`ai-sdk-history: ${msg}`);
  process.exit(1);
}

const { CHATMEM_PROXY_URL: baseURL, CHATMEM_API_KEY: apiKey, CHATMEM_CONVERSATION: conversation } = process.env;
if (!baseURL || !apiKey || !conversation) fail('CHATMEM_PROXY_URL, CHATMEM_API_KEY and CHATMEM_CONVERSATION are required');
const turns = Number(process.env.CHATMEM_TURNS || 20);

const openai = createOpenAI({ baseURL, apiKey, headers: { 'X-Chatmem-Conversation': conversation } });
const model = openai.chat('gpt-4o-mini');
const tools = {
  track_order: tool({
    description: 'Where an order is',
    inputSchema: jsonSchema({ type: 'object', properties: { id: { type: 'string' } } }),
    execute: async ({ id }) => `${id} is in transit`,
  }),
};

const messages = [];
try {
  for (let i = 1; i <= turns; i++) {
    messages.push({ role: 'user', content: `turn ${i}: ${i === 5 ? 'where is my order SE-10423?' : 'tell me more'}` });
    const params = { model, system: 'You are the support assistant of a sports shop.', messages, tools, stopWhen: stepCountIs(3), maxRetries: 0 };
    let text;
    let response;
    if (i % 3 === 0) {
      const result = streamText({ ...params, onError: ({ error }) => fail(`turn ${i}: ${error}`) });
      text = '';
      for await (const delta of result.textStream) text += delta;
      response = await result.response;
    } else {
      const result = await generateText(params);
      text = result.text;
      response = result.response;
    }
    messages.push(...response.messages);
    console.log(`turn ${i}${i % 3 === 0 ? ' (stream)' : ''}: ${JSON.stringify(text)}, ${response.messages.length} messages`);
  }
} catch (err) {
  fail(err?.stack ?? err);
}
console.log(`ai-sdk-history: ${turns} turns, ${messages.length} messages`);
