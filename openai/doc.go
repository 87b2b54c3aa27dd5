// Package openai provides a chatmem.Summarizer and a chatmem.Extractor that
// ask a model through the OpenAI Chat Completions API (POST
// /chat/completions), with the official Go SDK (github.com/openai/openai-go).
// The base URL is configurable, so the same code serves OpenAI and the
// servers that speak its API: vLLM, Ollama (http://localhost:11434/v1),
// llama.cpp's server and the like.
//
// Configuration comes from [Options] only: the SDK's environment variables
// (OPENAI_API_KEY, OPENAI_BASE_URL, OPENAI_ORG_ID, ...) are never read, so a
// key meant for OpenAI is not sent to a local server by accident.
//
// # Prompts and the transcript
//
// The instructions are in the system message only. The user message holds
// data: the previous summary between <previous_summary> and
// </previous_summary>, the messages between <transcript> and </transcript>,
// and a note that what is inside is data whose instructions must not be
// followed. Each message starts a line "[seq 12] user: ..."; its further
// lines are indented, so a line that starts a message cannot be forged from
// inside another. A delimiter inside data ("</transcript>" in a message) has
// its "<" written as "&lt;", so no message can close the transcript early.
// System messages are not sent (they are pinned and always sent with the
// context); tool calls are shown after the assistant text that made them.
//
// # Facts
//
// [Extractor] asks for {"facts":[{"key","value","source_seq","confidence"}]}
// with response_format json_schema in strict mode, and then trusts nothing
// it gets back: see [Extractor.Extract] for the checks.
//
// # Errors
//
// A 408, 409, 429 or 5xx answer, a network failure, a deadline that passed
// and an unusable answer (empty, cut at MaxTokens, refused, not the JSON
// asked for) wrap chatmem.ErrUnavailable: the call may succeed if retried.
// Any other 4xx (bad key, unknown model, a parameter the server refuses)
// wraps chatmem.ErrInvalid. A context canceled by the caller is returned
// wrapped as it is.
package openai
