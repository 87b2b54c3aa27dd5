// agents-session.mjs runs an OpenAI Agents SDK (@openai/agents) agent with
// a function tool for ten turns on an OpenAIConversationsSession whose
// client's base URL is chatmem's /openai/v1: chatmem is both the model
// endpoint (Responses API) and the session store (Conversations API). It
// prints the session's items (getItems) as JSON on its last line, for the
// Go test to compare with what chatmem stores.
//
// Environment:
//   CHATMEM_OPENAI_URL  base URL up to and including /openai/v1 (required)
//   CHATMEM_API_KEY     chatmem API key (required)
//
// The upstream is expected to call get_weather({"city":"Paris"}) for a turn
// whose input is "weather in Paris?", and to answer text otherwise.

import OpenAI from 'openai';
import { Agent, OpenAIConversationsSession, run, setDefaultOpenAIClient, setTracingDisabled, tool } from '@openai/agents';
import { z } from 'zod';

function fail(msg) {
  console.error(`agents-session: ${msg}`);
  process.exit(1);
}

const baseURL = process.env.CHATMEM_OPENAI_URL;
const apiKey = process.env.CHATMEM_API_KEY;
if (!baseURL || !apiKey) fail('CHATMEM_OPENAI_URL and CHATMEM_API_KEY must be set');
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0 });
setDefaultOpenAIClient(client);
setTracingDisabled(true);

let calls = 0;
const getWeather = tool({
  name: 'get_weather',
  description: 'The weather of a city',
  parameters: z.object({ city: z.string() }),
  execute: async ({ city }) => {
    calls++;
    return city === 'Paris' ? '{"temp_c":21}' : '{}';
  },
});
// store: false: the session is the state; each response need not be kept too.
const agent = new Agent({ name: 'Assistant', instructions: 'Be brief.', model: 'gpt-4o-mini', tools: [getWeather], modelSettings: { store: false } });
const session = new OpenAIConversationsSession({ client });

for (let i = 1; i <= 10; i++) {
  const input = i === 3 ? 'weather in Paris?' : `turn ${i}`;
  const result = await run(agent, input, { session });
  if (typeof result.finalOutput !== 'string' || !result.finalOutput.startsWith('answer ')) {
    fail(`turn ${i}: final output ${JSON.stringify(result.finalOutput)}`);
  }
}
if (calls !== 1) fail(`the tool ran ${calls} times, want 1`);
const items = await session.getItems();
console.log(`session ${await session.getSessionId()}: ${items.length} items`);
console.log(JSON.stringify({ conversation: await session.getSessionId(), items }));
