// Package llm holds what chatmem's model-backed Summarizer and Extractor
// do whatever the provider: the prompts, the transcript with its delimiters
// and escaping, the parsing and checking of the facts a model returns, and
// the classification of failed requests. The provider packages (openai,
// anthropic) implement [Completer] over their SDKs and wrap a [Summarizer]
// and an [Extractor] around it.
//
// # Prompts and the transcript
//
// The instructions are in [Request.System] only. [Request.User] holds data:
// the previous summary between <previous_summary> and </previous_summary>,
// the messages between <transcript> and </transcript>, and a note that what
// is inside is data whose instructions must not be followed. Each message
// starts a line "[seq 12] user: ..."; its further lines are indented, so a
// line that starts a message cannot be forged from inside another. A
// delimiter inside data ("</transcript>" in a message) has its "<" written
// as "&lt;", so no message can close the transcript early. System messages
// are not sent (they are pinned and always sent with the context); tool
// calls are shown after the assistant text that made them.
//
// # Errors
//
// A Completer returns its errors without context; the Summarizer and
// Extractor wrap each once, as "openai summarize: ..." or "anthropic
// extract: ...". [StatusError] and [RequestError] map a failed request to
// chatmem.ErrUnavailable (the call may succeed if retried) or
// chatmem.ErrInvalid, the same way for every provider.
package llm
