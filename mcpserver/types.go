package mcpserver

import (
	"time"

	"github.com/chatmem/chatmem"
)

// The tools' inputs and outputs. Their JSON Schemas, which clients show the
// model, are inferred from these structs by the SDK: a field without
// omitempty is required, and the jsonschema tag is its description.
//
// A user (a person, whose conversations and facts follow them from one
// conversation to the next) is an optional `user` field beside
// `conversation`: append_messages binds a new conversation to it, the fact
// tools take one or the other, list_conversations filters by it.
// search_memory and get_context stay per conversation for now.

// ToolCall is a function call an assistant message requests, in the OpenAI
// chat format.
type ToolCall struct {
	ID       string       `json:"id" jsonschema:"the call's ID; the tool message answering it carries it as tool_call_id"`
	Type     string       `json:"type,omitempty" jsonschema:"always function (the default)"`
	Function FunctionCall `json:"function"`
}

// FunctionCall names the function a ToolCall invokes and its arguments.
type FunctionCall struct {
	Name      string `json:"name" jsonschema:"the function's name"`
	Arguments string `json:"arguments,omitempty" jsonschema:"the arguments as the model wrote them, usually a JSON object as text"`
}

// MessageInput is one message to store, in the OpenAI chat format.
type MessageInput struct {
	Role       string     `json:"role" jsonschema:"who wrote it: user, assistant, system or tool"`
	Content    string     `json:"content,omitempty" jsonschema:"the text; may be empty only for an assistant message that calls tools"`
	Name       string     `json:"name,omitempty" jsonschema:"the speaker's name, if the conversation has several"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty" jsonschema:"functions an assistant message calls"`
	ToolCallID string     `json:"tool_call_id,omitempty" jsonschema:"for a tool message: the ID of the call it answers"`
}

// AppendInput is append_messages' input.
type AppendInput struct {
	Conversation string         `json:"conversation" jsonschema:"the conversation's ID: 1 to 128 characters from A-Z a-z 0-9 . _ : @ -, starting with a letter or digit; a new ID starts a conversation"`
	User         string         `json:"user,omitempty" jsonschema:"the person the conversation is with (an ID with the rules of conversation IDs); a new conversation is bound to this user for good, so the user's facts follow them into it. Later appends may repeat it or leave it out; another user is refused"`
	Messages     []MessageInput `json:"messages" jsonschema:"the new messages, oldest first; they are added after the stored ones"`
	Context      *WindowOptions `json:"context,omitempty" jsonschema:"also return the window to send the model right after the append, under these options (get_context's), in the same call: one round trip for a chatbot's turn. {} takes get_context's defaults"`
}

// Stored is one message append_messages stored.
type Stored struct {
	Seq    int64  `json:"seq" jsonschema:"the message's sequence number in its conversation, from 1"`
	Role   string `json:"role"`
	Tokens int    `json:"tokens" jsonschema:"the message's tokens, counted once as it was stored"`
}

// AppendOutput is append_messages' result.
type AppendOutput struct {
	Conversation string         `json:"conversation"`
	User         string         `json:"user,omitempty" jsonschema:"the user the conversation belongs to, if any"`
	Messages     []Stored       `json:"messages" jsonschema:"the stored messages, in order"`
	LastSeq      int64          `json:"last_seq" jsonschema:"the conversation's newest sequence number (its message count)"`
	Tokens       int64          `json:"tokens" jsonschema:"the tokens of every message the conversation holds"`
	Context      *ContextOutput `json:"context,omitempty" jsonschema:"the window after the append, when context was given"`
}

// ContextInput is get_context's input.
type ContextInput struct {
	Conversation string `json:"conversation" jsonschema:"the conversation's ID"`
	WindowOptions
	Receipt bool `json:"receipt,omitempty" jsonschema:"also return the window's receipt: the policy, the tokens of each part, the seq ranges sent and left out, the summary, facts and recalled turns used, the timings"`
}

// WindowOptions say what window to assemble: get_context's options, and
// append_messages' context.
type WindowOptions struct {
	Policy   string `json:"policy,omitempty" jsonschema:"what to send: token_budget (the default: the newest messages that fit budget), summary_buffer (a summary of older messages plus the newest), recall (the newest plus older messages relevant to the newest user message), last_turns (the last turns turns) or all"`
	Budget   int    `json:"budget,omitempty" jsonschema:"tokens the whole window may take (default 4000 for token_budget, summary_buffer and recall; no cap for last_turns and all when omitted)"`
	Turns    int    `json:"turns,omitempty" jsonschema:"for last_turns: how many turns (default 10); a turn starts at a user message"`
	Facts    bool   `json:"facts,omitempty" jsonschema:"also send the known facts about the conversation's user as a system message"`
	Scope    string `json:"scope,omitempty" jsonschema:"for recall: conversation (the default: recall from this conversation) or user (recall from all of the conversation's user's conversations, this one included, each recalled message marked with its conversation and date)"`
	Cache    string `json:"cache,omitempty" jsonschema:"stable: keep the window's front the same from call to call, so the model provider's prompt cache serves it (the window moves in one step to low_water percent of the budget when it must); leave out for a window that slides every turn"`
	LowWater int    `json:"low_water,omitempty" jsonschema:"with cache stable: the percent of the budget the window drops to when it moves, 1 to 95 (default: 1,024 tokens below the budget; 60 under about 1,500 tokens)"`
}

// Message is a message as get_context and the resources give it.
type Message struct {
	Seq        int64      `json:"seq,omitempty" jsonschema:"the sequence number; absent for the system messages chatmem adds (facts, summary)"`
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	Name       string     `json:"name,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	Tokens     int        `json:"tokens"`
	Time       time.Time  `json:"time,omitzero" jsonschema:"when it was stored"`
	Kind       string     `json:"kind,omitempty" jsonschema:"facts or summary for a system message chatmem adds, recalled for an older message the recall policy brings back"`
}

// Summary is the rolling summary a window sends.
type Summary struct {
	Text      string `json:"text"`
	CoversSeq int64  `json:"covers_seq" jsonschema:"the last sequence number the summary stands for"`
	Tokens    int    `json:"tokens"`
}

// Fact is one fact: a user's (about the person, seen from each of their
// conversations) or a conversation's own.
type Fact struct {
	Key          string    `json:"key"`
	Value        string    `json:"value"`
	Scope        string    `json:"scope" jsonschema:"user (the person's: seen from each of their conversations) or conversation (this conversation's only)"`
	Conversation string    `json:"conversation,omitempty" jsonschema:"the conversation it was stated in, when known"`
	SetBy        string    `json:"set_by" jsonschema:"who set it: app (a client, by set_fact) or the extractor that found it"`
	SourceSeq    int64     `json:"source_seq,omitempty" jsonschema:"the message it was taken from"`
	Confidence   float64   `json:"confidence"`
	Time         time.Time `json:"time,omitzero" jsonschema:"when it was set"`
}

// ContextOutput is get_context's result.
type ContextOutput struct {
	Conversation string           `json:"conversation"`
	Policy       string           `json:"policy"`
	Messages     []Message        `json:"messages" jsonschema:"what to send the model, in order"`
	Tokens       int              `json:"tokens" jsonschema:"the tokens of the messages sent"`
	Dropped      int              `json:"dropped" jsonschema:"how many stored messages were left out"`
	Summary      *Summary         `json:"summary" jsonschema:"the summary sent, if any"`
	Facts        []Fact           `json:"facts" jsonschema:"the facts sent, if any"`
	Receipt      *chatmem.Receipt `json:"receipt,omitempty" jsonschema:"how the window was assembled, when asked for"`
}

// SearchInput is search_memory's input.
type SearchInput struct {
	Query        string `json:"query" jsonschema:"words to look for, e.g. an order number, a name or a topic; matched by word (stemmed), not by meaning"`
	Conversation string `json:"conversation,omitempty" jsonschema:"the conversation to search (give conversation or user, not both)"`
	User         string `json:"user,omitempty" jsonschema:"the user whose conversations to search, all of them at once (give conversation or user, not both)"`
	Limit        int    `json:"limit,omitempty" jsonschema:"most hits to return, 1 to 100 (default 10)"`
}

// Hit is one message search_memory found.
type Hit struct {
	Conversation string    `json:"conversation"`
	Seq          int64     `json:"seq"`
	Time         time.Time `json:"time,omitzero" jsonschema:"when it was stored"`
	Role         string    `json:"role"`
	Name         string    `json:"name,omitempty"`
	Text         string    `json:"text"`
	Score        float64   `json:"score" jsonschema:"relevance; higher is better"`
}

// SearchOutput is search_memory's result.
type SearchOutput struct {
	Query string `json:"query"`
	Hits  []Hit  `json:"hits" jsonschema:"best first"`
}

// FactOwner is what a fact tool acts on, and its result is about: a
// conversation or a user, exactly one of the two. The schema requires
// neither; the tool checks that one is given. Each tool's description says
// what the owner means to it.
type FactOwner struct {
	Conversation string `json:"conversation,omitempty" jsonschema:"the conversation's ID, for a detail of this conversation only (an order or ticket number); get_facts also gives its user's facts, as get_context sends them. Give conversation or user, not both"`
	User         string `json:"user,omitempty" jsonschema:"the user's ID, for a detail of the person (name, email, language, address, preferences), seen from each of their conversations. Give conversation or user, not both"`
}

// GetFactsInput is get_facts' input.
type GetFactsInput struct {
	FactOwner
}

// FactsOutput is get_facts' result.
type FactsOutput struct {
	FactOwner
	Facts []Fact `json:"facts" jsonschema:"the current value of each fact, by key; for a conversation its own fact wins over its user's of the same key"`
}

// SetFactInput is set_fact's input.
type SetFactInput struct {
	FactOwner
	Key   string `json:"key" jsonschema:"1 to 64 characters from a-z 0-9 _ . -, starting with a letter, e.g. name, order_id, shipping.city"`
	Value string `json:"value" jsonschema:"the value, up to 4096 bytes; it replaces the current one, which is kept as history"`
}

// SetFactOutput is set_fact's result.
type SetFactOutput struct {
	FactOwner
	Fact Fact `json:"fact"`
}

// DeleteFactInput is delete_fact's input.
type DeleteFactInput struct {
	FactOwner
	Key string `json:"key" jsonschema:"the fact's key"`
}

// DeleteFactOutput is delete_fact's result.
type DeleteFactOutput struct {
	FactOwner
	Key     string `json:"key"`
	Deleted bool   `json:"deleted"`
}

// ListInput is list_conversations' input.
type ListInput struct {
	User   string `json:"user,omitempty" jsonschema:"list only this user's conversations (default: every conversation)"`
	Limit  int    `json:"limit,omitempty" jsonschema:"most conversations to return, 1 to 1000 (default 50)"`
	Cursor string `json:"cursor,omitempty" jsonschema:"next_cursor of the previous page, to continue from it"`
}

// Conversation describes one stored conversation.
type Conversation struct {
	ID        string    `json:"id"`
	User      string    `json:"user,omitempty" jsonschema:"the user it belongs to, if any"`
	Messages  int64     `json:"messages" jsonschema:"how many messages it holds (its newest sequence number)"`
	Tokens    int64     `json:"tokens" jsonschema:"the tokens of all its messages"`
	Turns     int64     `json:"turns" jsonschema:"its user messages"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// ListOutput is list_conversations' result.
type ListOutput struct {
	Conversations []Conversation `json:"conversations" jsonschema:"ordered by ID"`
	NextCursor    string         `json:"next_cursor,omitempty" jsonschema:"pass as cursor for the next page; absent on the last page"`
}

// DeleteInput is delete_conversation's input.
type DeleteInput struct {
	Conversation string `json:"conversation" jsonschema:"the conversation's ID"`
}

// DeleteOutput is delete_conversation's result.
type DeleteOutput struct {
	Conversation string `json:"conversation"`
	Deleted      bool   `json:"deleted"`
}

func messageOf(m chatmem.Message) Message {
	out := Message{
		Seq: m.Seq, Role: string(m.Role), Content: m.Content, Name: m.Name,
		ToolCallID: m.ToolCallID, Tokens: m.Tokens, Time: m.CreatedAt, Kind: m.Metadata[chatmem.MetaKey],
	}
	for _, c := range m.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, ToolCall{ID: c.ID, Type: c.Type, Function: FunctionCall(c.Function)})
	}
	return out
}

// factOf converts a fact. A fact read without its scope (Memory.Facts, or
// the facts of a conversation without a user) is the conversation's.
func factOf(f chatmem.Fact) Fact {
	scope := f.Scope
	if scope == "" {
		scope = chatmem.ScopeConversation
	}
	return Fact{Key: f.Key, Value: f.Value, Scope: scope, Conversation: f.Conversation, SetBy: f.SetBy, SourceSeq: f.SourceSeq,
		Confidence: f.Confidence, Time: f.CreatedAt}
}

func factsOf(fs []chatmem.Fact) []Fact {
	out := make([]Fact, len(fs))
	for i, f := range fs {
		out[i] = factOf(f)
	}
	return out
}

func conversationOf(c chatmem.Conversation) Conversation {
	return Conversation{
		ID: c.Key.ID, User: c.User, Messages: c.LastSeq, Tokens: c.Tokens + c.SystemTokens, Turns: c.Turns,
		CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt,
	}
}
