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
	// Logger receives what Memory logs. Nil: nothing is logged, but for
	// one warning that work arrived for a worker that was never started
	// (see Start), which goes to slog.Default.
	Logger *slog.Logger

	// Summarizer writes the rolling summaries PolicySummaryBuffer sends.
	// Nil: no summaries are written, and summary_buffer sends a plain
	// token window. Needs a store that implements SummaryStore.
	Summarizer Summarizer
	// Extractors find facts in appended messages. Needs a store that
	// implements FactStore.
	Extractors []Extractor
	// Embedder, if set, turns on the embedding retriever: the worker embeds
	// appended messages and stores the vectors, and PolicyRecall fuses a
	// vector search for the newest user message with its lexical ranking.
	// Needs a store that implements VectorStore. Nil (the default): recall
	// is lexical only and no model is called.
	Embedder Embedder
	// Summary tunes when summaries are written.
	Summary SummaryOptions
	// Sync runs summarization and fact extraction inside Append (and a lagging
	// summary's catch-up inside Context) instead of in the worker that Start
	// runs. Off by default: the worker keeps that work off the request path.
	Sync bool
	// QueueSize bounds the worker's queue of conversations with work
	// pending. Zero means 1024. When it is full, new work is dropped and
	// logged: the summary catches up at the conversation's next append (it
	// reads the store), and so do the facts with a store that keeps a fact
	// mark (FactMarker, every store in this module), or at the next Start.
	QueueSize int
	// Workers is how many goroutines do that work, each conversation in one
	// of them at a time, in order. Zero means DefaultWorkers (4); a
	// summarizer or extractor that calls a model spends most of its time
	// waiting, so more workers than cores pay off.
	Workers int
	// TailCacheBytes bounds the newest messages Memory keeps per
	// conversation between turns, so that a turn reads from the store only
	// the conversation's row and what other processes appended since (see
	// Context). Zero means DefaultTailCacheBytes (32 MiB); negative turns
	// the cache off, and every turn reads its window from the store.
	TailCacheBytes int64
	// Tracer, if set, traces the context assembly (a span with what the
	// window holds: see assemblyAttrs) and every call to the store. Nil
	// (the default) traces nothing, at no cost.
	Tracer Tracer
	// Ledger, if set, counts the usage the summarizer, the extractors and
	// the embedder report (ReportUsage), by tenant, user, conversation,
	// model and kind, and holds a tenant's model calls while it is over
	// its memory spend limit (Ledger.Allow): the worker keeps the work
	// and does it once the limit allows. Start starts the ledger's
	// flushes, and Close writes what it has not written yet. Nil: nothing
	// is counted or limited.
	Ledger *Ledger
}

// SummaryOptions tune the rolling summary. The zero value means the
// defaults. Summaries are written with hysteresis, so the summarizer is not
// called every turn: once the messages after the summary hold more than
// Trigger tokens, the summary is extended until about Target tokens remain
// unsummarized.
//
// With Trigger unset (the default), both follow the budget the
// conversation's latest summary_buffer read in this Memory left for the
// summary and the messages after it: the policy's budget less the pinned
// system messages, the facts, the request overhead and the reserved
// messages (with recall, the recent part's budget less the same). The
// summary is extended once the messages after it pass 40% of that budget,
// until about 20% remain, and it is kept within 55% of the budget
// (BoundedSummarizer). So summary_buffer sends a summary at any budget with
// no tuning, and the summary, which stands for everything older, gets the
// larger share (the values were chosen on LoCoMo: docs/evaluation.md).
// Until a conversation's first such read, and when Trigger is set, the
// fixed values apply (Trigger 2000, Target Trigger/2).
//
// Every summary_buffer read counts (Context, Turn, and the server's
// context route, proxy and MCP tool, which call them) except previews
// (ContextOptions.Preview: the inspector, an evaluation's questions,
// ?preview=true), which never change what is summarized or when. The
// latest read wins, not the smallest: a conversation moved to a larger
// budget gets summaries for it, rather than ones sized for a budget it
// was once read with.
type SummaryOptions struct {
	Trigger int // default: follows the budget, else 2000
	Target  int // default: follows the budget, else Trigger/2
	// Timeout bounds one summarizer or extractor call; default 60s.
	Timeout time.Duration
	// Retries is how often a failed call is retried, with exponential
	// backoff from Backoff (default 3 retries from 500ms).
	Retries int
	Backoff time.Duration
}

func (o SummaryOptions) withDefaults() SummaryOptions {
	if o.Trigger <= 0 {
		o.Trigger = 2000
	}
	if o.Target <= 0 || o.Target >= o.Trigger {
		o.Target = o.Trigger / 2
	}
	if o.Timeout <= 0 {
		o.Timeout = 60 * time.Second
	}
	if o.Retries <= 0 {
		o.Retries = 3
	}
	if o.Backoff <= 0 {
		o.Backoff = 500 * time.Millisecond
	}
	return o
}

// Memory is conversation memory: it validates and counts messages once as
// they are appended, and assembles each turn's context under a Policy with
// one bounded read from the Store. It is safe for concurrent use.
type Memory struct {
	// store is the store, traced when Options.Tracer is set; raw is the
	// store as New got it, which Store hands out.
	store      Store
	raw        Store
	caps       capabilities // store's optional interfaces
	tracer     Tracer       // nil: no tracing
	counter    Counter
	counters   func(string) (Counter, error)
	limits     Limits
	now        func() time.Time
	log        *slog.Logger
	defaultLog bool // no Options.Logger: warnNotStarted uses slog.Default
	summarizer Summarizer
	extractors []Extractor
	sumOpts    SummaryOptions
	// autoSummary: Trigger and Target follow each conversation's budget.
	autoSummary bool
	budgets     summaryBudgets
	embedder    Embedder
	ledger      *Ledger
	sync        bool
	worker      worker
	summaries   summaryCache
	facts       factCache
	factLocks   factLocks
	blocks      blockCounts
	tails       tailCache

	// rewrites serializes this Memory's rewinds and redactions with the
	// check and write of what workers derive from messages (summaries).
	rewrites lockStripes
}

// New returns a Memory over store.
func New(store Store, opts Options) (*Memory, error) {
	if store == nil || opts.Counter == nil {
		return nil, fmt.Errorf("%w: chatmem.New needs a store and a counter", ErrInvalid)
	}
	m := &Memory{
		store: store, counter: opts.Counter, counters: opts.Counters, limits: opts.Limits, now: opts.Now, log: opts.Logger,
		summarizer: opts.Summarizer, extractors: opts.Extractors, sumOpts: opts.Summary.withDefaults(), sync: opts.Sync,
		embedder: opts.Embedder, autoSummary: opts.Summary.Trigger <= 0, ledger: opts.Ledger,
	}
	m.caps = capabilitiesOf(store)
	if err := m.caps.check(opts); err != nil {
		return nil, err
	}
	m.raw = store
	if opts.Tracer != nil {
		m.tracer = opts.Tracer
		m.store = tracedStore{store, opts.Tracer}
		m.caps = m.caps.traced(opts.Tracer)
	}
	m.worker.init(max(opts.QueueSize, 0), opts.Workers)
	m.tails.init(opts.TailCacheBytes)
	m.boundCaches()
	if m.now == nil {
		m.now = time.Now
	}
	if m.log == nil {
		m.log, m.defaultLog = slog.New(slog.DiscardHandler), true
	}
	return m, nil
}

// The caches of derived data (summaries, fact values, the counts of the
// blocks Context makes up, summary budgets and the worker's estimates)
// start over when they hold this many entries (or bytes, for those that
// hold texts): an entry is only a shortcut, for a few seconds or until
// something changes, so forgetting them all costs a read or a count each,
// and memory stays bounded however many conversations pass through. The
// tail cache, whose entries save a turn's reads, is a true LRU
// (tailCache).
const (
	derivedCacheEntries = 100000
	derivedCacheBytes   = 8 << 20
	blockCountEntries   = 10000
)

// boundCaches sets the bounds of the caches of derived data.
func (m *Memory) boundCaches() {
	m.summaries.MaxEntries, m.summaries.MaxBytes = derivedCacheEntries, derivedCacheBytes
	m.facts.MaxEntries, m.facts.MaxBytes = derivedCacheEntries, derivedCacheBytes
	m.blocks.MaxEntries = blockCountEntries
	m.budgets.MaxEntries = derivedCacheEntries
	m.worker.unsummarized.MaxEntries = derivedCacheEntries
}

// Ledger returns Options.Ledger (nil if none).
func (m *Memory) Ledger() *Ledger { return m.ledger }

// Store returns the store Memory reads and writes. Delete a conversation
// or a user through Memory (Delete, DeleteUser), which also drops what it
// keeps of them between turns.
func (m *Memory) Store() Store { return m.raw }

// Conversation returns the conversation's metadata (ErrNotFound if it
// does not exist or has expired); see Store.Conversation.
func (m *Memory) Conversation(ctx context.Context, key Key) (Conversation, error) {
	if err := key.Validate(); err != nil {
		return Conversation{}, err
	}
	return m.store.Conversation(ctx, key)
}

// Now returns the time by Memory's clock (Options.Now): the clock of
// AppendOptions.Started, which work that appends later (a proxy turn, an
// MCP call, an import) reads when it begins.
func (m *Memory) Now() time.Time { return m.now() }

// Delete deletes the conversation (see Store.Delete) and drops what this
// Memory keeps of it between turns: its tail, its summary and the
// extraction's fact values. They are dropped again after the store's
// delete, as a turn in flight may have put them back meanwhile; none can
// serve another conversation under the key anyway (each is tied to the
// conversation's CreatedAt).
func (m *Memory) Delete(ctx context.Context, key Key) error {
	m.forget(key)
	defer m.forget(key)
	return m.store.Delete(ctx, key)
}

// forget drops what this Memory keeps of the conversation between turns.
func (m *Memory) forget(key Key) {
	m.tails.drop(key)
	m.summaries.forget(key)
	m.facts.forget(key)
}

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
// Messages with a CreatedAt of zero get the clock's time; others are kept
// in UTC to the microsecond. An unknown opts.Tokenizer wraps ErrInvalid,
// even for an existing conversation (which keeps its own). Tool messages must
// answer the open calls of the conversation's trailing assistant message (or
// of one earlier in the batch). Bad input wraps ErrInvalid or ErrTooLarge
// and writes nothing; see Store.Append for ErrConflict and idempotency.
func (m *Memory) Append(ctx context.Context, key Key, msgs []Message, opts AppendOptions) (AppendResult, error) {
	if err := m.checkAppend(key, msgs, &opts); err != nil {
		return AppendResult{}, err
	}
	return m.appendChecked(ctx, key, msgs, opts)
}

// appendChecked is Append after checkAppend.
func (m *Memory) appendChecked(ctx context.Context, key Key, msgs []Message, opts AppendOptions) (AppendResult, error) {
	for attempt := 0; ; attempt++ {
		res, retry, err := m.append(ctx, key, msgs, opts)
		if !retry || attempt == maxAppendRetries {
			return res, err
		}
	}
}

// checkAppend checks what Append can check before any I/O, and fills in
// opts.Now and opts.Fingerprint.
func (m *Memory) checkAppend(key Key, msgs []Message, opts *AppendOptions) error {
	if err := key.Validate(); err != nil {
		return err
	}
	if len(msgs) == 0 {
		return fmt.Errorf("%w: no messages to append", ErrInvalid)
	}
	// Check each message before any I/O; the history check follows once the
	// conversation's tail is known.
	if l := m.limits.withDefaults(); over(len(msgs), l.MaxBatch) {
		return fmt.Errorf("%w: %d messages in one append, over the limit of %d", ErrTooLarge, len(msgs), l.MaxBatch)
	}
	for i, msg := range msgs {
		if err := msg.Validate(m.limits); err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
	}
	// A tokenizer is named for a new conversation; an existing one keeps
	// its own, but an unknown name is a mistake either way.
	if opts.Tokenizer != "" {
		if _, err := m.Counter(opts.Tokenizer); err != nil {
			return err
		}
	}
	if opts.User != "" {
		if err := ValidateUser(opts.User); err != nil {
			return fmt.Errorf("user: %w", err)
		}
		if _, err := m.userStore(); err != nil {
			return err
		}
	}
	if opts.Now.IsZero() {
		opts.Now = m.now()
	}
	if m.caps.receipts == nil {
		opts.Receipt = nil
	}
	if opts.IdempotencyKey != "" && opts.Fingerprint == "" {
		opts.Fingerprint = Fingerprint(msgs)
	}
	return nil
}

// append makes one attempt. retry reports a conflict with a concurrent
// writer that only this attempt's own validation read expected.
func (m *Memory) append(ctx context.Context, key Key, msgs []Message, opts AppendOptions) (_ AppendResult, retry bool, _ error) {
	if res, ok, err := m.appendCached(ctx, key, msgs, opts); ok {
		return res, false, err
	}
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
	// The store checks that the messages counted here go to a conversation
	// still kept under this tokenizer: another process may recount or
	// re-create it before the write.
	checked := opts.ExpectedTokenizer == "" && conv.Tokenizer != ""
	if checked {
		opts.ExpectedTokenizer = conv.Tokenizer
	}

	var prior []Message
	if needsPrior(msgs) && conv.LastSeq > 0 {
		// Tool results answer calls stored earlier: read the last turn and
		// pin the write to it, so no other append can slip in between.
		if prior, err = m.trailingUnit(ctx, key, conv); err != nil && !errors.Is(err, ErrNotFound) {
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
	res, _, err := m.appendCounted(ctx, key, prior, msgs, counter, opts, nil)
	if err != nil {
		conflict := errors.Is(err, ErrConflict)
		if conflict && opts.ExpectedRevision != nil && conv.Revision != *opts.ExpectedRevision {
			// The caller's own revision was already stale when read: a
			// new attempt cannot land.
			retry = false
		}
		if conflict && checked && !retry {
			retry = m.tokenizerChanged(ctx, key, conv.Tokenizer)
		}
		return AppendResult{}, retry && conflict, err
	}
	return res, false, nil
}

// tokenizerChanged reports whether the conversation is no longer kept
// under tokenizer (recounted, or deleted and perhaps re-created), which a
// new attempt, counting afresh, answers.
func (m *Memory) tokenizerChanged(ctx context.Context, key Key, tokenizer string) bool {
	conv, err := m.store.Conversation(ctx, key)
	if errors.Is(err, ErrNotFound) {
		return true
	}
	return err == nil && conv.Tokenizer != tokenizer
}

// appendCached makes the attempt without reading the conversation first,
// when the tail cache knows its tokenizer and the batch needs nothing of
// the history to be checked (it starts with no tool result): the store
// checks the tokenizer in the write itself (ExpectedTokenizer). ok is
// false when it did not try (also when the caller made the append
// conditional itself), or when the store refused because the conversation
// is kept under another tokenizer since, which the caller's read then
// sorts out. A caller's own ExpectedLastSeq is tried here only when it is
// the entry's last message (a caller that read it from CachedTail): the
// entry is then extended as with the cache's own condition, and a
// conflict goes the read's way.
func (m *Memory) appendCached(ctx context.Context, key Key, msgs []Message, opts AppendOptions) (_ AppendResult, ok bool, _ error) {
	if needsPrior(msgs) || opts.ExpectedTokenizer != "" {
		return AppendResult{}, false, nil
	}
	entry, last, rev, tokenizer, cached := m.tails.peek(key)
	if !cached || tokenizer == "" {
		return AppendResult{}, false, nil
	}
	if e := opts.ExpectedLastSeq; e != nil && (*e != last || last == 0 || opts.unconditional) {
		return AppendResult{}, false, nil
	}
	if e := opts.ExpectedRevision; e != nil && (*e != rev || opts.unconditional) {
		return AppendResult{}, false, nil
	}
	counter, err := m.Counter(tokenizer)
	if err != nil {
		return AppendResult{}, false, nil
	}
	// A conversation gone meanwhile is created by this append: with the
	// tokenizer the uncached path would give it, which must be the one
	// the messages are counted with.
	if fresh, err := m.Counter(opts.Tokenizer); err != nil || fresh.Name() != counter.Name() {
		return AppendResult{}, false, nil
	}
	opts.Tokenizer, opts.ExpectedTokenizer = counter.Name(), counter.Name()
	if opts.ExpectedLastSeq != nil {
		res, _, err := m.appendCounted(ctx, key, nil, msgs, counter, opts, nil)
		if err == nil && !res.Replayed {
			m.tails.appended(entry, last, res.Conversation, res.Messages)
		}
		if errors.Is(err, ErrConflict) {
			return AppendResult{}, false, nil
		}
		return res, true, err
	}
	if last > 0 && !opts.unconditional {
		// Conditional on the entry's last message: if it lands, nothing
		// came between, and the entry is extended with what was stored,
		// with no read. A reply appended between two turns so keeps the
		// next Turn's one-write fast path. Another writer in between (or
		// another tokenizer) fails the condition, and the append is made
		// again without it, as below.
		try := opts
		try.ExpectedLastSeq, try.ExpectedRevision = &last, &rev
		res, _, err := m.appendCounted(ctx, key, nil, msgs, counter, try, nil)
		if err == nil && !res.Replayed {
			m.tails.appended(entry, last, res.Conversation, res.Messages)
		}
		if !errors.Is(err, ErrConflict) {
			return res, true, err
		}
	}
	res, _, err := m.appendCounted(ctx, key, nil, msgs, counter, opts, nil)
	if errors.Is(err, ErrConflict) {
		m.tails.drop(key) // kept under another tokenizer: the entry is stale
		return AppendResult{}, false, nil
	}
	return res, true, err
}

// appendCounted checks msgs (each checked by Append already) against prior
// (the conversation's trailing messages they may answer), counts them
// with counter and stores them. With tail set, a TailAppender store also
// reads the conversation's system messages and Tail(*tail) in the append's
// round trip, returned unless the append was a replay (nil then, and
// always from other stores). A store that could not read them returns an
// empty TailRead, which Turn does not fill the tail cache from.
func (m *Memory) appendCounted(ctx context.Context, key Key, prior, msgs []Message, counter Counter, opts AppendOptions, tail *TailQuery) (AppendResult, *TailRead, error) {
	if err := validateHistory(prior, msgs, m.limits, false); err != nil {
		return AppendResult{}, nil, err
	}
	counted := make([]Message, len(msgs))
	for i, msg := range msgs {
		msg = msg.Clone()
		msg.Seq = 0
		var err error
		if msg.Tokens, err = counter.Count(ctx, msg); err != nil {
			return AppendResult{}, nil, fmt.Errorf("count message %d: %w", i, err)
		}
		if msg.CreatedAt.IsZero() {
			msg.CreatedAt = opts.Now
		} else {
			// What every store keeps (see MinTime): a time given in
			// another zone or to the nanosecond reads back the same
			// from each.
			msg.CreatedAt = msg.CreatedAt.UTC().Truncate(time.Microsecond)
		}
		counted[i] = msg
	}
	var res AppendResult
	var read *TailRead
	var err error
	if ta := m.caps.tailAppend; ta != nil && tail != nil {
		var r TailRead
		if res, r, err = ta.AppendTail(ctx, key, counted, opts, *tail); err == nil && !res.Replayed {
			read = &r
		}
	} else {
		res, err = m.store.Append(ctx, key, counted, opts)
	}
	if err != nil {
		return AppendResult{}, nil, fmt.Errorf("append to %s: %w", key, err)
	}
	if !res.Replayed && len(res.Messages) > 0 {
		m.afterAppend(ctx, key, res.Conversation.CreatedAt, res.Conversation.Revision, res.Conversation.User, res.Messages)
	}
	return res, read, nil
}

// trailingUnit reads enough of the conversation's end to hold its trailing
// tool unit: with MaxToolCalls bounding the results a call message can
// have, that is the last MaxToolCalls+1 messages, however long the turn.
func (m *Memory) trailingUnit(ctx context.Context, key Key, conv Conversation) ([]Message, error) {
	l := m.limits.withDefaults()
	if l.MaxToolCalls < 0 {
		return m.store.Tail(ctx, key, TailQuery{Turns: 1})
	}
	return m.store.Range(ctx, key, max(conv.LastSeq-int64(l.MaxToolCalls)-1, 0), 0)
}

// needsPrior reports whether msgs starts with tool results, which can only
// answer calls stored before the batch.
func needsPrior(msgs []Message) bool {
	return len(msgs) > 0 && msgs[0].Role == RoleTool
}
