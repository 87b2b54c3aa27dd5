package chatmem

import (
	"context"
	"slices"
)

// RedactedToolName and RedactedArguments replace a tool call's function
// name and arguments when a redaction clears them (Redaction.ClearToolCalls):
// the call keeps its ID and type, so that the tool message answering it
// stays paired.
const (
	RedactedToolName  = "redacted"
	RedactedArguments = "{}"
)

// MetaRedacted is the metadata key (value "true") that Redaction.Apply
// sets on the message it redacts, and that every store keeps with it: the
// message's content is no longer what was appended. The chat proxy matches
// a message marked so to the one a client resends at its place whatever
// the content, since the client still holds the original text.
const MetaRedacted = "chatmem_redacted"

// Redaction is what Redactor.Redact writes over one stored message.
type Redaction struct {
	// Seq is the message's sequence number (from 1).
	Seq int64
	// Content replaces the message's content.
	Content string
	// ClearToolCalls replaces the function name and arguments of each of
	// the message's tool calls with RedactedToolName and RedactedArguments.
	ClearToolCalls bool
	// Tokens is the redacted message's count (Apply's result counted by
	// the conversation's Counter).
	Tokens int
	// ExpectedLastSeq and ExpectedRevision are the conversation's LastSeq
	// and Revision as the caller read them when it read the message and
	// counted it: the redaction fails with ErrConflict unless both still
	// hold, so the message redacted is the one counted, and a redaction
	// decided on what the caller saw never lands on a conversation that
	// moved on.
	ExpectedLastSeq  int64
	ExpectedRevision int64
}

// Apply returns m as r leaves it: the content replaced and, with
// ClearToolCalls, the tool calls' names and arguments; the seq, role,
// name, tool call ID, time and metadata stay, and MetaRedacted is added to
// the metadata. Tokens is set to r.Tokens.
func (r Redaction) Apply(m Message) Message {
	m = m.Clone()
	m.Content = r.Content
	if m.Metadata == nil {
		m.Metadata = make(map[string]string, 1)
	}
	m.Metadata[MetaRedacted] = "true"
	m.Tokens = r.Tokens
	if r.ClearToolCalls {
		m.ToolCalls = slices.Clone(m.ToolCalls)
		for i := range m.ToolCalls {
			m.ToolCalls[i].Function = FunctionCall{Name: RedactedToolName, Arguments: RedactedArguments}
		}
	}
	return m
}

// Redactor replaces the text of one stored message, to remove personal
// data from it, with everything derived from the old text. Memory.Redact
// finds it by a type assertion; every store in this module implements it.
type Redactor interface {
	// Redact writes r over message r.Seq (see Redaction.Apply) and sets
	// its tokens to r.Tokens, atomically, if the conversation's LastSeq is
	// still r.ExpectedLastSeq and its Revision r.ExpectedRevision:
	// ErrConflict otherwise, so a redaction racing an append or a rewind
	// is refused, never interleaved with it. It wraps ErrInvalid for a bad
	// key, r.Seq < 1 or r.Seq > r.ExpectedLastSeq, or negative r.Tokens
	// (checked before anything is read), and returns ErrNotFound for a
	// conversation that does not exist (or has expired). Nothing changes
	// on error.
	//
	// In the same atomic step it moves the running totals of the messages
	// after r.Seq and the conversation's Tokens (or SystemTokens, for a
	// system message) by the difference of the counts; adds one to
	// Revision and sets UpdatedAt to now (CreatedAt, LastSeq, Turns, the
	// expiry, the tokenizer and the user stay); deletes the summary if it
	// covers r.Seq (the summarizer redoes it); deletes every value of a
	// fact stated by the message (SourceSeq r.Seq) from the fact's
	// history, so the value before it, if any, is current again, and so
	// for the user's facts taken from it (Fact.Conversation the
	// conversation's ID); replaces the message's index entries (the
	// conversation's and its user's) with those of the redacted message,
	// or leaves it to the index's catch-up if the message was not indexed
	// yet; deletes its vectors under every model (it is not embedded
	// again); and clears the fingerprint recorded with the idempotency key
	// of the append that stored it, which was computed from the old text
	// (a retry of that append still replays, now the redacted message; the
	// key reused with other messages is replayed too, rather than
	// refused). The fact extraction mark stays: the redacted message is
	// not extracted again.
	//
	// A store that keeps a user's data where one atomic step with the
	// conversation's cannot reach (Redis Cluster's slots) updates the
	// user's facts and index in a step after it, and says so.
	//
	// It returns the conversation and the message after the redaction. It
	// is safe for concurrent use.
	Redact(ctx context.Context, key Key, r Redaction) (Conversation, Message, error)
}
