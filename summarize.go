package chatmem

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/chatmem/chatmem/internal/bounded"
)

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

// errRewritten is the error of a derived write (a summary, facts,
// vectors) made from messages that a rewind or a redaction changed since
// they were read: nothing was stored, and the work is to be done again.
var errRewritten = errors.New("the conversation was rewritten while its messages were worked on")

// rangeAt reads up to limit messages after seq after, as Store.Range
// does, and the conversation's Revision, read before them: what a worker
// derives from the messages is stored only if the Revision is still that
// one (lockRevision). A rewrite between the two reads gives messages
// newer than the Revision says, and the work is then done again, never
// stored stale.
func (m *Memory) rangeAt(ctx context.Context, key Key, after int64, limit int) ([]Message, int64, error) {
	conv, err := m.store.Conversation(ctx, key)
	if err != nil {
		return nil, 0, err
	}
	msgs, err := m.store.Range(ctx, key, after, limit)
	return msgs, conv.Revision, err
}

// lockRevision is what a worker does right before it stores what it
// derived from messages read at the conversation's Revision rev: it takes
// the conversation's rewrite lock, which this Memory's Rewind and Redact
// hold around their change, and reads the conversation again. It returns
// the conversation and the unlock, to call once the write is made. If a
// rewind or a redaction moved the Revision on, it returns errRewritten
// (nothing is to be stored: it could hold text that is gone; the caller
// does the work again from the messages as they are now), and if the
// conversation is gone, or is not the one created at created (unless
// created is zero), it wraps ErrNotFound; on error the lock is released.
// Another process's rewind or redaction does not take this lock: one that
// lands between the read and the write is not seen.
func (m *Memory) lockRevision(ctx context.Context, key Key, created time.Time, rev int64) (Conversation, func(), error) {
	unlock := m.rewrites.lock(key)
	conv, err := m.store.Conversation(ctx, key)
	switch {
	case err != nil:
	case !created.IsZero() && !conv.CreatedAt.Equal(created):
		err = recreated(key)
	case conv.Revision != rev:
		err = errRewritten
	}
	if err != nil {
		unlock()
		return Conversation{}, nil, err
	}
	return conv, unlock, nil
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
	ss := m.caps.summaries
	_, _, limit := m.summaryBounds(key)
	held := false
	for {
		prev, err := ss.Summary(ctx, key)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return -1, err
		}
		end, unsummarized, current, rev, err := m.summaryEnd(ctx, key, prev.CoversSeq)
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
				err := m.summarizeChunk(ctx, key, running, chunk[:cut+1], created, rev, limit)
				if errors.Is(err, errRewritten) {
					break // redo it from the messages as they are now
				}
				if err != nil {
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
func (m *Memory) summaryEnd(ctx context.Context, key Key, covered int64) (end int64, unsummarized int, created time.Time, rev int64, err error) {
	conv, err := m.store.Conversation(ctx, key)
	if err != nil || conv.LastSeq <= covered {
		return covered, 0, conv.CreatedAt, conv.Revision, err
	}
	created, rev = conv.CreatedAt, conv.Revision
	trigger, target, _ := m.summaryBounds(key)
	over, err := m.store.Tail(ctx, key, TailQuery{Tokens: trigger})
	if err != nil {
		return covered, 0, created, rev, err
	}
	if len(over) > 0 && over[0].Seq <= covered+1 {
		for _, msg := range over { // what is unsummarized fits Trigger
			if msg.Seq > covered && msg.Role != RoleSystem {
				unsummarized += msg.Tokens
			}
		}
		return covered, unsummarized, created, rev, nil
	}
	keep, err := m.store.Tail(ctx, key, TailQuery{Tokens: target})
	if err != nil {
		return covered, 0, created, rev, err
	}
	for _, msgs := range [][]Message{keep, over} {
		for _, msg := range msgs {
			if msg.Role == RoleUser && msg.Seq > covered+1 {
				return msg.Seq - 1, 0, created, rev, nil
			}
		}
	}
	return conv.LastSeq, 0, created, rev, nil // no user message in the tail: cover what a chunk can
}

// summarizeChunk summarizes prev plus msgs and stores the result as covering
// msgs' last message, if the summary still covers prev.CoversSeq. With a
// limit (> 0) and a BoundedSummarizer, a summary counted over limit tokens
// is made again within a proportionally smaller bound, a few times at most.
// msgs were read at the conversation's Revision rev: if a rewind or a
// redaction moved it on while the summarizer ran, nothing is stored (the
// summary could hold text that is gone) and it returns errRewritten, for
// the caller to summarize the messages as they are now. The check and the
// write are made under the conversation's rewrite lock, which this
// Memory's Rewind and Redact hold around their change.
func (m *Memory) summarizeChunk(ctx context.Context, key Key, prev Summary, msgs []Message, created time.Time, rev int64, limit int) error {
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
	if conv.Revision != rev {
		return errRewritten
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
	// The revision again, under the lock, now that the summary is made.
	conv, unlock, err := m.lockRevision(ctx, key, created, rev)
	if err != nil {
		return err
	}
	defer unlock()
	if gw := m.caps.generations; gw != nil {
		err = gw.PutSummaryOf(ctx, key, created, s, prev.CoversSeq)
	} else {
		err = m.caps.summaries.PutSummary(ctx, key, s, prev.CoversSeq)
	}
	if err == nil {
		m.summaries.put(key, created, conv.Revision, &s)
	}
	if errors.Is(err, ErrConflict) {
		return nil // another worker moved the summary on; the next job looks again
	}
	return err
}

// When SummaryOptions leaves Trigger unset, a conversation's summary follows
// the budget its summary_buffer context reads leave for the summary and the
// messages after it (the budget less the pinned messages, the facts and the
// request overhead; see assembly.summaryBudget): it is extended once the
// messages after it pass autoTriggerPercent of that budget, until about
// autoTargetPercent remain, and it is kept within autoSummaryPercent, so
// that the summary and the messages after it fit together with room to
// spare (5%) for the newest turn.
//
// The summary gets the larger share: it stands for everything older, the
// messages after it only for the last few turns. On LoCoMo (docs/
// evaluation.md) answer presence at 2,048 tokens rose with the summary's
// share, 0.558 at 60/35/30, 0.580 at 45/20/45, 0.608 at these values and
// 0.621 at 35/15/60; these keep a recent window of 20-40% of the budget (a
// few turns even at small budgets) and summarize every 20% of it.
const (
	autoTriggerPercent = 40
	autoTargetPercent  = 20
	autoSummaryPercent = 55
)

// summaryBudgets remembers, per conversation, the budget its latest
// summary_buffer traffic read in this process left for the summary and
// the messages after it (see maintainSummary), and the read's low-water
// mark when it was cache-stable: the summaries follow what the
// conversation is read with now. Previews (ContextOptions.Preview) are
// not noted. It is bounded; a conversation it forgets goes back to the
// fixed defaults until its next read.
type summaryBudgets struct {
	bounded.Map[Key, summaryBudget] // a forgotten budget is noted again at the next read
}

// summaryBudget is a summary_buffer read's budget for the summary and the
// messages after it, and its low-water percent when it was cache-stable
// (0 otherwise).
type summaryBudget struct {
	budget, low int
}

// note records b for key and reports whether the remembered one changed.
func (bs *summaryBudgets) note(key Key, b summaryBudget) bool {
	if b.budget < 1 {
		return false
	}
	return bs.Update(key, 0, func(old summaryBudget, ok bool) (summaryBudget, bool) {
		return b, !ok || old != b
	})
}

// summaryBounds returns when key's summary is extended (once more than
// trigger tokens follow it), how far (until about target remain), and the
// tokens the summary itself may take (0: no bound). They are the
// SummaryOptions when set, else they follow the conversation's remembered
// budget, else the defaults (2000 and 1000, no bound).
//
// For a cache-stable read the summary is extended only when the window
// must move (the messages after it pass the trigger, the most that fits
// beside a full summary), and then down to what brings summary and
// messages to the low-water mark: each extension is one of the window's
// steps, and between two steps the summary, and so the window's front,
// stays the same.
func (m *Memory) summaryBounds(key Key) (trigger, target, limit int) {
	if m.autoSummary {
		if sb, ok := m.budgets.Get(key); ok {
			b := sb.budget
			targetPercent := autoTargetPercent
			if sb.low > 0 {
				targetPercent = max(sb.low-autoSummaryPercent, stableTargetPercent)
			}
			return max(b*autoTriggerPercent/100, 2), max(b*targetPercent/100, 1), max(b*autoSummaryPercent/100, 1)
		}
	}
	return m.sumOpts.Trigger, m.sumOpts.Target, 0
}

// stableTargetPercent is the least share of the summary's budget a
// cache-stable summary_buffer window keeps after its summary (see
// summaryBounds): at the default low-water mark, 60% less the summary's
// 55%.
const stableTargetPercent = 5

// noteSummaryBudget remembers the budget a summary_buffer read of key used;
// when that changes what summarizing does, the estimate that lets appends
// skip the check is dropped, so the next job looks again.
func (m *Memory) noteSummaryBudget(key Key, b summaryBudget) {
	if m.autoSummary && m.summarizer != nil && m.budgets.note(key, b) {
		m.worker.setUnsummarized(key, 0, false)
	}
}

// summaryCacheTTL is how long a summary read from the store is reused
// before it is read again, to see summaries other instances wrote.
const summaryCacheTTL = 2 * time.Second

// summaryCache keeps each conversation's latest known summary, so most
// turns need no summary read. Any older summary of the same conversation
// is still a valid one (summaries only move forward, and Context checks
// that the window reaches back to it), so a stale entry costs efficiency,
// never correctness. Entries are tied to the conversation's CreatedAt and
// checked against its LastSeq and Revision, so a deleted and re-created
// conversation does not see its predecessor's, nor a conversation a
// rewind or a redaction changed (in any process) the summary they
// removed (a re-created conversation with the same CreatedAt and as many
// messages within 2 s is the remaining blind spot).
type summaryCache struct {
	bounded.Map[Key, cachedSummary] // sized by the keys and texts, roughly
}

type cachedSummary struct {
	created  time.Time // the conversation's CreatedAt
	revision int64     // and its Revision
	summary  *Summary  // nil: none stored
	fetched  time.Time
}

// forget drops the conversation's entry.
func (c *summaryCache) forget(key Key) { c.Delete(key) }

// get returns the cached summary of the conversation with this CreatedAt
// and LastSeq. Freshness is judged by the wall clock, not Options.Now (a
// test clock may stand still), and a summary covering more than the
// conversation holds belongs to a predecessor, whatever its CreatedAt.
func (c *summaryCache) get(key Key, conv Conversation) (*Summary, bool) {
	e, ok := c.Get(key)
	if !ok || !e.created.Equal(conv.CreatedAt) || e.revision != conv.Revision || time.Since(e.fetched) > summaryCacheTTL ||
		(e.summary != nil && e.summary.CoversSeq > conv.LastSeq) {
		return nil, false
	}
	return e.summary, true
}

// put records what the store holds (read) or what this Memory just wrote.
func (c *summaryCache) put(key Key, created time.Time, revision int64, s *Summary) {
	size := 128 + len(key.Tenant) + len(key.ID)
	if s != nil {
		size += len(s.Text)
	}
	c.Put(key, cachedSummary{created: created, revision: revision, summary: s, fetched: time.Now()}, size)
}

// cachedSummary returns the conversation's summary (nil if none), from the
// cache when it is fresh.
func (m *Memory) cachedSummary(ctx context.Context, key Key, conv Conversation) (*Summary, error) {
	if s, ok := m.summaries.get(key, conv); ok {
		return s, nil
	}
	s, err := m.Summary(ctx, key)
	switch {
	case err == nil:
		m.summaries.put(key, conv.CreatedAt, conv.Revision, &s)
		return &s, nil
	case errors.Is(err, ErrNotFound):
		m.summaries.put(key, conv.CreatedAt, conv.Revision, nil)
		return nil, nil
	}
	return nil, err
}

// maintainSummary is the maintain step of a context read that is traffic,
// not a preview (ContextOptions.Preview skips it). With summary_buffer and a
// summarizer it notes the budget the read leaves the summary and the
// messages after it (noteSummaryBudget); then, when the window left out a
// summary that lags behind it (gap), or sends none while it leaves older
// messages out and the summary follows the budget (a summary that fits may
// be due), it asks the worker for a summary, for the next read, or with
// Options.Sync makes it and assembles again. w, gap and err are the
// assembly's.
func (m *Memory) maintainSummary(ctx context.Context, c *contextRead, w Window, gap bool, err error) (Window, error) {
	if c.plan.p.Kind != PolicySummaryBuffer || m.summarizer == nil {
		return w, err
	}
	sb := summaryBudget{budget: c.a.summaryBudget()}
	if c.plan.p.Cache == CacheStable {
		// The summary's step is its extension, not the window's: it
		// keeps the percent mark (see DefaultLowWater).
		sb.low = cmp.Or(c.plan.p.LowWater, DefaultLowWater)
	}
	m.noteSummaryBudget(c.key, sb)
	if err == nil && !gap && m.autoSummary && w.Summary == nil {
		// No summary sent (none yet, or one made for a larger budget that
		// does not fit this one), and the window leaves older messages
		// out: with the trigger and the summary's bound following this
		// budget, a summary that fits may be due.
		gap = int(c.last) > storedSent(w, c.last)
	}
	switch {
	case !gap:
		return w, err
	case !m.sync:
		m.requestSummary(c.key, c.conv.CreatedAt, c.conv.User)
		return w, err
	}
	// The summary lags behind the window: catch it up, then assemble
	// again with the new summary (the tail read already reaches it).
	if serr := m.allowModels(ctx, c.key.Tenant); serr != nil {
		return w, err // over the tenant's memory spend limit: the plain window stands
	}
	if _, serr := m.summarize(m.usageCtx(ctx, c.key, c.conv.User, CallSummarize), c.key, c.conv.CreatedAt); serr != nil {
		m.log.Warn("summarize before context", "key", c.key.String(), "err", serr)
		return w, err
	}
	s, serr := m.Summary(ctx, c.key)
	switch {
	case errors.Is(serr, ErrNotFound):
		return w, err // nothing was due: the plain window stands
	case serr != nil:
		return Window{}, serr
	}
	if c.a.summary, serr = summaryPartOf(ctx, s, c.plan.counter, c.plan.recount); serr != nil {
		return Window{}, serr
	}
	w, _, err = c.a.window()
	return w, err
}
