package chatmem

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/chatmem/chatmem/internal/bounded"
)

// job is the work pending for one conversation: extract facts from the
// messages from..to (from 0: none) and bring the summary up to date.
type job struct {
	key      Key
	from, to int64
	user     bool // a user message is among them (extractors only read those)
	tokens   int  // their non-system tokens, for the hysteresis estimate
	// msgs are the appended messages themselves, so extraction needs no
	// read; nil when merged jobs hold too many, or were appended at two
	// Revisions (extract reads from..to).
	msgs []Message
	// rev is the conversation's Revision msgs were appended at: what is
	// derived from them is stored only while it still is (lockRevision).
	rev int64
	// created is the conversation's CreatedAt, which ties cached facts to
	// this conversation and not to an earlier one with the same ID.
	created time.Time
	// catchUp marks a job of the startup scan (catchUpFacts): extract the
	// facts after the conversation's fact mark, and nothing else.
	catchUp bool
	// index asks for the search index to be brought up to date
	// (IndexCatcher); indexOnly marks a job that asks nothing else.
	index, indexOnly bool
	// owner is the conversation's user, if known (empty: none or not
	// known), whom the ledger counts the job's model calls for.
	owner string
}

// indexEvery is how many messages an IndexCatcher's index may fall behind
// before an append has the worker catch it up: catching up in batches
// costs the store less than message by message.
const indexEvery = 32

// maxJobMessages bounds the messages a queued job carries.
const maxJobMessages = 1000

// worker is the queue that Start drains off the request path, with
// Options.Workers goroutines: each conversation at most once in the queue
// (later appends merge into the pending job) and in one goroutine at a
// time (work arriving while it is processed waits in next, and the same
// goroutine takes it on), so a conversation's jobs run in order.
type worker struct {
	mu      sync.Mutex
	pending map[Key]*job // queued
	next    map[Key]*job // arrived while the conversation is processed
	active  map[Key]bool // being processed
	queue   chan Key
	n       int // goroutines
	running bool
	closed  bool
	// unsummarized estimates, per conversation, the tokens after its
	// summary, as of the last check plus what this Memory appended since,
	// so that most appends need no store read to know the summarizer has
	// nothing to do. A miss only costs a check.
	unsummarized bounded.Map[Key, int]
	wg           sync.WaitGroup
	dropped      int64
	// stopScan ends the startup scan for lagging fact marks (Close);
	// scanning is true while it runs (under mu).
	stopScan context.CancelFunc
	scanning bool
	// warned: warnNotStarted has said it (under mu).
	warned bool
	// held are the jobs of tenants over their memory spend limit
	// (Options.Ledger), by conversation, merged as the queue's are; the
	// conversation's next append, or resume, queues them again (under
	// mu). heldDropped counts those dropped beyond maxHeld.
	held        map[Key]*job
	heldDropped int64
	stopResume  chan struct{}
}

// DefaultWorkers is the default of Options.Workers.
const DefaultWorkers = 4

func (w *worker) init(size, n int) {
	if size == 0 {
		size = 1024
	}
	if n <= 0 {
		n = DefaultWorkers
	}
	w.n = n
	w.queue = make(chan Key, size)
	w.pending = make(map[Key]*job)
	w.next = make(map[Key]*job)
	w.active = make(map[Key]bool)
	w.held = make(map[Key]*job)
}

// Start starts the workers that write summaries and extract facts after
// appends, off the request path (Options.Workers goroutines). With
// Extractors and a store that keeps fact marks (FactMarker), it also
// starts a scan that queues every conversation whose facts lag its
// messages (work dropped or lost before this start), a page at a time. It
// returns at once; Close stops them. Without a Summarizer, Extractors or
// an Embedder, or with Options.Sync, there is nothing for it to do and
// Start need not be called. With one of them and neither Start nor Sync,
// the work appends bring is not done: Memory says so once, as a warning
// (to Options.Logger, or slog.Default when none is given).
func (m *Memory) Start() error {
	w := &m.worker
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.running || w.closed {
		return errors.New("chatmem: Memory.Start called twice or after Close")
	}
	w.running = true
	for range w.n {
		w.wg.Go(m.run)
	}
	if m.ledger != nil {
		m.ledger.Start()
		stop := make(chan struct{})
		w.stopResume = stop
		w.wg.Go(func() { m.resumeEvery(stop, resumeInterval) })
	}
	if fm := m.caps.factMarks; fm != nil && len(m.extractors) > 0 {
		ctx, cancel := context.WithCancel(context.Background())
		w.stopScan, w.scanning = cancel, true
		w.wg.Go(func() {
			m.catchUpFacts(ctx, fm)
			w.mu.Lock()
			w.scanning = false
			w.mu.Unlock()
		})
	}
	return nil
}

// Close stops taking new work, finishes the work already queued (each call
// bounded by SummaryOptions.Timeout) and waits for the workers to exit. It
// does not close the store.
func (m *Memory) Close() error {
	w := &m.worker
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	close(w.queue)
	if w.stopScan != nil {
		w.stopScan()
	}
	if w.stopResume != nil {
		close(w.stopResume)
	}
	w.mu.Unlock()
	w.wg.Wait()
	if m.ledger != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := m.ledger.Close(ctx); err != nil {
			m.log.Error("usage not written at close: lost", "err", err)
		}
	}
	return nil
}

// Flush waits until the worker has no work queued or running (and the
// startup scan for lagging fact marks has queued all it found), or ctx
// ends. Tests and benchmarks use it to reach a steady state.
func (m *Memory) Flush(ctx context.Context) error {
	for {
		m.worker.mu.Lock()
		idle := len(m.worker.pending) == 0 && len(m.worker.active) == 0 && !m.worker.scanning
		m.worker.mu.Unlock()
		if idle {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// QueueDepth returns how many conversations have work queued, for metrics.
func (m *Memory) QueueDepth() int { return len(m.worker.queue) }

// run is one worker goroutine: it takes a conversation from the queue and
// processes its work, then the work that arrived meanwhile, until there is
// none.
func (m *Memory) run() {
	w := &m.worker
	for key := range w.queue {
		w.mu.Lock()
		j := w.pending[key]
		delete(w.pending, key)
		w.active[key] = true
		w.mu.Unlock()
		for j != nil {
			m.process(context.Background(), *j)
			w.mu.Lock()
			if j = w.next[key]; j != nil {
				delete(w.next, key)
			} else {
				delete(w.active, key)
			}
			w.mu.Unlock()
		}
	}
}

// afterAppend runs or queues the work that new messages bring.
func (m *Memory) afterAppend(ctx context.Context, key Key, created time.Time, rev int64, user string, msgs []Message) {
	m.indexLater(key, created, msgs)
	if m.summarizer == nil && len(m.extractors) == 0 && m.embedder == nil {
		return
	}
	j := job{key: key, from: msgs[0].Seq, to: msgs[len(msgs)-1].Seq, created: created, rev: rev, owner: user}
	if len(msgs) <= maxJobMessages {
		// A copy: the caller owns the messages Append returned.
		j.msgs = make([]Message, len(msgs))
		for i, msg := range msgs {
			j.msgs[i] = msg.Clone()
		}
	}
	for _, msg := range msgs {
		j.user = j.user || msg.Role == RoleUser
		if msg.Role != RoleSystem {
			j.tokens += msg.Tokens
		}
	}
	if m.sync {
		m.worker.mu.Lock()
		j = m.worker.unhold(j)
		m.worker.mu.Unlock()
		m.process(ctx, j)
		return
	}
	m.enqueue(j)
}

// indexLater has a running worker catch the search index of an
// IndexCatcher up when msgs take the conversation past a multiple of
// indexEvery messages. Without a running worker (or with Options.Sync),
// Postings catches up by itself.
func (m *Memory) indexLater(key Key, created time.Time, msgs []Message) {
	if m.caps.indexCatcher == nil || m.sync {
		return
	}
	first, last := msgs[0].Seq, msgs[len(msgs)-1].Seq
	if (first-1)/indexEvery == last/indexEvery {
		return
	}
	m.worker.mu.Lock()
	running := m.worker.running && !m.worker.closed
	m.worker.mu.Unlock()
	if running {
		m.enqueue(job{key: key, created: created, index: true, indexOnly: true})
	}
}

// catchUpIndex is the worker's IndexCatcher call; failures are logged, and
// the next one (or Postings) does the work.
func (m *Memory) catchUpIndex(ctx context.Context, key Key) {
	err := m.retry(ctx, "index", func(ctx context.Context) error {
		err := m.caps.indexCatcher.IndexPending(ctx, key)
		if errors.Is(err, ErrNotFound) {
			return nil // gone: nothing to index
		}
		return err
	})
	if err != nil {
		m.log.Error("index messages", "key", key.String(), "err", err)
	}
}

// requestSummary has the worker look at the conversation's summary, which
// a context read found lagging behind its window.
func (m *Memory) requestSummary(key Key, created time.Time, user string) {
	m.worker.setUnsummarized(key, 0, false)
	m.enqueue(job{key: key, created: created, owner: user})
}

// enqueue queues j for the worker, merged into the conversation's pending
// job if it has one.
func (m *Memory) enqueue(j job) {
	key := j.key
	w := &m.worker
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed && w.running {
		j = w.unhold(j)
	}
	p := w.pending[key]
	if w.active[key] {
		p = w.next[key]
	}
	switch {
	case w.closed:
		m.log.Debug("chatmem worker closed; work after Close not done", "key", key.String())
	case !w.running:
		m.warnNotStarted(key)
	case p != nil:
		p.merge(j)
	case w.active[key]:
		w.next[key] = &j // its worker takes it on next
	default:
		select {
		case w.queue <- key:
			w.pending[key] = &j
		default:
			w.dropped++
			m.log.Warn("chatmem worker queue full; work dropped until the next append", "key", key.String(), "dropped", w.dropped)
		}
	}
}

// warnNotStarted says, once per Memory, that work arrived for a worker
// that was never started: without Start (or Options.Sync) a Memory given a
// summarizer, extractors or an embedder silently writes no summary, fact
// or vector, the trap a new user falls into first. With no Options.Logger
// the warning goes to slog.Default (standard error unless the program set
// another), so that it is seen. Called with w.mu held.
func (m *Memory) warnNotStarted(key Key) {
	if m.worker.warned {
		return
	}
	m.worker.warned = true
	log := m.log
	if m.defaultLog {
		log = slog.Default()
	}
	log.Warn("chatmem: Memory has a summarizer, extractors or an embedder but was never started: "+
		"no summary, fact or vector is written; call Memory.Start (and Close), or set Options.Sync",
		"key", key.String())
}

// merge adds the later job j to p.
func (p *job) merge(j job) {
	index := p.index || j.index
	owner := p.owner
	if j.owner != "" {
		owner = j.owner
	}
	defer func() { p.index, p.owner = index, owner }()
	switch {
	case j.indexOnly:
		return
	case p.indexOnly:
		*p = j
		return
	case j.catchUp:
		p.user = true // p extracts from the fact mark too
		return
	case p.catchUp:
		*p = j // j catches up from the fact mark, and does the rest
		return
	}
	if !p.created.Equal(j.created) {
		*p = j // the conversation was deleted and re-created: its old work is moot
		return
	}
	switch {
	case j.from == 0: // a summary request: no messages
	case p.from == 0:
		p.from, p.to = j.from, j.to
	default:
		p.from, p.to = min(p.from, j.from), max(p.to, j.to)
	}
	p.user, p.tokens = p.user || j.user, p.tokens+j.tokens
	if p.msgs != nil && j.msgs != nil && len(p.msgs)+len(j.msgs) <= maxJobMessages && p.rev == j.rev {
		p.msgs = append(p.msgs, j.msgs...)
	} else { // read from..to: too many, or p's are of another Revision
		p.msgs = nil
	}
}

// process extracts facts, then updates the summary; failures are logged
// here, at the worker's boundary, and leave stored state as it was.
func (m *Memory) process(ctx context.Context, j job) {
	if j.index {
		m.catchUpIndex(ctx, j.key)
	}
	if j.indexOnly {
		return
	}
	if err := m.allowModels(ctx, j.key.Tenant); err != nil {
		m.hold(j, err)
		return
	}
	if m.embedder != nil {
		switch err := m.embed(m.usageCtx(ctx, j.key, j.owner, CallEmbed), j); {
		case errors.Is(err, ErrNotFound):
			m.log.Debug("embed: conversation gone", "key", j.key.String())
		case err != nil:
			// Recall searches these messages lexically only.
			m.log.Error("embed messages", "key", j.key.String(), "err", err)
		}
	}
	xctx := m.usageCtx(ctx, j.key, j.owner, CallExtract)
	if j.catchUp {
		m.logExtract(j.key, m.extractMarked(xctx, m.caps.factMarks, j))
		return
	}
	if fm := m.caps.factMarks; fm != nil && len(m.extractors) > 0 && j.user {
		m.logExtract(j.key, m.extractMarked(xctx, fm, j))
	} else if len(m.extractors) > 0 && j.user {
		var err error
		if j.msgs != nil {
			err = m.extractFrom(xctx, j.key, j.created, j.rev, j.msgs)
		}
		if j.msgs == nil || errors.Is(err, errRewritten) { // read them (again)
			err = m.extract(xctx, j.key, j.created, j.from, j.to)
		}
		m.logExtract(j.key, err)
	}
	if trigger, _, _ := m.summaryBounds(j.key); m.summarizer != nil && !m.worker.belowTrigger(j, trigger) {
		unsummarized, err := m.summarize(m.usageCtx(ctx, j.key, j.owner, CallSummarize), j.key, j.created)
		switch {
		case errors.Is(err, ErrNotFound):
			m.log.Debug("summarize: conversation gone", "key", j.key.String())
		case err != nil:
			m.log.Error("summarize", "key", j.key.String(), "err", err)
		}
		m.worker.setUnsummarized(j.key, unsummarized, err == nil)
	}
}

// belowTrigger adds j's tokens to the conversation's estimate and reports
// whether it is known to stay at or below trigger, so no check is needed.
func (w *worker) belowTrigger(j job, trigger int) bool {
	return w.unsummarized.Update(j.key, 0, func(est int, ok bool) (int, bool) {
		if !ok || est+j.tokens > trigger {
			return est, false
		}
		return est + j.tokens, true
	})
}

// setUnsummarized records what a check found (known) or forgets the estimate.
func (w *worker) setUnsummarized(key Key, tokens int, known bool) {
	if !known || tokens < 0 {
		w.unsummarized.Delete(key)
		return
	}
	w.unsummarized.Put(key, tokens, 0)
}

// retry calls f with a per-call timeout until it succeeds, the retries are
// spent, or ctx ends; it waits with exponential backoff between calls.
func (m *Memory) retry(ctx context.Context, what string, f func(ctx context.Context) error) error {
	o := m.sumOpts
	backoff := o.Backoff
	for attempt := 0; ; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, o.Timeout)
		err := f(cctx)
		cancel()
		if err == nil || attempt == o.Retries || ctx.Err() != nil {
			return err
		}
		m.log.Warn(what+" failed; retrying", "attempt", attempt+1, "in", backoff, "err", err)
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return ctx.Err()
		}
		backoff *= 2
	}
}
