// Package chatmem is conversation memory for LLM chatbots.
//
// Model APIs are stateless: the "memory" of a chatbot is the list of messages a
// backend keeps per conversation and sends again every turn. chatmem stores that
// list (see [Store]) and, every turn, assembles what to send under a [Policy]:
// everything, the last N turns, or the newest messages that fit a token budget.
//
// The model, in short:
//
//   - A conversation is named by a [Key]: a tenant and an ID. Tenants never see
//     each other's conversations.
//   - Every [Message] gets the next sequence number of its conversation when it is
//     appended, and its token count is computed then, once, by the conversation's
//     [Counter]. Stores keep a running total, so the per-turn read of "the newest
//     messages that fit B tokens" is bounded by the window, not by the history.
//   - Policies ([TokenBudget], [LastTurns], [All]) are pure functions from counted
//     messages to a [Window]. System messages are pinned: always sent, counted
//     against the budget. An assistant message with tool calls and the tool
//     messages answering them form one unit, kept or dropped together.
//   - [Memory] ties a Store and Counters together; it is what the CLI and the
//     server use.
//
// Errors are the sentinels in errors.go, wrapped with context; match them with
// [errors.Is]. Every I/O method takes a [context.Context] first and is safe for
// concurrent use unless its doc says otherwise.
package chatmem
