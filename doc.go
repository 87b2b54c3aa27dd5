// Package chatmem is conversation memory for LLM chatbots.
//
// Model APIs are stateless: the "memory" of a chatbot is the list of messages a
// backend keeps per conversation and sends again every turn. chatmem stores that
// list (see [Store]) and, every turn, assembles what to send under a [Policy].
//
// The policies ([Policies] lists them; [Memory.Context] assembles them from a
// store, [Apply] over a plain list of messages):
//
//   - all ([PolicyAll]): every message. The cost grows with the conversation;
//     the tokens are reported so that it shows.
//   - last_turns ([PolicyLastTurns], Turns): the last N turns, a turn running
//     from a user message to the next one; a Budget caps it further.
//   - token_budget ([PolicyTokenBudget], Budget): the longest run of newest
//     messages that fits the budget, starting at a user message; when even
//     the newest user message does not fit, [ErrBudgetTooSmall].
//   - summary_buffer ([PolicySummaryBuffer], Budget): a rolling [Summary] of
//     the older messages, written off the request path by the [Summarizer],
//     plus the messages after it that fit; the summary is sent only when the
//     window reaches back to it (no gap), else it is a token_budget window.
//     With Recall, older messages relevant to the newest one are added too.
//   - recall ([PolicyRecall], Budget, Recent): a short window of the newest
//     messages and, in the rest of the budget, the older messages most
//     relevant to the newest user message, found in the store's search index
//     ([Searcher]) and, with an [Embedder], by meaning. Its cost follows the
//     window and the hits, not the history.
//   - facts (Facts, added to any policy): the conversation's current [Fact]
//     values (name, order IDs, preferences), extracted by each [Extractor] or
//     set by the application, sent as one pinned system message counted in
//     the budget, so that they outlive the window.
//
// The model, in short:
//
//   - A conversation is named by a [Key]: a tenant and an ID. Tenants never see
//     each other's conversations.
//   - Every [Message] gets the next sequence number of its conversation when it is
//     appended, and its token count is computed then, once, by the conversation's
//     [Counter]. Stores keep a running total, so the per-turn read of "the newest
//     messages that fit B tokens" is bounded by the window, not by the history.
//   - The windows ([TokenBudget], [LastTurns], [All], [Select]) are pure
//     functions from counted messages to a [Window]. System messages are
//     pinned: always sent, counted against the budget. An assistant message
//     with tool calls and the tool messages answering them form one unit, kept
//     or dropped together.
//   - Summaries, facts and embeddings are derived work, done by the Memory's
//     worker after appends, off the request path ([Options].Sync does it
//     inside Append instead).
//   - [Memory] ties a Store and Counters together; it is what the CLI and the
//     server use.
//
// Errors are the sentinels in errors.go, wrapped with context; match them with
// [errors.Is]. Every I/O method takes a [context.Context] first and is safe for
// concurrent use unless its doc says otherwise.
package chatmem
