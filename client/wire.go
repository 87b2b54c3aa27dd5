package client

import (
	"time"

	"github.com/chatmem/chatmem"
)

// The bodies of the REST API's requests and answers, as the server
// (package httpapi) writes and reads them.

// Conversation is a conversation as the API shows it: its ID and its
// metadata (created_at, last_seq, tokens, ...). The tenant is the caller's
// and is not shown; Key is not set by the Client.
type Conversation struct {
	ID string `json:"id"`
	chatmem.Conversation
}

// AppendRequest is the body of POST /v1/conversations/{id}/messages.
type AppendRequest struct {
	// Messages are OpenAI-style chat messages (role, content, name,
	// tool_calls, tool_call_id; metadata and created_at are kept too).
	Messages []chatmem.Message `json:"messages"`
	// Tokenizer names the counter of a new conversation ("estimate",
	// "o200k_base", ...); an existing conversation keeps its own.
	Tokenizer string `json:"tokenizer,omitempty"`
	// TTLSeconds, if positive, makes the conversation expire that long
	// after this append.
	TTLSeconds int64 `json:"ttl_seconds,omitempty"`
	// User binds a conversation this append creates to the user (an ID
	// of the caller's tenant); an existing conversation must be that
	// user's (409 otherwise). Empty: no user.
	User string `json:"user,omitempty"`
}

// TTL returns TTLSeconds as a duration.
func (r AppendRequest) TTL() time.Duration { return time.Duration(r.TTLSeconds) * time.Second }

// AppendResponse is the answer to an append: the stored messages (with
// seq, tokens and created_at) and the conversation after it. Replayed is
// set by the Client when the append was a retry answered from the
// idempotency key (status 200, Idempotent-Replayed: true).
type AppendResponse struct {
	Messages     []chatmem.Message `json:"messages"`
	Conversation Conversation      `json:"conversation"`
	Replayed     bool              `json:"-"`
}

// TurnResponse is the answer to POST /v1/conversations/{id}/turn: what
// the append stored, as POST .../messages answers it, and the window to
// send the model, as GET .../context answers it, read as the conversation
// stands right after the append.
type TurnResponse struct {
	Appended AppendResponse `json:"appended"`
	Window   chatmem.Window `json:"window"`
}

// MessagesPage is one page of GET /v1/conversations/{id}/messages.
// NextAfter is the after= of the next page, nil on the last one.
type MessagesPage struct {
	Messages  []chatmem.Message `json:"messages"`
	NextAfter *int64            `json:"next_after"`
}

// ReceiptsPage is one page of GET /v1/conversations/{id}/receipts, oldest
// first. NextAfter is the after= of the next page, null on the last one.
type ReceiptsPage struct {
	Receipts  []chatmem.ReceiptRecord `json:"receipts"`
	NextAfter *int64                  `json:"next_after"`
}

// ConversationPage is one page of GET /v1/conversations. Next is the
// after= of the next page, empty on the last one.
type ConversationPage struct {
	Conversations []Conversation `json:"conversations"`
	Next          string         `json:"next"`
}

// FactInput is a fact as PATCH and PUT take it. Confidence 0 (or absent)
// means 1; SourceSeq is the message it came from, if any. Facts set through
// the API have set_by "app".
type FactInput struct {
	Key        string  `json:"key"`
	Value      string  `json:"value"`
	Confidence float64 `json:"confidence,omitempty"`
	SourceSeq  int64   `json:"source_seq,omitempty"`
}

// FactsBody is the body of PATCH and PUT /v1/conversations/{id}/facts
// (and of a user's facts).
type FactsBody struct {
	Facts []FactInput `json:"facts"`
}

// FactsResponse is the answer of the facts routes.
type FactsResponse struct {
	Facts []chatmem.Fact `json:"facts"`
}

// SearchRequest is the body of the search routes. Limit 0 means
// chatmem.DefaultSearchLimit (10); at most chatmem.MaxSearchLimit (100).
// Scope, on the conversation route only, is "conversation" (the default)
// or "user": all of the conversation's user's conversations.
type SearchRequest struct {
	Query string `json:"query"`
	Limit int    `json:"limit,omitempty"`
	Scope string `json:"scope,omitempty"`
}

// SearchHit is one message a search found: where it is (conversation and
// seq), when it was stored, who said it, its text and its score (the
// summed inverse document frequency of the query words it holds; higher
// is better).
type SearchHit struct {
	Conversation string    `json:"conversation"`
	Seq          int64     `json:"seq"`
	Time         time.Time `json:"time,omitzero"`
	Role         string    `json:"role"`
	Name         string    `json:"name,omitempty"`
	Text         string    `json:"text"`
	Score        float64   `json:"score"`
}

// SearchResponse is the answer of the search routes: the hits, best first
// (newer first among equal scores).
type SearchResponse struct {
	Query string      `json:"query"`
	Hits  []SearchHit `json:"hits"`
}

// UserList is one page of GET /v1/users: the IDs of the tenant's users
// that have a fact or a live conversation, in byte order. Next is the
// after= of the next page, empty on the last one.
type UserList struct {
	Users []string `json:"users"`
	Next  string   `json:"next"`
}

// DeleteUserResponse is the answer to DELETE /v1/users/{user}.
type DeleteUserResponse struct {
	// DeletedConversations counts the conversations this call deleted (0
	// when an earlier call already erased the user).
	DeletedConversations int `json:"deleted_conversations"`
}

// UserExportLine is one line of GET /v1/users/{user}/export: first the
// user's own facts ("type":"user"), then one line per conversation of the
// user ("type":"conversation") with its messages, its facts and their
// history, and its summary.
type UserExportLine struct {
	Type         string            `json:"type"`
	User         string            `json:"user"`
	Conversation *Conversation     `json:"conversation,omitempty"`
	Messages     []chatmem.Message `json:"messages,omitempty"`
	Facts        []chatmem.Fact    `json:"facts"`
	Summary      *chatmem.Summary  `json:"summary,omitempty"`
}

// RewindRequest is the body of POST /v1/conversations/{id}/rewind: the
// last message to keep (0: none). ToSeq is required.
type RewindRequest struct {
	ToSeq *int64 `json:"to_seq"`
}

// RedactRequest is the body of POST
// /v1/conversations/{id}/messages/{seq}/redact: the message's new content
// (required; empty only on an assistant message with tool calls), whether
// to clear its tool calls' names and arguments too, and an optional
// reason, which the server logs (never the content).
type RedactRequest struct {
	Content        *string `json:"content"`
	ClearToolCalls bool    `json:"clear_tool_calls,omitempty"`
	Reason         string  `json:"reason,omitempty"`
}

// RedactResponse is the answer to a redaction: the conversation and the
// message after it.
type RedactResponse struct {
	Conversation Conversation    `json:"conversation"`
	Message      chatmem.Message `json:"message"`
}
