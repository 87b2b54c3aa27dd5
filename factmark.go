package chatmem

import (
	"context"
	"errors"
	"time"
)

// Fact extraction from a watermark kept in the store (FactMarker): the
// worker extracts the messages after the conversation's fact mark, not
// those of the append that queued it, and stores their facts and the new
// mark in one transaction. So work dropped from a full queue, or lost with
// a process, is done at the conversation's next append, or by the scan
// Start runs for conversations whose mark lags; and a message's facts are
// stored once, as the mark only moves forward by compare-and-set.

// maxExtractChunk bounds the messages one extraction step reads, hands
// the extractors and covers with its mark, so a conversation far behind
// catches up in bounded steps, each stored before the next.
const maxExtractChunk = 1000

// lagPage is how many conversations one FactLaggards call returns.
const lagPage = 100

// extractMarked extracts the facts of the conversation's messages after
// its fact mark, in steps of at most maxExtractChunk messages, until the
// mark reaches the conversation's last message. Each step stores its facts
// and moves the mark with one SetFactsThrough, so a step that fails (the
// extractor, the store, or the process) stores nothing, and the next job
// does it again; a step another process has done meanwhile (ErrConflict)
// is not stored twice. It works on the conversation created at j.created
// (a catch-up job takes the one it finds) and wraps ErrNotFound if
// another has taken its place.
//
// With a Leaser, the extractors are called under the conversation's
// LeaseFacts lease, taken once the mark lags (and the mark read again under
// it): a process refused the lease leaves the work to the holder, so each
// message goes to the extractors once across processes while none dies.
func (m *Memory) extractMarked(ctx context.Context, fm FactMarker, j job) error {
	models := false
	for _, x := range m.extractors {
		models = models || !local(x)
	}
	return m.leased(ctx, j.key, LeaseFacts, models, func(hold holdFunc) error {
		return m.extractHeld(ctx, fm, j, hold)
	})
}

// extractHeld is extractMarked under the lease hold takes or extends.
func (m *Memory) extractHeld(ctx context.Context, fm FactMarker, j job, hold holdFunc) error {
	created := j.created
	held := false
	for {
		mk, err := fm.FactMark(ctx, j.key)
		if err != nil {
			return err
		}
		if j.catchUp && created.IsZero() {
			created = mk.Created
		}
		if !mk.Created.Equal(created) {
			return recreated(j.key)
		}
		if mk.Seq >= mk.LastSeq {
			return nil
		}
		if ok, err := hold(ctx); !ok || err != nil {
			return err // another process extracts them
		}
		if !held {
			held = true
			continue // read the mark again under the lease: the last holder may have moved it
		}
		through := min(mk.LastSeq, mk.Seq+maxExtractChunk)
		msgs, rev := j.carried(mk.Seq+1, through), j.rev
		if msgs == nil {
			if msgs, rev, err = m.rangeAt(ctx, j.key, mk.Seq, int(through-mk.Seq)); err != nil {
				return err
			}
			if len(msgs) == 0 {
				return recreated(j.key) // its messages are gone: deleted meanwhile
			}
			through = msgs[len(msgs)-1].Seq
		}
		var found []Fact
		if hasUser(msgs) { // extractors read what users say
			if found, err = m.findFacts(ctx, msgs); err != nil {
				return err
			}
		}
		err = m.storeMarked(ctx, fm, j.key, created, rev, found, mk.Seq, through)
		if errors.Is(err, ErrConflict) {
			continue // another process moved the mark and stored its facts: look again
		}
		if errors.Is(err, errRewritten) {
			j.msgs = nil // rewound or redacted meanwhile: extract them again as they are now
			continue
		}
		if err != nil {
			return err
		}
	}
}

// storeMarked stores what the extractors found in the messages after the
// mark prev through through, read at the conversation's Revision rev, and
// moves the mark. If a rewind or a redaction moved the Revision on
// meanwhile, it stores nothing, not even the mark (a rewind may have put
// other messages under those seqs), and returns errRewritten (see
// lockRevision). The values compared and the writes go under the fact
// locks (see extractFrom).
func (m *Memory) storeMarked(ctx context.Context, fm FactMarker, key Key, created time.Time, rev int64, found []Fact, prev, through int64) error {
	conv, unlockRev, err := m.lockRevision(ctx, key, created, rev)
	if err != nil {
		return err
	}
	defer unlockRev()
	var nf newFound
	if len(found) > 0 {
		user := m.userIn(conv)
		defer m.lockFacts(key, user)()
		if nf, err = m.newFacts(ctx, key, created, user, found); err != nil {
			return err
		}
		if err := m.setUserFacts(ctx, key, created, nf); err != nil {
			return err
		}
	}
	if err := fm.SetFactsThrough(ctx, key, created, nf.changed, prev, through); err != nil {
		// On a conflict the values cached here may be stale, as they may
		// be after any failed write.
		m.facts.forget(key)
		return err
	}
	if nf.now != nil {
		m.facts.put(key, created, nf.now, m.now())
	}
	return nil
}

// carried returns the job's own messages from..to, if it carries them
// all, and nil otherwise. A job's messages are those of the appends this
// process made, and may skip what another process appended between them:
// only a dense run is taken.
func (j job) carried(from, to int64) []Message {
	n := len(j.msgs)
	if n == 0 || from < j.msgs[0].Seq || to > j.msgs[n-1].Seq || j.msgs[n-1].Seq-j.msgs[0].Seq != int64(n-1) {
		return nil
	}
	first := j.msgs[0].Seq
	return j.msgs[from-first : to-first+1]
}

// hasUser reports whether msgs holds a user message.
func hasUser(msgs []Message) bool {
	for _, msg := range msgs {
		if msg.Role == RoleUser {
			return true
		}
	}
	return false
}

// logExtract logs what an extraction job ended with, at the worker's
// boundary.
func (m *Memory) logExtract(key Key, err error) {
	switch {
	case errors.Is(err, ErrNotFound):
		// Deleted (or expired, perhaps created again) while the work
		// waited: it is moot.
		m.log.Debug("extract facts: conversation gone", "key", key.String())
	case err != nil:
		// The fact mark stays where it was: the next append (or the next
		// Start) extracts these messages again.
		m.log.Error("extract facts", "key", key.String(), "err", err)
	}
}

// catchUpFacts is the startup scan that Start runs when there are
// extractors: it pages through the conversations whose fact mark lags
// their last message (FactLaggards, lagPage at a time) and queues a
// catch-up job for each, waiting for room in the queue rather than
// dropping any, until it has seen them all or Close stops it.
func (m *Memory) catchUpFacts(ctx context.Context, fm FactMarker) {
	var after Key
	for {
		var keys []Key
		err := m.retry(ctx, "fact catch-up scan", func(ctx context.Context) (err error) {
			keys, err = fm.FactLaggards(ctx, after, lagPage)
			return err
		})
		if err != nil {
			if ctx.Err() == nil {
				m.log.Error("fact catch-up scan; the rest catch up at their next append", "after", after.String(), "err", err)
			}
			return
		}
		for _, key := range keys {
			if !m.queueCatchUp(ctx, key) {
				return
			}
		}
		if len(keys) < lagPage {
			return
		}
		after = keys[len(keys)-1]
	}
}

// queueCatchUp queues a catch-up job for key, or merges it into the work
// the conversation has queued (which then extracts from the mark too),
// waiting while the queue is full. It returns false once Close was called.
func (m *Memory) queueCatchUp(ctx context.Context, key Key) bool {
	w := &m.worker
	for {
		w.mu.Lock()
		if w.closed {
			w.mu.Unlock()
			return false
		}
		catchUp := job{key: key, user: true, catchUp: true}
		p := w.pending[key]
		if w.active[key] {
			p = w.next[key]
		}
		switch {
		case p != nil:
			p.merge(catchUp)
			w.mu.Unlock()
			return true
		case w.active[key]:
			w.next[key] = &catchUp // its worker takes it on next
			w.mu.Unlock()
			return true
		}
		select {
		case w.queue <- key:
			w.pending[key] = &catchUp
			w.mu.Unlock()
			return true
		default:
		}
		w.mu.Unlock()
		select {
		case <-ctx.Done():
			return false
		case <-time.After(10 * time.Millisecond):
		}
	}
}
