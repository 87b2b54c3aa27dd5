package chatmem

import (
	"context"
	"fmt"
)

// RewindOptions qualify one Memory.Rewind.
type RewindOptions struct {
	// ExpectedLastSeq, if set, makes the rewind fail with ErrConflict
	// unless the conversation's LastSeq is *ExpectedLastSeq: the last
	// message as the caller knows it, so that a rewind decided on what
	// the caller saw never deletes messages appended since. Without it
	// Rewind reads the LastSeq first, and still fails with ErrConflict if
	// an append lands between that read and the rewind.
	ExpectedLastSeq *int64
	// ExpectedRevision, if set, makes the rewind fail with ErrConflict
	// unless the conversation's Revision is *ExpectedRevision, checked in
	// the same atomic step as the rewind: a rewind decided on a read then
	// never cuts messages written after it, even if another rewind and
	// appends brought the conversation back to the same LastSeq. A store
	// that is not a RevisionRewinder wraps ErrInvalid.
	ExpectedRevision *int64
}

// Rewind takes the conversation back to message toSeq, as if the messages
// after it had never been appended: they are deleted with everything
// derived from them (the running totals, a summary covering any of them,
// the facts they stated, the user's facts taken from them, their index
// entries and vectors, and the
// idempotency keys of their appends), in one atomic step of the store; see
// Rewinder. The next append continues at toSeq+1. It returns the
// conversation after the rewind.
//
// toSeq below 0 or past the last seq wraps ErrInvalid, a conversation
// that does not exist is ErrNotFound, and a LastSeq or Revision other
// than the expected one is ErrConflict; nothing changes on error. A store that
// cannot rewind wraps ErrInvalid.
//
// Rewind drops what this Memory keeps of the conversation between turns
// (its cached tail, summary and facts). A summary, facts or vectors the
// worker made from the rewound messages are not stored after the rewind
// (it checks the Revision it read the messages at, in this process under
// the same lock as the rewind, and does the work again from the
// conversation as it is); with several processes, a write that checked
// just before another process's rewind may still land.
func (m *Memory) Rewind(ctx context.Context, key Key, toSeq int64, opts RewindOptions) (Conversation, error) {
	if err := key.Validate(); err != nil {
		return Conversation{}, err
	}
	rw := m.caps.rewinder
	if rw == nil {
		return Conversation{}, fmt.Errorf("%w: this store cannot rewind", ErrInvalid)
	}
	if toSeq < 0 {
		return Conversation{}, fmt.Errorf("%w: cannot rewind to seq %d", ErrInvalid, toSeq)
	}
	var rrw RevisionRewinder
	if opts.ExpectedRevision != nil {
		if rrw = m.caps.revisionRewinder; rrw == nil {
			return Conversation{}, fmt.Errorf("%w: this store cannot check a revision on rewind", ErrInvalid)
		}
	}
	var expected int64
	if opts.ExpectedLastSeq != nil {
		expected = *opts.ExpectedLastSeq
	} else {
		conv, err := m.store.Conversation(ctx, key)
		if err != nil {
			return Conversation{}, fmt.Errorf("rewind %s: %w", key, err)
		}
		expected = conv.LastSeq
	}
	m.forget(key)
	defer m.forget(key)
	unlock := m.rewrites.lock(key)
	var conv Conversation
	var err error
	if rrw != nil {
		conv, err = rrw.RewindRevision(ctx, key, toSeq, expected, *opts.ExpectedRevision)
	} else {
		conv, err = rw.Rewind(ctx, key, toSeq, expected)
	}
	unlock()
	if err != nil {
		return Conversation{}, fmt.Errorf("rewind %s: %w", key, err)
	}
	if conv.User != "" {
		// The user's facts taken from rewound messages went too, and every
		// conversation of the user sees them: as SetUserFacts does.
		defer m.factLocks.user.lock(Key{Tenant: key.Tenant, ID: conv.User})()
		m.facts.forgetAll()
	}
	return conv, nil
}
