package chatmem

import (
	"context"
	"fmt"
)

// RedactOptions qualify one Memory.Redact.
type RedactOptions struct {
	// ExpectedLastSeq, if set, makes the redaction fail with ErrConflict
	// unless the conversation's LastSeq is *ExpectedLastSeq: the last
	// message as the caller knows it (the REST API's If-Match), so that a
	// redaction decided on what the caller saw never lands on a
	// conversation that moved on. Without it Redact reads the LastSeq
	// first, and still fails with ErrConflict if an append, a rewind or
	// another redaction lands between that read and the redaction.
	ExpectedLastSeq *int64
	// ClearToolCalls also replaces the function name and arguments of the
	// message's tool calls (RedactedToolName, RedactedArguments); their
	// IDs stay, so the tool messages answering them stay paired.
	ClearToolCalls bool
}

// Redact replaces the content of message seq with content, to remove
// personal data from it, in one atomic step of the store (see Redactor):
// the message keeps its seq, role, name, tool call ID, time and metadata,
// and is marked with MetaRedacted;
// its tokens are counted again with the conversation's tokenizer and the
// running totals follow; a summary covering it is dropped (the
// summarizer redoes it), the facts and user facts it stated leave their
// histories, its index entries are those of the new text, its vectors go
// (it is not embedded again), and the fingerprint of the append that
// stored it is cleared. It returns the conversation and the message after
// the redaction; the conversation's Revision moves on.
//
// The redacted message must be a valid message (Message.Validate):
// content may be empty only on an assistant message that keeps tool
// calls. A seq outside 1..LastSeq or an invalid result wraps ErrInvalid,
// a conversation that does not exist is ErrNotFound, and a conversation
// that moved on (ExpectedLastSeq, or a write between Redact's read and
// its redaction) is ErrConflict; nothing changes on error. A store that
// cannot redact wraps ErrInvalid.
//
// Redact drops what this Memory keeps of the conversation between turns
// (its cached tail, summary and facts); other processes' tail caches see
// the new Revision on their next read of the conversation. A summary,
// facts or vectors the worker made from the old text are not stored after
// the redaction (it checks the Revision it read the messages at, in this
// process under the same lock as the redaction, and does the work again
// from the redacted text); with several processes, a write that checked
// just before another process's redaction may still land: redact again
// if that matters, once the workers are idle.
func (m *Memory) Redact(ctx context.Context, key Key, seq int64, content string, opts RedactOptions) (Conversation, Message, error) {
	if err := key.Validate(); err != nil {
		return Conversation{}, Message{}, err
	}
	rd := m.caps.redactor
	if rd == nil {
		return Conversation{}, Message{}, fmt.Errorf("%w: this store cannot redact", ErrInvalid)
	}
	if seq < 1 {
		return Conversation{}, Message{}, fmt.Errorf("%w: cannot redact message %d", ErrInvalid, seq)
	}
	conv, err := m.store.Conversation(ctx, key)
	if err != nil {
		return Conversation{}, Message{}, fmt.Errorf("redact %s: %w", key, err)
	}
	if opts.ExpectedLastSeq != nil && *opts.ExpectedLastSeq != conv.LastSeq {
		return Conversation{}, Message{}, fmt.Errorf("redact %s: %w: conversation is at seq %d, not %d", key, ErrConflict, conv.LastSeq, *opts.ExpectedLastSeq)
	}
	if seq > conv.LastSeq {
		return Conversation{}, Message{}, fmt.Errorf("%w: no message %d to redact in conversation %s (last seq %d)", ErrInvalid, seq, key, conv.LastSeq)
	}
	msgs, err := m.store.Range(ctx, key, seq-1, 1)
	if err != nil {
		return Conversation{}, Message{}, fmt.Errorf("redact %s: %w", key, err)
	}
	if len(msgs) != 1 || msgs[0].Seq != seq {
		return Conversation{}, Message{}, fmt.Errorf("redact %s: %w: message %d went while it was read", key, ErrConflict, seq)
	}
	r := Redaction{Seq: seq, Content: content, ClearToolCalls: opts.ClearToolCalls, ExpectedLastSeq: conv.LastSeq, ExpectedRevision: conv.Revision}
	redacted := r.Apply(msgs[0])
	// The limits apply to what the caller wrote: the MetaRedacted marker
	// is not counted against the metadata's.
	checked := redacted.Clone()
	delete(checked.Metadata, MetaRedacted)
	if err := checked.Validate(m.limits); err != nil {
		return Conversation{}, Message{}, fmt.Errorf("redact message %d: %w", seq, err)
	}
	counter, err := m.Counter(conv.Tokenizer)
	if err != nil {
		return Conversation{}, Message{}, err
	}
	counted := redacted.Clone()
	counted.Seq, counted.Tokens = 0, 0
	if r.Tokens, err = counter.Count(ctx, counted); err != nil {
		return Conversation{}, Message{}, fmt.Errorf("count message %d: %w", seq, err)
	}
	m.forget(key)
	defer m.forget(key)
	unlock := m.rewrites.lock(key)
	conv, out, err := rd.Redact(ctx, key, r)
	unlock()
	if err != nil {
		return Conversation{}, Message{}, fmt.Errorf("redact %s: %w", key, err)
	}
	if conv.User != "" {
		// The user's facts taken from the message went too, and every
		// conversation of the user sees them: as Rewind does.
		defer m.factLocks.user.lock(Key{Tenant: key.Tenant, ID: conv.User})()
		m.facts.forgetAll()
	}
	return conv, out, nil
}
