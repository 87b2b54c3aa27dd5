package chatmem

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// job is the work pending for one conversation: extract facts from the
// messages from..to (from 0: none) and bring the summary up to date.
type job struct {
	key      Key
	from, to int64
	user     bool // a user message is among them (extractors only read those)
	tokens   int  // their non-system tokens, for the hysteresis estimate
	// msgs are the appended messages themselves, so extraction needs no
	// read; nil when merged jobs hold too many (extract reads from..to).
	msgs []Message
	// created is the conversation's CreatedAt, which ties cached facts to
	// this conversation and not to an earlier one with the same ID.
	created time.Time
	// catchUp marks a job of the startup scan (catchUpFacts): extract the
	// facts after the conversation's fact mark, and nothing else.
	catchUp bool
	// index asks for the search index to be brought up to date
	// (IndexCatcher); indexOnly marks a job that asks nothing else.
	index, indexOnly bool
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
	unsumMu      sync.Mutex
	unsummarized map[Key]int
	wg           sync.WaitGroup
	dropped      int64
	// stopScan ends the startup scan for lagging fact marks (Close);
	// scanning is true while it runs (under mu).
	stopScan context.CancelFunc
	scanning bool
	// warned: warnNotStarted has said it (under mu).
	warned bool
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
	w.unsummarized = make(map[Key]int)
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
	if fm, ok := m.store.(FactMarker); ok && len(m.extractors) > 0 {
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
	w.mu.Unlock()
	w.wg.Wait()
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
func (m *Memory) afterAppend(ctx context.Context, key Key, created time.Time, msgs []Message) {
	m.indexLater(key, created, msgs)
	if m.summarizer == nil && len(m.extractors) == 0 && m.embedder == nil {
		return
	}
	j := job{key: key, from: msgs[0].Seq, to: msgs[len(msgs)-1].Seq, created: created}
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
	if _, ok := m.store.(IndexCatcher); !ok || m.sync {
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
		err := m.store.(IndexCatcher).IndexPending(ctx, key)
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
func (m *Memory) requestSummary(key Key, created time.Time) {
	m.worker.setUnsummarized(key, 0, false)
	m.enqueue(job{key: key, created: created})
}

// enqueue queues j for the worker, merged into the conversation's pending
// job if it has one.
func (m *Memory) enqueue(j job) {
	key := j.key
	w := &m.worker
	w.mu.Lock()
	defer w.mu.Unlock()
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
	defer func() { p.index = index }()
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
	if p.msgs != nil && j.msgs != nil && len(p.msgs)+len(j.msgs) <= maxJobMessages {
		p.msgs = append(p.msgs, j.msgs...)
	} else {
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
	if m.embedder != nil {
		switch err := m.embed(ctx, j); {
		case errors.Is(err, ErrNotFound):
			m.log.Debug("embed: conversation gone", "key", j.key.String())
		case err != nil:
			// Recall searches these messages lexically only.
			m.log.Error("embed messages", "key", j.key.String(), "err", err)
		}
	}
	if j.catchUp {
		m.logExtract(j.key, m.extractMarked(ctx, m.store.(FactMarker), j))
		return
	}
	if fm, ok := m.store.(FactMarker); ok && len(m.extractors) > 0 && j.user {
		m.logExtract(j.key, m.extractMarked(ctx, fm, j))
	} else if len(m.extractors) > 0 && j.user {
		var err error
		if j.msgs != nil {
			err = m.extractFrom(ctx, j.key, j.created, j.msgs)
		} else {
			err = m.extract(ctx, j.key, j.created, j.from, j.to)
		}
		m.logExtract(j.key, err)
	}
	if trigger, _, _ := m.summaryBounds(j.key); m.summarizer != nil && !m.worker.belowTrigger(j, trigger) {
		unsummarized, err := m.summarize(ctx, j.key, j.created)
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
	w.unsumMu.Lock()
	defer w.unsumMu.Unlock()
	est, ok := w.unsummarized[j.key]
	if !ok || est+j.tokens > trigger {
		return false
	}
	w.unsummarized[j.key] = est + j.tokens
	return true
}

// setUnsummarized records what a check found (known) or forgets the estimate.
func (w *worker) setUnsummarized(key Key, tokens int, known bool) {
	w.unsumMu.Lock()
	defer w.unsumMu.Unlock()
	if !known || tokens < 0 {
		delete(w.unsummarized, key)
		return
	}
	if len(w.unsummarized) >= 100000 {
		clear(w.unsummarized) // bounded: estimates are only a shortcut
	}
	w.unsummarized[key] = tokens
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

// extract runs every extractor over the messages from..to and stores the
// valid facts they find; invalid ones are logged and skipped.
func (m *Memory) extract(ctx context.Context, key Key, created time.Time, from, to int64) error {
	const chunk = 1000 // messages per read and per extractor call
	for ; from <= to; from += chunk {
		msgs, err := m.store.Range(ctx, key, from-1, int(min(to-from+1, chunk)))
		if err != nil {
			return err
		}
		if err := m.extractFrom(ctx, key, created, msgs); err != nil {
			return err
		}
	}
	return nil
}

// extractFrom runs the extractors over msgs and stores what they find.
func (m *Memory) extractFrom(ctx context.Context, key Key, created time.Time, msgs []Message) error {
	found, err := m.findFacts(ctx, msgs)
	if err != nil || len(found) == 0 {
		return err
	}
	// The values compared and the writes go under the fact locks, which
	// the application's SetFacts and SetUserFacts take too: a fact the app
	// sets while the extractors ran is seen here, never overwritten by an
	// older statement of the same value (provenance stays "app").
	user, unlock, err := m.lockFacts(ctx, key, created)
	if err != nil {
		return err
	}
	defer unlock()
	nf, err := m.newFacts(ctx, key, created, user, found)
	if err != nil {
		return err
	}
	if err := m.setUserFacts(ctx, key, created, nf); err != nil {
		return err
	}
	if len(nf.changed) > 0 {
		if err := m.setFactsOf(ctx, key, created, nf.changed); err != nil {
			m.facts.forget(key)
			return err
		}
	}
	m.facts.put(key, created, nf.now, m.now())
	return nil
}

// findFacts runs every extractor over msgs (with retries) and returns the
// valid facts they find; invalid ones are logged and skipped.
func (m *Memory) findFacts(ctx context.Context, msgs []Message) ([]Fact, error) {
	var found []Fact
	for _, x := range m.extractors {
		var facts []Fact
		err := m.retry(ctx, "extractor "+x.Name(), func(ctx context.Context) (err error) {
			facts, err = x.Extract(ctx, msgs)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("extractor %s: %w", x.Name(), err)
		}
		for _, f := range facts {
			if f.SetBy == "" {
				f.SetBy = x.Name()
			}
			if f.CreatedAt.IsZero() {
				f.CreatedAt = m.now()
			}
			if err := f.Validate(); err != nil {
				m.log.Warn("extractor returned an invalid fact; skipped", "extractor", x.Name(), "err", err)
				continue
			}
			found = append(found, f)
		}
	}
	return found, nil
}

// newFound is what newFacts makes of an extraction: the conversation's
// facts to write (changed), the user's (theirs, for user), and the values
// the conversation sees once they are stored (now).
type newFound struct {
	changed, theirs []Fact
	user            string
	now             map[string]string
}

// newFacts returns the facts of found whose value is not the one the
// conversation sees, split by scope: facts of ScopeUser go to the
// conversation's user, if it has one. A fact restated with the value it
// already has keeps its first provenance: skipping it saves a write on
// most turns, and the values this Memory last saw save the read that
// tells.
func (m *Memory) newFacts(ctx context.Context, key Key, created time.Time, user string, found []Fact) (newFound, error) {
	now, ok := m.facts.get(key, created, m.now())
	if !ok {
		current, err := m.visibleFacts(ctx, key, user)
		if err != nil {
			return newFound{}, err
		}
		now = make(map[string]string, len(current))
		for _, f := range current {
			now[f.Key] = f.Value
		}
	}
	nf := newFound{user: user, now: now}
	for _, f := range found {
		if v, ok := now[f.Key]; !ok || v != f.Value {
			now[f.Key] = f.Value
			if user != "" && ScopeOf(f.Key) == ScopeUser {
				f.Conversation = key.ID
				nf.theirs = append(nf.theirs, f)
			} else {
				nf.changed = append(nf.changed, f)
			}
		}
	}
	return nf, nil
}

// setUserFacts stores the user's share of an extraction. It comes before
// the conversation's facts (and, with a FactMarker, the mark that moves
// with them): a crash between the two extracts those messages again, and
// the values already stored are then seen and not written twice. The
// write is conditional on the conversation created at created, still
// bound to the user (UserStore.SetDerivedUserFacts): a conversation
// deleted, or erased with its user, while the extractors ran gives the
// user nothing, and ErrNotFound.
func (m *Memory) setUserFacts(ctx context.Context, key Key, created time.Time, nf newFound) error {
	if len(nf.theirs) == 0 {
		return nil
	}
	err := m.store.(UserStore).SetDerivedUserFacts(ctx, DerivedUserFacts{
		User: Key{Tenant: key.Tenant, ID: nf.user}, Conversation: key.ID, Created: created, Facts: nf.theirs,
	})
	if err != nil {
		m.facts.forget(key)
		return err
	}
	return nil
}

// userOf returns the user of the conversation created at created (empty
// for none, or when the store keeps no users), and wraps ErrNotFound if
// the conversation was deleted (and perhaps created again) since.
func (m *Memory) userOf(ctx context.Context, key Key, created time.Time) (string, error) {
	if _, ok := m.store.(UserStore); !ok {
		return "", nil
	}
	conv, err := m.store.Conversation(ctx, key)
	if err != nil {
		return "", err
	}
	if !conv.CreatedAt.Equal(created) {
		return "", recreated(key)
	}
	return conv.User, nil
}

// setFactsOf records facts in the conversation created at created, and
// wraps ErrNotFound if it was deleted (and perhaps created again) while
// the extractors ran: facts of the old conversation must not reach the
// new one. A GenerationWriter checks and writes atomically; with another
// store a delete and re-create can still slip between the check and the
// write.
func (m *Memory) setFactsOf(ctx context.Context, key Key, created time.Time, facts []Fact) error {
	if gw, ok := m.store.(GenerationWriter); ok {
		return gw.SetFactsOf(ctx, key, created, facts)
	}
	if err := m.sameGeneration(ctx, key, created); err != nil {
		return err
	}
	return m.store.(FactStore).SetFacts(ctx, key, facts)
}

// recreated is the error for work on a conversation that was deleted and
// created again since: ErrNotFound, as the work's conversation is gone.
func recreated(key Key) error {
	return fmt.Errorf("%w: conversation %s was deleted and created again", ErrNotFound, key)
}

// sameGeneration wraps ErrNotFound unless the conversation at key is the
// one created at created.
func (m *Memory) sameGeneration(ctx context.Context, key Key, created time.Time) error {
	conv, err := m.store.Conversation(ctx, key)
	if err != nil {
		return err
	}
	if !conv.CreatedAt.Equal(created) {
		return recreated(key)
	}
	return nil
}

// maxSummaryChunk bounds the messages one summarizer call covers, so a
// conversation far behind (a large import, a worker that was down) catches
// up in bounded steps, each stored before the next.
const maxSummaryChunk = 256

// summarize extends the conversation's summary once the messages after it
// hold more than SummaryOptions.Trigger tokens, until the newest messages
// that fit Target remain. Each step makes the next summary from the previous
// one plus only the newly covered messages (at most maxSummaryChunk), and
// stores it with a compare-and-set on the covered sequence number; nothing
// counts as covered before it is stored. A failed or empty summary is never
// stored. Every read is bounded: two tails and one chunk per step.
// It returns the tokens left unsummarized when it found nothing to do, and
// -1 (unknown) after it wrote a summary. It works on the conversation
// created at created, read before any of its reads: if another conversation
// has taken its place (or none), it wraps ErrNotFound and writes nothing, so
// no summary of the old one reaches the new one.
//
// With a Leaser, the summarizer is called under the conversation's
// LeaseSummary lease, taken once there is something to summarize (and the
// summary read again under it): a process refused the lease returns -1 and
// leaves the work to the holder.
func (m *Memory) summarize(ctx context.Context, key Key, created time.Time) (int, error) {
	unsummarized := -1
	err := m.leased(ctx, key, LeaseSummary, !local(m.summarizer), func(hold holdFunc) (err error) {
		unsummarized, err = m.summarizeHeld(ctx, key, created, hold)
		return err
	})
	return unsummarized, err
}

// summarizeHeld is summarize under the lease hold takes or extends.
func (m *Memory) summarizeHeld(ctx context.Context, key Key, created time.Time, hold holdFunc) (int, error) {
	ss := m.store.(SummaryStore)
	_, _, limit := m.summaryBounds(key)
	held := false
	for {
		prev, err := ss.Summary(ctx, key)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return -1, err
		}
		end, unsummarized, current, err := m.summaryEnd(ctx, key, prev.CoversSeq)
		if err != nil {
			return -1, err
		}
		if !current.Equal(created) {
			return -1, recreated(key)
		}
		if end <= prev.CoversSeq {
			return unsummarized, nil
		}
		if ok, err := hold(ctx); !ok || err != nil {
			return -1, err // another process summarizes it
		}
		if !held {
			held = true
			continue // read again under the lease: the last holder may have moved it
		}
		// One lookahead message shows where the chunk may end: just before a
		// user message, so no tool unit is split and the window after the
		// summary starts with a user message. A chunk with no such place (a
		// long run of tool calls) is folded into a running summary that the
		// next chunk extends; it is stored only at a cut.
		running := prev
		for from := prev.CoversSeq; ; {
			n := min(end-from, maxSummaryChunk) + 1
			chunk, err := m.store.Range(ctx, key, from, int(n))
			if err != nil {
				return -1, err
			}
			cut, content := -1, running.Text != "" || from > prev.CoversSeq
			for i := 0; i+1 < len(chunk) && chunk[i].Seq <= end; i++ {
				content = content || chunk[i].Role != RoleSystem
				if chunk[i+1].Role == RoleUser && content {
					cut = i // a cut with something to summarize, not system messages alone
				}
			}
			if cut >= 0 {
				if err := m.summarizeChunk(ctx, key, running, chunk[:cut+1], created, limit); err != nil {
					return -1, err
				}
				if chunk[cut].Seq >= end {
					return -1, nil
				}
				break // the next step starts from the stored summary
			}
			if len(chunk) < 2 || chunk[len(chunk)-2].Seq >= end {
				// No user message to cut before up to end. After folding a
				// long run, look again only after another Trigger's worth of
				// tokens (not at every append); after a short one, at once.
				if from-prev.CoversSeq >= maxSummaryChunk {
					return 0, nil
				}
				return -1, nil
			}
			if ok, err := hold(ctx); !ok || err != nil {
				return -1, err
			}
			if running.Text, err = m.summaryText(ctx, running.Text, chunk[:len(chunk)-1], limit); err != nil {
				return -1, err
			}
			from = chunk[len(chunk)-2].Seq
		}
	}
}

// summaryText calls the summarizer (with retries) on prev plus msgs' non-system
// messages, within limit tokens when limit > 0 and the summarizer is a
// BoundedSummarizer; an empty answer is an error.
func (m *Memory) summaryText(ctx context.Context, prev string, msgs []Message, limit int) (string, error) {
	_, covered := splitPinned(msgs)
	// Its own copy: covered may be msgs itself, whose last Seq becomes the
	// summary's CoversSeq, whatever a Summarizer does with its input.
	covered = slices.Clone(covered)
	var text string
	err := m.retry(ctx, "summarizer "+m.summarizer.Name(), func(ctx context.Context) error {
		var t string
		var err error
		if b, ok := m.summarizer.(BoundedSummarizer); ok && limit > 0 {
			t, err = b.SummarizeWithin(ctx, prev, covered, limit)
		} else {
			t, err = m.summarizer.Summarize(ctx, prev, covered)
		}
		if err == nil && strings.TrimSpace(t) == "" {
			err = errors.New("summarizer returned an empty summary")
		}
		text = strings.TrimSpace(t)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("summarizer %s: %w", m.summarizer.Name(), err)
	}
	return text, nil
}

// summaryEnd returns the last sequence number the summary should cover:
// the message before the oldest user message among the newest that fit
// Target, if the messages after covered hold more than Trigger tokens, and
// covered (nothing to do) otherwise, with the tokens after covered.
func (m *Memory) summaryEnd(ctx context.Context, key Key, covered int64) (end int64, unsummarized int, created time.Time, err error) {
	conv, err := m.store.Conversation(ctx, key)
	if err != nil || conv.LastSeq <= covered {
		return covered, 0, conv.CreatedAt, err
	}
	created = conv.CreatedAt
	trigger, target, _ := m.summaryBounds(key)
	over, err := m.store.Tail(ctx, key, TailQuery{Tokens: trigger})
	if err != nil {
		return covered, 0, created, err
	}
	if len(over) > 0 && over[0].Seq <= covered+1 {
		for _, msg := range over { // what is unsummarized fits Trigger
			if msg.Seq > covered && msg.Role != RoleSystem {
				unsummarized += msg.Tokens
			}
		}
		return covered, unsummarized, created, nil
	}
	keep, err := m.store.Tail(ctx, key, TailQuery{Tokens: target})
	if err != nil {
		return covered, 0, created, err
	}
	for _, msgs := range [][]Message{keep, over} {
		for _, msg := range msgs {
			if msg.Role == RoleUser && msg.Seq > covered+1 {
				return msg.Seq - 1, 0, created, nil
			}
		}
	}
	return conv.LastSeq, 0, created, nil // no user message in the tail: cover what a chunk can
}

// summarizeChunk summarizes prev plus msgs and stores the result as covering
// msgs' last message, if the summary still covers prev.CoversSeq. With a
// limit (> 0) and a BoundedSummarizer, a summary counted over limit tokens
// is made again within a proportionally smaller bound, a few times at most.
func (m *Memory) summarizeChunk(ctx context.Context, key Key, prev Summary, msgs []Message, created time.Time, limit int) error {
	text, err := m.summaryText(ctx, prev.Text, msgs, limit)
	if err != nil {
		return err
	}
	// The tokenizer to count the summary with, and a first look at whether
	// the conversation was deleted (and re-created) while the summarizer
	// ran; the write checks that again (atomically, with a
	// GenerationWriter), as a delete can come after this read too.
	conv, err := m.store.Conversation(ctx, key)
	if err != nil {
		return err
	}
	if !conv.CreatedAt.Equal(created) {
		return recreated(key)
	}
	counter, err := m.Counter(conv.Tokenizer)
	if err != nil {
		return err
	}
	s := Summary{Text: text, CoversSeq: msgs[len(msgs)-1].Seq, Summarizer: m.summarizer.Name(), CreatedAt: m.now()}
	if s.Tokens, err = counter.Count(ctx, summaryAsMessage(s)); err != nil {
		return err
	}
	_, bounded := m.summarizer.(BoundedSummarizer)
	for bound, try := limit, 0; bounded && limit > 0 && s.Tokens > limit && try < 3; try++ {
		if bound = bound * limit / s.Tokens * 9 / 10; bound < 1 {
			break
		}
		if s.Text, err = m.summaryText(ctx, prev.Text, msgs, bound); err != nil {
			return err
		}
		if s.Tokens, err = counter.Count(ctx, summaryAsMessage(s)); err != nil {
			return err
		}
	}
	if gw, ok := m.store.(GenerationWriter); ok {
		err = gw.PutSummaryOf(ctx, key, created, s, prev.CoversSeq)
	} else {
		err = m.store.(SummaryStore).PutSummary(ctx, key, s, prev.CoversSeq)
	}
	if err == nil {
		m.summaries.put(key, created, &s)
	}
	if errors.Is(err, ErrConflict) {
		return nil // another worker moved the summary on; the next job looks again
	}
	return err
}

// Summary returns the conversation's summary (ErrNotFound if none).
func (m *Memory) Summary(ctx context.Context, key Key) (Summary, error) {
	ss, ok := m.store.(SummaryStore)
	if !ok {
		return Summary{}, fmt.Errorf("%w: this store keeps no summaries", ErrNotFound)
	}
	if err := key.Validate(); err != nil {
		return Summary{}, err
	}
	return ss.Summary(ctx, key)
}

// Facts returns the conversation's current facts, ordered by key.
func (m *Memory) Facts(ctx context.Context, key Key) ([]Fact, error) {
	fs, ok := m.store.(FactStore)
	if !ok {
		return nil, fmt.Errorf("%w: this store keeps no facts", ErrInvalid)
	}
	if err := key.Validate(); err != nil {
		return nil, err
	}
	return fs.Facts(ctx, key)
}

// SetFacts records facts set by the application: SetBy defaults to "app",
// Confidence to 1 and CreatedAt to now. Invalid facts, and facts whose
// SourceSeq is past the conversation's last message, wrap ErrInvalid and
// nothing is written.
func (m *Memory) SetFacts(ctx context.Context, key Key, facts []Fact) error {
	fs, ok := m.store.(FactStore)
	if !ok {
		return fmt.Errorf("%w: this store keeps no facts", ErrInvalid)
	}
	if err := key.Validate(); err != nil {
		return err
	}
	out := make([]Fact, len(facts))
	for i, f := range facts {
		if f.SetBy == "" {
			f.SetBy = "app"
		}
		if f.Confidence == 0 {
			f.Confidence = 1
		}
		if f.CreatedAt.IsZero() {
			f.CreatedAt = m.now()
		}
		if err := f.Validate(); err != nil {
			return err
		}
		out[i] = f
	}
	if err := m.checkSources(ctx, key, out); err != nil {
		return err
	}
	defer m.factLocks.conv.lock(key)()
	m.facts.forget(key)
	return fs.SetFacts(ctx, key, out)
}

// checkSources refuses a fact whose SourceSeq names a message the
// conversation does not have (yet): provenance must point at a message.
// Sequence numbers only grow, so what holds here holds at the write.
func (m *Memory) checkSources(ctx context.Context, key Key, facts []Fact) error {
	var maxSeq int64
	for _, f := range facts {
		maxSeq = max(maxSeq, f.SourceSeq)
	}
	if maxSeq == 0 {
		return nil
	}
	conv, err := m.store.Conversation(ctx, key)
	if err != nil {
		return err
	}
	for _, f := range facts {
		if f.SourceSeq > conv.LastSeq {
			return fmt.Errorf("%w: fact %q source_seq %d is past the conversation's last message (seq %d)", ErrInvalid, f.Key, f.SourceSeq, conv.LastSeq)
		}
	}
	return nil
}

// DeleteFact removes the named fact and its history.
func (m *Memory) DeleteFact(ctx context.Context, key Key, name string) error {
	fs, ok := m.store.(FactStore)
	if !ok {
		return fmt.Errorf("%w: this store keeps no facts", ErrInvalid)
	}
	if err := key.Validate(); err != nil {
		return err
	}
	m.facts.forget(key)
	return fs.DeleteFact(ctx, key, name)
}

// factLocks serializes the application's fact writes with an
// extraction's compare-and-write, in this process: conv for a
// conversation's facts, user for a user's. Striped: a fixed array of
// mutexes, a key hashed to one. An extraction takes its conversation's
// then its user's; the application takes one: no cycle.
type factLocks struct{ conv, user lockStripes }

type lockStripes [64]sync.Mutex

// lockFacts takes the fact locks of the conversation created at created
// and of its user, if it has one (see userOf), and returns the user and
// the unlock.
func (m *Memory) lockFacts(ctx context.Context, key Key, created time.Time) (string, func(), error) {
	unlockConv := m.factLocks.conv.lock(key)
	user, err := m.userOf(ctx, key, created)
	if err != nil || user == "" {
		if err != nil {
			unlockConv()
			return "", nil, err
		}
		return "", unlockConv, nil
	}
	unlockUser := m.factLocks.user.lock(Key{Tenant: key.Tenant, ID: user})
	return user, func() { unlockUser(); unlockConv() }, nil
}

// lock locks key's stripe and returns its unlock.
func (l *lockStripes) lock(key Key) func() {
	h := fnv.New32a()
	h.Write([]byte(key.Tenant))
	h.Write([]byte{0})
	h.Write([]byte(key.ID))
	mu := &l[h.Sum32()%uint32(len(l))]
	mu.Lock()
	return mu.Unlock
}

// factCacheTTL is how long the fact values an extraction saw are trusted
// before the next extraction reads them again (to see values others set).
const factCacheTTL = 2 * time.Second

// factCache keeps, per conversation, the current fact values this Memory
// last read or wrote, so an extraction that finds only known values
// neither reads nor writes. It is tied to the conversation's CreatedAt and
// dropped when this Memory sets or deletes facts itself.
type factCache struct {
	mu      sync.Mutex
	entries map[Key]cachedFacts
	bytes   int // of the entries' keys and values, roughly
}

type cachedFacts struct {
	created time.Time
	values  map[string]string
	fetched time.Time
}

func (c *factCache) get(key Key, created, now time.Time) (map[string]string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || created.IsZero() || !e.created.Equal(created) || now.Sub(e.fetched) > factCacheTTL {
		return nil, false
	}
	return maps.Clone(e.values), true
}

func (c *factCache) put(key Key, created time.Time, values map[string]string, now time.Time) {
	if created.IsZero() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil || len(c.entries) >= derivedCacheEntries || c.bytes >= derivedCacheBytes {
		c.entries = make(map[Key]cachedFacts) // bounded: only a shortcut
		c.bytes = 0
	}
	c.entries[key] = cachedFacts{created: created, values: values, fetched: now}
	c.bytes += 128 + len(key.Tenant) + len(key.ID)
	for k, v := range values {
		c.bytes += 64 + len(k) + len(v)
	}
}

func (c *factCache) forget(key Key) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, key)
}

// forgetAll drops every entry: a user's facts changed, and the entries of
// the user's conversations hold them (it is only a shortcut).
func (c *factCache) forgetAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries, c.bytes = nil, 0
}
