package chatmem

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Options configure a Memory. Counter is required; the zero value of every
// other field means its default.
type Options struct {
	// Counter counts the messages of new conversations; its Name is recorded
	// with each conversation.
	Counter Counter
	// Counters resolves a tokenizer name (a conversation's recorded one, or
	// one asked for in ContextOptions) to a Counter. Nil: only Counter's
	// name resolves.
	Counters func(name string) (Counter, error)
	// Limits bound message and batch sizes.
	Limits Limits
	// Now is the clock. Nil: time.Now.
	Now func() time.Time
	// Logger receives what Memory logs. Nil: slog.DiscardHandler.
	Logger *slog.Logger
}

// Memory is conversation memory: it validates and counts messages once as
// they are appended, and assembles each turn's context under a Policy with
// one bounded read from the Store. It is safe for concurrent use.
type Memory struct {
	store    Store
	counter  Counter
	counters func(string) (Counter, error)
	limits   Limits
	now      func() time.Time
	log      *slog.Logger
}

// New returns a Memory over store.
func New(store Store, opts Options) (*Memory, error) {
	if store == nil || opts.Counter == nil {
		return nil, fmt.Errorf("%w: chatmem.New needs a store and a counter", ErrInvalid)
	}
	m := &Memory{store: store, counter: opts.Counter, counters: opts.Counters, limits: opts.Limits, now: opts.Now, log: opts.Logger}
	if m.now == nil {
		m.now = time.Now
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	return m, nil
}

// Store returns the store Memory reads and writes.
func (m *Memory) Store() Store { return m.store }

// Counter resolves a tokenizer name; the empty name is the default counter.
// It wraps ErrInvalid for an unknown name.
func (m *Memory) Counter(name string) (Counter, error) {
	if name == "" || name == m.counter.Name() {
		return m.counter, nil
	}
	if m.counters != nil {
		return m.counters(name)
	}
	return nil, fmt.Errorf("%w: unknown tokenizer %q", ErrInvalid, name)
}

// maxAppendRetries bounds how often Append re-reads the tail after another
// writer got in between its validation read and its write.
const maxAppendRetries = 8

// Append validates msgs, counts each with the conversation's counter and
// stores them at the end of the conversation, creating it if needed.
// Messages with a CreatedAt of zero get the clock's time. Tool messages must
// answer the open calls of the conversation's trailing assistant message (or
// of one earlier in the batch). Bad input wraps ErrInvalid or ErrTooLarge
// and writes nothing; see Store.Append for ErrConflict and idempotency.
func (m *Memory) Append(ctx context.Context, key Key, msgs []Message, opts AppendOptions) (AppendResult, error) {
	if err := key.Validate(); err != nil {
		return AppendResult{}, err
	}
	if len(msgs) == 0 {
		return AppendResult{}, fmt.Errorf("%w: no messages to append", ErrInvalid)
	}
	// Check each message before any I/O; the history check follows once the
	// conversation's tail is known.
	if l := m.limits.withDefaults(); over(len(msgs), l.MaxBatch) {
		return AppendResult{}, fmt.Errorf("%w: %d messages in one append, over the limit of %d", ErrTooLarge, len(msgs), l.MaxBatch)
	}
	for i, msg := range msgs {
		if err := msg.Validate(m.limits); err != nil {
			return AppendResult{}, fmt.Errorf("message %d: %w", i, err)
		}
	}
	if opts.Now.IsZero() {
		opts.Now = m.now()
	}
	for attempt := 0; ; attempt++ {
		res, retry, err := m.append(ctx, key, msgs, opts)
		if !retry || attempt == maxAppendRetries {
			return res, err
		}
	}
}

// append makes one attempt. retry reports a conflict with a concurrent
// writer that only this attempt's own validation read expected.
func (m *Memory) append(ctx context.Context, key Key, msgs []Message, opts AppendOptions) (_ AppendResult, retry bool, _ error) {
	conv, err := m.store.Conversation(ctx, key)
	switch {
	case errors.Is(err, ErrNotFound):
		conv = Conversation{Key: key}
	case err != nil:
		return AppendResult{}, false, fmt.Errorf("append to %s: %w", key, err)
	}
	tokenizer := conv.Tokenizer
	if tokenizer == "" {
		tokenizer = opts.Tokenizer
	}
	counter, err := m.Counter(tokenizer)
	if err != nil {
		return AppendResult{}, false, err
	}
	opts.Tokenizer = counter.Name()

	var prior []Message
	if needsPrior(msgs) && conv.LastSeq > 0 {
		// Tool results answer calls stored earlier: read the last turn and
		// pin the write to it, so no other append can slip in between.
		if prior, err = m.store.Tail(ctx, key, TailQuery{Turns: 1}); err != nil && !errors.Is(err, ErrNotFound) {
			return AppendResult{}, false, fmt.Errorf("append to %s: %w", key, err)
		}
		if opts.ExpectedLastSeq == nil {
			last := conv.LastSeq
			if len(prior) > 0 {
				last = prior[len(prior)-1].Seq
			}
			opts.ExpectedLastSeq = &last
			retry = true
		}
	}
	if err := ValidateHistory(prior, msgs, m.limits); err != nil {
		return AppendResult{}, false, err
	}
	counted := make([]Message, len(msgs))
	for i, msg := range msgs {
		msg = msg.Clone()
		msg.Seq = 0
		if msg.Tokens, err = counter.Count(ctx, msg); err != nil {
			return AppendResult{}, false, fmt.Errorf("count message %d: %w", i, err)
		}
		if msg.CreatedAt.IsZero() {
			msg.CreatedAt = opts.Now
		}
		counted[i] = msg
	}
	res, err := m.store.Append(ctx, key, counted, opts)
	if err != nil {
		return AppendResult{}, retry && errors.Is(err, ErrConflict), fmt.Errorf("append to %s: %w", key, err)
	}
	return res, false, nil
}

// needsPrior reports whether msgs starts with tool results, which can only
// answer calls stored before the batch.
func needsPrior(msgs []Message) bool {
	return len(msgs) > 0 && msgs[0].Role == RoleTool
}

// ContextOptions qualify one context read.
type ContextOptions struct {
	// Tokenizer, if set and not the conversation's own, counts the window
	// with that tokenizer instead of the stored counts. That costs counting
	// every message read on each call (the stored running totals no longer
	// apply), so it suits inspection more than the per-turn path.
	Tokenizer string
}

// Context assembles what to send for the conversation under p: pinned system
// messages and the policy's window, with Dropped counted over the whole
// conversation. It reads the conversation's metadata, its system messages and
// one bounded tail, so its cost follows the window, not the history (except
// PolicyAll, which sends the history). It wraps ErrInvalid for a bad policy,
// ErrNotFound and ErrBudgetTooSmall.
func (m *Memory) Context(ctx context.Context, key Key, p Policy, opts ContextOptions) (Window, error) {
	if err := key.Validate(); err != nil {
		return Window{}, err
	}
	if err := p.Validate(); err != nil {
		return Window{}, err
	}
	conv, err := m.store.Conversation(ctx, key)
	if err != nil {
		return Window{}, fmt.Errorf("context of %s: %w", key, err)
	}
	counter, err := m.Counter(conv.Tokenizer)
	if err != nil {
		return Window{}, err
	}
	recount := opts.Tokenizer != "" && opts.Tokenizer != counter.Name()
	if recount {
		if counter, err = m.Counter(opts.Tokenizer); err != nil {
			return Window{}, err
		}
	}
	if o, ok := counter.(RequestOverhead); ok {
		p.Overhead = o.RequestOverhead()
	}

	var msgs []Message
	if recount {
		msgs, err = m.recountedTail(ctx, key, conv, p, counter)
	} else {
		msgs, err = m.tail(ctx, key, conv, p)
	}
	if err != nil {
		return Window{}, fmt.Errorf("context of %s: %w", key, err)
	}
	w, err := Apply(p, msgs)
	if err != nil {
		return Window{}, err
	}
	if p.Kind != PolicyAll && conv.Turns > 0 && w.Parts.Recent == 0 {
		// The bounded tail held no user message that fits, so the newest
		// one is too big: read the last turn to say how big.
		last, err := m.store.Tail(ctx, key, TailQuery{Turns: 1})
		if err != nil {
			return Window{}, fmt.Errorf("context of %s: %w", key, err)
		}
		if recount {
			if err := recountAll(ctx, counter, last); err != nil {
				return Window{}, err
			}
		}
		pinned, _ := splitPinned(msgs)
		_, recent := splitPinned(last)
		if _, err := Select(p, pinned, recent); err != nil {
			return Window{}, err
		}
	}
	w.Dropped = int(conv.LastSeq) - len(w.Messages)
	return w, nil
}

// tail reads the pinned system messages and the newest messages the policy
// can use, with the stored counts.
func (m *Memory) tail(ctx context.Context, key Key, conv Conversation, p Policy) ([]Message, error) {
	if p.Kind == PolicyAll {
		return m.store.Range(ctx, key, 0, 0)
	}
	var sys []Message
	if conv.SystemTokens > 0 {
		var err error
		if sys, err = m.store.System(ctx, key); err != nil {
			return nil, err
		}
	}
	q := TailQuery{Turns: p.Turns}
	if p.Budget > 0 {
		q.Tokens = max(p.Budget-int(conv.SystemTokens)-p.Overhead, 0)
		if q.Tokens == 0 {
			return sys, nil // Apply reports the budget as too small
		}
	}
	recent, err := m.store.Tail(ctx, key, q)
	if err != nil {
		return nil, err
	}
	return mergePinned(sys, recent), nil
}

// recountedTail reads ever larger tails (doubling) until the recounted
// messages exceed what the policy can use or the history is exhausted.
func (m *Memory) recountedTail(ctx context.Context, key Key, conv Conversation, p Policy, c Counter) ([]Message, error) {
	if p.Kind == PolicyAll || p.Budget == 0 {
		msgs, err := m.store.Range(ctx, key, 0, 0)
		if err != nil {
			return nil, err
		}
		return msgs, recountAll(ctx, c, msgs)
	}
	sys, err := m.store.System(ctx, key)
	if err != nil {
		return nil, err
	}
	if err := recountAll(ctx, c, sys); err != nil {
		return nil, err
	}
	for guess := max(p.Budget, 256); ; guess *= 2 {
		recent, err := m.store.Tail(ctx, key, TailQuery{Tokens: guess, Turns: p.Turns})
		if err != nil {
			return nil, err
		}
		if err := recountAll(ctx, c, recent); err != nil {
			return nil, err
		}
		total := 0
		for _, msg := range recent {
			if msg.Role != RoleSystem {
				total += msg.Tokens
			}
		}
		exhausted := len(recent) == 0 || recent[0].Seq == 1 || int64(guess) >= conv.Tokens
		if total > p.Budget || exhausted {
			return mergePinned(sys, recent), nil
		}
	}
}

func recountAll(ctx context.Context, c Counter, msgs []Message) error {
	for i := range msgs {
		n, err := c.Count(ctx, msgs[i])
		if err != nil {
			return fmt.Errorf("count message %d: %w", msgs[i].Seq, err)
		}
		msgs[i].Tokens = n
	}
	return nil
}

// mergePinned returns the system messages followed by recent without the
// system messages it holds (they are in sys already).
func mergePinned(sys, recent []Message) []Message {
	out := make([]Message, 0, len(sys)+len(recent))
	out = append(out, sys...)
	for _, m := range recent {
		if m.Role != RoleSystem {
			out = append(out, m)
		}
	}
	return out
}
