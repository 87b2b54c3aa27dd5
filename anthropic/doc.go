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
// # OpenAI chat completions over the Messages API
//
// [NewChatCompletionsTransport] returns an http.RoundTripper for an OpenAI
// client or proxy: it takes a chat completions request (POST
// .../chat/completions) and answers it in the OpenAI format by calling
// POST {BaseURL}/v1/messages with raw JSON, headers x-api-key and
// anthropic-version 2026-10-21 (the version the SDK sends, so the package
// speaks one version). The incoming headers, Authorization included, are
// not forwarded.
//
// Requests: system and developer messages are joined (blank line between)
// into the system field, wherever they stand; user messages become text
// (and image, from image_url parts) blocks; an assistant message becomes a
// text block and one tool_use block per tool call (id kept, input = the
// parsed arguments, {} for empty ones); a tool message becomes a user
// message with a tool_result block (tool_use_id = tool_call_id).
// Consecutive messages of one role are merged into one message of several
// blocks, tool_result blocks first, so roles alternate; empty messages are
// dropped. An assistant message may come first or last: the Messages API
// accepts both (a last one is a prefill, which newer models refuse with a
// 400, returned as such). Function tools become tools with input_schema = parameters
// ({"type":"object","properties":{}} if none); tool_choice "auto", "none",
// "required" and {"type":"function",...} become auto, none, any and tool,
// and parallel_tool_calls false sets disable_parallel_tool_use.
// max_completion_tokens, else max_tokens, else Options.MaxTokens
// (DefaultMaxTokens if zero) becomes max_tokens; stop becomes
// stop_sequences (blank ones dropped); user becomes metadata.user_id; the
// model is passed through, Options.Model if the request names none.
// temperature and top_p are dropped, since API version 2026-10-21 refuses
// them; response_format json_schema becomes output_config.format (a
// structured output, on the models that have them), json_object and text
// send nothing; reasoning_effort, logprobs, seed, penalties and other
// OpenAI-only fields are ignored; n other than 1 is refused. What cannot be
// translated (unknown roles or part types, arguments that are not a JSON
// object) is answered 400 without calling Anthropic.
//
// Answers: text blocks are joined into content (null when there are only
// tool calls), tool_use blocks become tool_calls with the input as the
// arguments string, thinking blocks are skipped. stop_reason end_turn,
// stop_sequence and pause_turn map to finish_reason "stop", max_tokens and
// model_context_window_exceeded to "length", tool_use to "tool_calls",
// refusal to "content_filter". Usage: prompt_tokens counts all input
// tokens (input_tokens plus cache writes and reads, which Anthropic counts
// apart), cached_tokens the cache reads; completion_tokens is
// output_tokens. The id is "chatcmpl-" and the message id.
//
// Streams ("stream": true) are relayed as the events arrive, through a
// pipe: message_start gives a chunk with the role, text_delta content
// chunks, a tool_use block start a tool_calls chunk with index, id and
// name, input_json_delta its argument fragments; message_stop gives the
// chunk with finish_reason, a usage chunk if stream_options.include_usage,
// and "data: [DONE]". An error event is written as data: {"error":{...}}
// and the body then fails with an error; a stream cut before message_stop
// fails the body without [DONE]. Closing the body closes the Anthropic
// stream.
//
// Errors: an Anthropic error answer becomes {"error":{"message","type",
// "param":null,"code"}} with the same status (529 becomes 503), the
// Anthropic error type as code and an OpenAI-style type
// (invalid_request_error, authentication_error, permission_error,
// not_found_error, rate_limit_error, server_error); Retry-After and
// request-id are kept. A network failure is returned as RoundTrip's error.
// The transport does not retry.
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
