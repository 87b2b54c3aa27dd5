package chatmem

import (
	"context"
	"errors"
)

// Turn appends msgs as Append does and assembles the context under p as
// Context does, as the conversation stands right after the append: the
// window holds the appended messages and every message stored before
// them (so a message acknowledged to anyone before Turn was called, by
// any process, is in it). When the tail cache or the append's own reads
// serve it, nothing appended after them is; when the window is read from
// the store after the append (the second case below without a
// TailAppender, or after a conflict), a message another writer appended in
// the meantime may be in it too, after these, as Context would show it. It is one
// turn of a chatbot, the new user message and what to send the model,
// in as few round trips to the store as it allows:
//
//   - When Memory's tail cache holds the conversation up to its last
//     message, the append is made conditional on that message
//     and revision (ExpectedLastSeq and ExpectedRevision; opts may set
//     them only to the entry's, as a caller that read the cache with
//     CachedTail does) and on the conversation's tokenizer: if it lands,
//     nothing was appended between the cached messages and these, so the
//     window comes from the cache and the append's result, with no read.
//     A turn is then one store write. If another writer got in between
//     (the condition fails with ErrConflict), Turn appends as Append
//     does and reads the context as Context does; but when the condition
//     was the caller's own (opts sets both ExpectedLastSeq and
//     ExpectedRevision), Turn returns the ErrConflict, having written
//     nothing, and forgets the entry, so that the caller's next Turn
//     reads the tail with its append. A caller that sets only one of
//     them gets Append's way, with its own condition alone.
//   - Otherwise (a process's first turn on the conversation, or a new
//     conversation), the messages are counted with the counter a new
//     conversation would get and the append checks that the conversation
//     is kept under it (ExpectedTokenizer), instead of reading it first.
//     When the store is a TailAppender and the window comes from the
//     tail (a budget, turns, summary or recall policy under the
//     conversation's own counts), the append reads the conversation's
//     system messages and the newest messages the policy can use in its
//     own round trip (planned as the read plans its tail: prefetchQuery),
//     and they fill the tail cache: the turn is one round trip (plus a
//     summary-buffer policy's summary and recall's search).
//     Otherwise the window is read after the append, for the
//     conversation its result describes, with no second read of its
//     metadata.
//
// opts and copts are Append's and Context's. A policy that fails
// Policy.Validate, and what Append refuses, return an error before
// anything is written. An error of the context's assembly (such as
// ErrBudgetTooSmall) comes with the result of the append, which landed.
func (m *Memory) Turn(ctx context.Context, key Key, msgs []Message, opts AppendOptions, p Policy, copts ContextOptions) (AppendResult, Window, error) {
	// Check everything that can be checked before any I/O.
	if err := p.Validate(); err != nil {
		return AppendResult{}, Window{}, err
	}
	if err := m.checkAppend(key, msgs, &opts); err != nil {
		return AppendResult{}, Window{}, err
	}
	// Append: without a read first when it can (turnAppend), else as
	// Append does.
	res, landed, err := m.turnAppend(ctx, key, msgs, opts, p, copts)
	if err != nil {
		return AppendResult{}, Window{}, err
	}
	if !landed {
		opts.unconditional = true // the cache's entry is behind, or not there
		if res, err = m.appendChecked(ctx, key, msgs, opts); err != nil {
			return AppendResult{}, Window{}, err
		}
	}
	// Read the context of the conversation the append's result describes
	// (Context's recipe: see context).
	known := &res.Conversation
	if res.Replayed {
		known = nil // as it is now: read it
	}
	w, err := m.context(ctx, key, p, copts, known)
	return res, w, err
}

// turnAppend makes Turn's append without reading the conversation first:
// conditional on the tail cache's last message when it has the
// conversation (which it then extends with the appended messages), else
// on the tokenizer alone, reading the tail p needs with the append when
// the store can (which then fills the cache). landed false (with no error)
// means it did not try, or a condition it added failed, and Append's way
// is next.
func (m *Memory) turnAppend(ctx context.Context, key Key, msgs []Message, opts AppendOptions, p Policy, copts ContextOptions) (_ AppendResult, landed bool, _ error) {
	if needsPrior(msgs) || opts.ExpectedTokenizer != "" {
		return AppendResult{}, false, nil
	}
	// The counter a new conversation gets; an existing one must be kept
	// under it, which the store checks.
	counter, err := m.Counter(opts.Tokenizer)
	if err != nil {
		return AppendResult{}, false, nil
	}
	entry, last, rev, tokenizer, cached := m.tails.peek(key)
	// The caller's own condition on the entry's last message and revision
	// (read from CachedTail) is the one the cache's fast path makes. Only
	// a caller that set both owns its conflict: with one, the other is
	// the cache's, which may be the one behind.
	own := opts.ExpectedLastSeq != nil && opts.ExpectedRevision != nil
	conditional := cached && tokenizer == counter.Name() && last > 0 &&
		(opts.ExpectedLastSeq == nil || *opts.ExpectedLastSeq == last) &&
		(opts.ExpectedRevision == nil || *opts.ExpectedRevision == rev)
	if cached && tokenizer != counter.Name() {
		return AppendResult{}, false, nil // Append's way counts with the conversation's own
	}
	try := opts
	try.Tokenizer, try.ExpectedTokenizer = counter.Name(), counter.Name()
	var tail *TailQuery // read with the append, with room for the next turns
	var fill TailQuery  // what the entry filled from it must answer
	if conditional {
		// On the revision too: a rewind and appends back to the same
		// LastSeq (in another process) make the entry's messages stale.
		try.ExpectedLastSeq, try.ExpectedRevision = &last, &rev
	} else if q, ok := m.prefetchQuery(p, copts, counter); ok {
		fill = q
		more := withSlack(q)
		tail = &more
	}
	res, read, err := m.appendCounted(ctx, key, nil, msgs, counter, try, tail)
	switch {
	case errors.Is(err, ErrConflict) && conditional && own:
		// The caller's own condition, read from the cache: the entry is
		// behind the store (or the user or tokenizer differ), and the
		// caller reads the store to decide again. The entry goes, so
		// that its next Turn reads the tail with its append.
		m.tails.drop(key)
		return AppendResult{}, false, err
	case errors.Is(err, ErrConflict):
		// Appended to meanwhile, or kept under another tokenizer: Append
		// sorts it out (a conflict of the caller's own ExpectedLastSeq or
		// user is its error again). An entry the condition was made from
		// is behind the store: it goes.
		if conditional {
			m.tails.drop(key)
		}
		return AppendResult{}, false, nil
	case err != nil:
		return AppendResult{}, false, err
	}
	if conditional && !res.Replayed {
		m.tails.appended(entry, last, res.Conversation, res.Messages)
	}
	if read != nil && len(read.Recent) > 0 {
		// put checks that the reads match the append's totals. (Nothing
		// read, the store could not, or the budget is below the new
		// message: context reads as it would have.)
		m.tails.put(key, res.Conversation, read.System, read.Recent, fill)
	}
	return res, true, nil
}

// prefetchQuery is what the entry Turn fills from its append's reads must
// answer when the tail cache does not hold the conversation (see
// TailAppender; the append reads it withSlack, as cachedTail reads to fill
// an entry): the tail Context plans under p (planContext, tailQuery)
// before the conversation's system tokens and copts' reserved messages
// are known (they only make it ask less). A recall policy's tail is its
// recent part, which Context asks for only when the conversation outgrew
// the budget (else it takes all of it): the prefetch bets on that, the
// case where recall matters; on a conversation between the two, the entry
// falls short and the window is read again, as without the prefetch. ok
// is false when the window is not read from the tail under the
// conversation's counts (PolicyAll, a recount to another tokenizer, the
// cache off), or the budget leaves nothing to read.
func (m *Memory) prefetchQuery(p Policy, copts ContextOptions, counter Counter) (_ TailQuery, ok bool) {
	if m.tails.max == 0 || p.Kind == PolicyAll {
		return TailQuery{}, false
	}
	pl, err := m.planContext(p, copts, counter)
	if err != nil || pl.recount {
		return TailQuery{}, false
	}
	q := pl.p.tailQuery(0, -1)
	if p.Budget > 0 && q.Tokens == 0 {
		return TailQuery{}, false
	}
	return q, q.CheckSelects() == nil
}
