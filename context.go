package chatmem

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"golang.org/x/text/language"
	"golang.org/x/text/language/display"
)

// ContextOptions qualify one context read.
type ContextOptions struct {
	// Tokenizer, if set and not the conversation's own, counts the window
	// with that tokenizer instead of the stored counts. That costs counting
	// every message read on each call (the stored running totals no longer
	// apply), so it suits inspection more than the per-turn path.
	Tokenizer string
	// Pending are messages treated as appended after the stored ones,
	// without storing them: "what would be sent if this were the next
	// message". They are validated against the stored tail and counted with
	// the window's counter; they do not change Dropped's count of stored
	// messages. Evaluation and previews use it.
	Pending []Message
	// Reserve are messages the caller sends along with the window but does
	// not store, such as a request's own system prompt: they are counted
	// with the window's counter (each distinct text once, then from
	// memory), their tokens come off p.Budget before the window is
	// assembled, and Window.Reserved reports them. A budget they use up
	// wraps ErrBudgetTooSmall.
	Reserve []Message
}

// Metadata values that mark the messages Context makes up, under the
// metadata key "chatmem".
const (
	MetaKey     = "chatmem"
	MetaFacts   = "facts"
	MetaSummary = "summary"
)

// Context assembles what to send for the conversation under p: pinned system
// messages, then (with p.Facts) a system message listing the known facts,
// then (with PolicySummaryBuffer) a system message holding the rolling
// summary, then the policy's window of recent messages; all inside p.Budget.
//
// The newest user message (with what follows it) always has room: facts and
// then the summary are added only while it still fits, and the window gets
// what is left. A summary is sent only when the window reaches back to the
// first message after it (no gap between summary and window); when the
// summary lags further behind, Context sends a plain window instead and,
// with Options.Sync, summarizes first.
//
// It reads the conversation's metadata, its system messages, its facts and
// summary when asked for, and one bounded tail, so its cost follows the
// window, not the history (except PolicyAll, which sends the history).
// Window.Dropped counts the conversation's messages not sent. It wraps
// ErrInvalid for a bad policy, ErrNotFound and ErrBudgetTooSmall.
func (m *Memory) Context(ctx context.Context, key Key, p Policy, opts ContextOptions) (Window, error) {
	return m.context(ctx, key, p, opts, nil)
}

// context is Context; with conv set, it assembles the window of the
// conversation as conv describes it (an append's result: see Turn)
// instead of reading the conversation's metadata first.
func (m *Memory) context(ctx context.Context, key Key, p Policy, opts ContextOptions, known *Conversation) (Window, error) {
	if err := key.Validate(); err != nil {
		return Window{}, err
	}
	if err := p.Validate(); err != nil {
		return Window{}, err
	}
	var conv Conversation
	var since sinceRead
	var err error
	if known != nil {
		conv = *known
	} else if conv, since, err = m.conversation(ctx, key, p.Kind != PolicyAll && opts.Tokenizer == ""); err != nil {
		// The messages since the cache entry come along only for a window
		// the entry can serve: a tail under the conversation's own counts.
		return Window{}, fmt.Errorf("context of %s: %w", key, err)
	}
	// The summary is read before the tail, so the tail reaches at least as
	// far as the summary covers, whatever the worker does in between.
	var summary *Summary
	if p.Kind == PolicySummaryBuffer {
		if summary, err = m.cachedSummary(ctx, key, conv); err != nil {
			return Window{}, err
		}
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
	reserved := 0
	for i, msg := range opts.Reserve {
		// Not stored: the caller's own limits apply, not the Memory's.
		if err := msg.Validate(NoLimits); err != nil {
			return Window{}, fmt.Errorf("reserved message %d: %w", i, err)
		}
		n, err := m.blocks.count(ctx, counter, msg)
		if err != nil {
			return Window{}, err
		}
		reserved += n
	}
	if p.Budget > 0 && reserved > 0 {
		if p.Budget -= reserved; p.Budget < 1 {
			return Window{}, fmt.Errorf("%w: the reserved messages take %d tokens, the whole budget of %d", ErrBudgetTooSmall, reserved, p.Budget+reserved)
		}
	}

	var msgs []Message
	if recount {
		msgs, err = m.recountedTail(ctx, key, conv, p, counter)
	} else {
		msgs, err = m.tail(ctx, key, conv, since, p)
	}
	if err != nil {
		return Window{}, fmt.Errorf("context of %s: %w", key, err)
	}
	pinned, recent := splitPinned(msgs)
	last := conv.LastSeq
	if len(recent) > 0 {
		last = max(last, recent[len(recent)-1].Seq) // appended since conv was read
	}
	if len(opts.Pending) > 0 {
		if recent, err = m.withPending(ctx, recent, opts.Pending, counter, last); err != nil {
			return Window{}, err
		}
	}

	// recent is this call's own copy (every read returns one): the window
	// may share it.
	a := assembly{p: p, pinned: pinned, recent: recent, share: true}
	if p.Facts {
		if a.facts, err = m.factsMessage(ctx, key, conv.User, counter); err != nil {
			return Window{}, err
		}
	}
	if summary != nil {
		if a.summary, err = summaryPartOf(ctx, *summary, counter, recount); err != nil {
			return Window{}, err
		}
	}
	if p.Kind == PolicySummaryBuffer && p.Recall {
		a.p.Budget = p.recentBudget() // recall gets the rest
	}
	if p.Kind == PolicySummaryBuffer {
		m.noteSummaryBudget(key, a.summaryBudget())
	}
	w, gap, err := a.window()
	if err == nil && !gap && m.autoSummary && m.summarizer != nil && p.Kind == PolicySummaryBuffer && w.Summary == nil {
		// No summary sent (none yet, or one made for a larger budget that
		// does not fit this one), and the window leaves older messages
		// out: with the trigger and the summary's bound following this
		// budget, a summary that fits may be due.
		gap = int(last) > storedSent(w, last)
	}
	if gap && !m.sync && m.summarizer != nil {
		m.requestSummary(key, conv.CreatedAt) // for the next read
	}
	if gap && m.sync && m.summarizer != nil {
		// The summary lags behind the window: catch it up, then assemble
		// again with the new summary (the tail read already reaches it).
		if _, err := m.summarize(ctx, key, conv.CreatedAt); err != nil {
			m.log.Warn("summarize before context", "key", key.String(), "err", err)
		} else if s, err := m.Summary(ctx, key); errors.Is(err, ErrNotFound) {
			// Nothing was due: the plain window stands.
		} else if err != nil {
			return Window{}, err
		} else if a.summary, err = summaryPartOf(ctx, s, counter, recount); err != nil {
			return Window{}, err
		} else {
			w, _, err = a.window()
		}
	}
	if err == nil && p.Kind != PolicyAll && conv.Turns > 0 && w.Parts.Recent == 0 && len(opts.Pending) == 0 {
		// The bounded tail held no user message that fits: either the
		// newest one is too big, or unsendable units (a call still waiting
		// for its results) took the tail's room. Assemble again over the
		// whole last turn: a window, or ErrBudgetTooSmall saying how big.
		var lastTurn []Message
		if lastTurn, err = m.store.Tail(ctx, key, TailQuery{Turns: 1}); err == nil && recount {
			err = recountAll(ctx, counter, lastTurn)
		}
		if err == nil {
			_, a.recent = splitPinned(lastTurn)
			a.summary = nil
			w, _, err = a.window()
		}
	}
	if err == nil && p.recalls() {
		w, err = m.recallInto(ctx, key, p, w, counter, !recount, conv.User)
	}
	if err != nil {
		return Window{}, err
	}
	// Every message sent is a stored one of this conversation, unless some
	// are made up (facts, summary), pending or recalled.
	sent := len(w.Messages)
	if w.Facts != nil || w.Summary != nil || len(opts.Pending) > 0 || w.Parts.Recalled > 0 {
		sent = storedSent(w, last)
	}
	w.Dropped = int(last) - sent
	w.Reserved = reserved
	return w, nil
}

// storedSent counts the stored messages w sends: not made up (Seq 0), not
// pending (Seq > last).
func storedSent(w Window, last int64) int {
	sent := 0
	for _, msg := range w.Messages {
		if msg.Seq > 0 && msg.Seq <= last {
			sent++
		}
	}
	return sent
}

// withPending validates and counts pending and returns recent followed by
// them, with sequence numbers after the stored ones.
func (m *Memory) withPending(ctx context.Context, recent, pending []Message, c Counter, last int64) ([]Message, error) {
	if err := ValidateHistory(recent, pending, m.limits); err != nil {
		return nil, err
	}
	next := last + 1
	out := append(make([]Message, 0, len(recent)+len(pending)), recent...)
	for _, msg := range pending {
		msg = msg.Clone()
		var err error
		if msg.Tokens, err = c.Count(ctx, msg); err != nil {
			return nil, err
		}
		msg.Seq = next
		next++
		out = append(out, msg)
	}
	return out, nil
}

// assembly is one context being put together: the conversation's pinned
// system messages and recent tail, and the made-up facts and summary
// messages that may join them.
type assembly struct {
	p              Policy
	pinned, recent []Message
	facts          *factsPart
	summary        *summaryPart
	// share lets the window be a part of recent, not a copy (see
	// selectWindow): recent is never changed.
	share bool
}

type factsPart struct {
	msg   Message
	facts []Fact
}

type summaryPart struct {
	msg     Message
	summary Summary
}

// window fits the parts into the budget: system messages, the newest user
// turn, facts, the summary, then as much recent history as fits. gap reports
// a summary left out because the window could not reach back to it.
func (a assembly) window() (w Window, gap bool, err error) {
	p := a.p
	if p.Kind == PolicySummaryBuffer || p.Kind == PolicyRecall {
		p.Kind, p.Recall, p.Scope = PolicyTokenBudget, false, ""
	}
	if p.Kind == PolicyAll || p.Budget == 0 {
		pinned := a.pinned
		if a.facts != nil {
			pinned = append(append([]Message(nil), pinned...), a.facts.msg)
		}
		w, err = selectWindow(p, pinned, a.recent, a.share)
		return a.label(w), false, err
	}
	free := p.Budget - p.Overhead
	for _, m := range a.pinned {
		free -= m.Tokens
	}
	if need, ok := newestUserNeed(a.recent); ok {
		free -= need
	}
	pinned := append([]Message(nil), a.pinned...)
	facts := a.facts
	if facts != nil && facts.msg.Tokens <= free {
		pinned = append(pinned, facts.msg)
		free -= facts.msg.Tokens
	} else {
		facts = nil
	}
	if s := a.summary; s != nil && s.msg.Tokens <= free {
		after := a.recent
		for len(after) > 0 && after[0].Seq <= s.summary.CoversSeq {
			after = after[1:]
		}
		w, err := selectWindow(p, append(pinned, s.msg), after, a.share)
		if err == nil && reaches(w, after, s.summary.CoversSeq) {
			return assembly{facts: facts, summary: s}.label(w), false, nil
		}
		gap = true
	} else if s != nil {
		gap = false // left out for room, not for a gap
	}
	w, err = selectWindow(p, pinned, a.recent, a.share)
	return assembly{facts: facts}.label(w), gap, err
}

// reaches reports whether window w holds the first message after the
// summary's cover point, so that summary and window leave no gap.
func reaches(w Window, after []Message, covers int64) bool {
	if len(after) == 0 {
		// Nothing after the summary in this tail: a summary newer than the
		// tail read (another writer's). Sending it would leave out the
		// newest user message, so it counts as a gap.
		return false
	}
	if after[0].Seq != covers+1 {
		return false // the tail read did not reach back to the summary
	}
	for _, m := range w.Messages {
		if m.Seq != 0 && m.Role != RoleSystem {
			return m.Seq == covers+1
		}
	}
	return false
}

// label moves the tokens of the made-up messages in w from Parts.System to
// their own parts and records what was sent.
func (a assembly) label(w Window) Window {
	if a.facts != nil {
		w.Parts.System -= a.facts.msg.Tokens
		w.Parts.Facts = a.facts.msg.Tokens
		w.Facts = a.facts.facts
	}
	if a.summary != nil {
		w.Parts.System -= a.summary.msg.Tokens
		w.Parts.Summary = a.summary.msg.Tokens
		s := a.summary.summary
		w.Summary = &s
	}
	return w
}

// factsMessage returns the facts block, or nil when there are no facts.
// A conversation of a user sees the user's facts too (VisibleFacts).
func (m *Memory) factsMessage(ctx context.Context, key Key, user string, c Counter) (*factsPart, error) {
	facts, err := m.visibleFacts(ctx, key, user)
	if err != nil || len(facts) == 0 {
		return nil, err
	}
	var b strings.Builder
	b.WriteString("User facts:")
	for i, f := range facts {
		if i > 0 {
			b.WriteByte(';')
		}
		fmt.Fprintf(&b, " %s=%s", f.Key, factText(f))
	}
	msg := Message{Role: RoleSystem, Content: b.String(), Metadata: map[string]string{MetaKey: MetaFacts}}
	if msg.Tokens, err = m.blocks.count(ctx, c, msg); err != nil {
		return nil, err
	}
	return &factsPart{msg: msg, facts: facts}, nil
}

// languageFacts are the fact keys whose values are language tags (the
// rule extractor's "language" and "written_language").
var languageFacts = map[string]bool{"language": true, "written_language": true}

// factText is a fact's value as the facts block gives it to a model: a
// language tag with its English name first ("Tamil (ta)"), which models
// and people read better than the bare code; any other value as stored.
func factText(f Fact) string {
	if !languageFacts[f.Key] || len(f.Value) > 35 {
		return f.Value
	}
	tag, err := language.Parse(f.Value)
	if err != nil {
		return f.Value
	}
	name := display.English.Tags().Name(tag)
	if name == "" || strings.EqualFold(name, f.Value) || strings.HasPrefix(name, "Unknown") {
		return f.Value
	}
	return name + " (" + f.Value + ")"
}

// summaryPartOf makes the summary's system message. Its tokens were
// counted when it was written, unless the window is recounted.
func summaryPartOf(ctx context.Context, s Summary, c Counter, recount bool) (*summaryPart, error) {
	msg := summaryAsMessage(s)
	if recount {
		var err error
		if msg.Tokens, err = c.Count(ctx, msg); err != nil {
			return nil, err
		}
	}
	return &summaryPart{msg: msg, summary: s}, nil
}

// summaryAsMessage is how a summary is sent: a system message naming the
// messages it stands for. Summary.Tokens counts this message.
func summaryAsMessage(s Summary) Message {
	return Message{
		Role:     RoleSystem,
		Content:  fmt.Sprintf("Summary of messages 1-%d:\n%s", s.CoversSeq, s.Text),
		Tokens:   s.Tokens,
		Metadata: map[string]string{MetaKey: MetaSummary},
	}
}

// tail reads the pinned system messages and the newest messages the policy
// can use, with the stored counts.
func (m *Memory) tail(ctx context.Context, key Key, conv Conversation, since sinceRead, p Policy) ([]Message, error) {
	if p.Kind == PolicyAll {
		return m.store.Range(ctx, key, 0, 0)
	}
	q := TailQuery{Turns: p.Turns}
	if p.Budget > 0 {
		q.Tokens = max(p.Budget-int(conv.SystemTokens)-p.Overhead, 0)
		if q.Tokens == 0 {
			if conv.SystemTokens == 0 {
				return nil, nil
			}
			return m.store.System(ctx, key) // Apply reports the budget as too small
		}
		if p.recalls() && conv.Tokens > int64(q.Tokens) {
			// The recent part gets Recent tokens; recall reads the rest of
			// the history itself (and more of the tail if it leaves room).
			q.Tokens = min(q.Tokens, p.recentBudget())
		}
	}
	return m.cachedTail(ctx, key, conv, since, q)
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

// blockKey identifies a text under a counter: a digest, so that the
// cache's memory does not grow with the texts.
func blockKey(c Counter, msg Message) [sha256.Size]byte {
	h := sha256.New()
	field := func(s string) {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		io.WriteString(h, s)
	}
	for _, s := range []string{c.Name(), string(msg.Role), msg.Name, msg.ToolCallID, msg.Content} {
		field(s)
	}
	for _, tc := range msg.ToolCalls {
		for _, s := range []string{tc.ID, tc.Type, tc.Function.Name, tc.Function.Arguments} {
			field(s)
		}
	}
	var k [sha256.Size]byte
	h.Sum(k[:0])
	return k
}

// blockCounts remembers the token counts of the blocks Context makes up
// (the facts block), by counter and text: facts change rarely, so most
// turns count nothing, as for stored messages.
type blockCounts struct {
	mu     sync.Mutex
	counts map[[sha256.Size]byte]int
}

func (b *blockCounts) count(ctx context.Context, c Counter, msg Message) (int, error) {
	k := blockKey(c, msg)
	b.mu.Lock()
	n, ok := b.counts[k]
	b.mu.Unlock()
	if ok {
		return n, nil
	}
	n, err := c.Count(ctx, msg)
	if err != nil {
		return 0, err
	}
	b.mu.Lock()
	if b.counts == nil || len(b.counts) >= 10000 {
		b.counts = make(map[[sha256.Size]byte]int) // bounded: only a shortcut
	}
	b.counts[k] = n
	b.mu.Unlock()
	return n, nil
}

// summaryBudget is the budget a summary_buffer read leaves for the summary
// and the messages after it: the policy's budget less the pinned system
// messages, the facts block and the request overhead, so that a long system
// prompt does not push the summary out of the window.
func (a assembly) summaryBudget() int {
	b := a.p.Budget - a.p.Overhead
	for _, m := range a.pinned {
		b -= m.Tokens
	}
	if a.facts != nil {
		b -= a.facts.msg.Tokens
	}
	return b
}
