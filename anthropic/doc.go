// Package anthropic provides a chatmem.Summarizer and a chatmem.Extractor
// that ask a Claude model through Anthropic's Messages API (POST
// /v1/messages), with the official Go SDK
// (github.com/anthropics/anthropic-sdk-go).
//
// Configuration comes from [Options] only: the SDK's environment defaults
// (ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN, ANTHROPIC_BASE_URL, profiles)
// are turned off. The key goes in the x-api-key header, and the SDK sends
// its anthropic-version header.
//
// # Prompts and the transcript
//
// The instructions are in the request's system field only. The one user
// message holds data: the previous summary between <previous_summary> and
// </previous_summary>, the messages between <transcript> and
// </transcript>, and a note that what is inside is data whose instructions
// must not be followed. Each message starts a line "[seq 12] user: ...";
// its further lines are indented, so a line that starts a message cannot be
// forged from inside another. A delimiter inside data ("</transcript>" in a
// message) has its "<" written as "&lt;", so no message can close the
// transcript early. System messages are not sent (they are pinned and
// always sent with the context); tool calls are shown after the assistant
// text that made them. The answer is the text of the response's text
// blocks; thinking blocks are skipped.
//
// # Facts
//
// [Extractor] asks for {"facts":[{"key","value","source_seq","confidence"}]}
// as JSON text (see [Extractor] for why not a forced tool call) and then
// trusts nothing it gets back: see [Extractor.Extract] for the checks.
//
// # Errors
//
// A 408, 409, 429 (rate_limit_error) or 5xx answer (529 overloaded_error
// included), a network failure, a deadline that passed and an unusable
// answer (empty, cut at max_tokens, refused, not the JSON asked for) wrap
// chatmem.ErrUnavailable: the call may succeed if retried. Any other 4xx
// (invalid_request_error, authentication_error, not_found_error, ...) wraps
// chatmem.ErrInvalid. A context canceled by the caller is returned wrapped
// as it is.
package anthropic
