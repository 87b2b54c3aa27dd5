// Package tokenizer provides the local chatmem.Counter implementations, the
// seed's estimator and OpenAI's tiktoken encodings, and the registry that
// resolves a tokenizer's name, Anthropic's count_tokens counter included
// (which lives in package anthropic, so that this package links no
// provider SDK).
//
// Counters are named, and a conversation records the name its stored counts
// came from, so that counts from different tokenizers are never mixed:
//
//   - "estimate" ([Estimate]): the seed's max(1, len(text) // 4), no framing.
//   - "o200k_base" and "cl100k_base" ([Tiktoken]): exact BPE token counts for
//     the GPT-4o family and the GPT-4 / GPT-3.5-turbo family, plus the OpenAI
//     chat format's framing (3 tokens a message, 1 a name, 3 a request). The
//     vocabularies are compiled into the binary; nothing is downloaded.
//   - "anthropic" (anthropic.Counter, through [Options].Anthropic): asks Anthropic's POST
//     /v1/messages/count_tokens for the configured model and caches the
//     answers. Its Name is "anthropic:MODEL", because the count depends on
//     the model.
//
// [Get] resolves any of these names (including a recorded "anthropic:MODEL")
// to a Counter; [Names] lists them for help texts. Every counter is safe for
// concurrent use. The package keeps no mutable global state: the only
// package-level value is a cache of tiktoken codecs, each built once on first
// use and never changed after.
package tokenizer
