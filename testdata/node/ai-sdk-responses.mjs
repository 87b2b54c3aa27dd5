// ai-sdk-responses.mjs drives chatmem's Responses API with the Vercel AI
// SDK's OpenAI Responses model (`openai.responses(...)`): each turn sends
// only its new user message and names the previous response
// (providerOptions.openai.previousResponseId), so the state is chatmem's.
// Turns 1, 2, 3 and 5 use generateText, turn 4 streamText. It prints one
// line per turn, then, last, the responses' IDs and texts as JSON for the
// Go test to compare with the store.
//
// Environment: CHATMEM_OPENAI_URL (up to and including /openai/v1) and
// CHATMEM_API_KEY (both required).

import { createOpenAI } from '@ai-sdk/openai';
import { generateText, streamText } from 'ai';

function fail(msg) {
  console.error(`ai-sdk-responses: ${msg}`);
  process.exit(1);
}

const { CHATMEM_OPENAI_URL: baseURL, CHATMEM_API_KEY: apiKey } = process.env;
if (!baseURL || !apiKey) fail('CHATMEM_OPENAI_URL and CHATMEM_API_KEY are required');

const openai = createOpenAI({ baseURL, apiKey });
const model = openai.responses('gpt-4o-mini');
const ids = [];
const texts = [];
try {
  let previousResponseId;
  for (let i = 1; i <= 5; i++) {
    const params = {
      model,
      messages: [{ role: 'user', content: `turn ${i}: tell me more` }],
      providerOptions: previousResponseId ? { openai: { previousResponseId } } : undefined,
      maxRetries: 0,
    };
    let text;
    let metadata;
    if (i === 4) {
      const result = streamText({ ...params, onError: ({ error }) => fail(`turn ${i}: ${error}`) });
      text = '';
      for await (const delta of result.textStream) text += delta;
      metadata = await result.providerMetadata;
    } else {
      const result = await generateText(params);
      text = result.text;
      metadata = result.providerMetadata;
    }
    previousResponseId = metadata?.openai?.responseId;
    if (!previousResponseId) fail(`turn ${i}: no response ID in ${JSON.stringify(metadata)}`);
    ids.push(previousResponseId);
    texts.push(text);
    console.log(`turn ${i}${i === 4 ? ' (stream)' : ''}: ${JSON.stringify(text)} ${previousResponseId}`);
  }
} catch (err) {
  fail(err?.stack ?? err);
}
console.log(JSON.stringify({ ids, texts }));
