package chatmem

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/chatmem/chatmem/internal/bounded"
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
	// Preview marks a read that shows what would be sent (the inspector,
	// an evaluation's questions, a dry run) rather than a turn's read
	// (traffic). A preview never changes what is summarized or when: its
	// budget is not taken as the conversation's summary budget (see
	// SummaryOptions), it queues no work for the worker, and with
	// Options.Sync it takes no lease, calls no summarizer and writes
	// nothing. It reads as any read does (and may fill Memory's caches). In
	// Turn it makes only the read a preview: the append is traffic.
	Preview bool
	// Shared lets the window's messages share their tool calls and
	// metadata with Memory's tail cache rather than get copies of them:
	// for a caller that only reads the window (encodes it, say), which
	// then must not modify those, nor keep them past its use. It saves an
	// allocation per message that carries metadata (each of the chat
	// proxy's stored replies does) or tool calls.
	Shared bool
	// Receipt asks for Window.Receipt: what the window is made of and how
	// it was assembled. Without it no receipt is made and nothing is
	// timed.
	Receipt bool
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

// context is Context; with known set, it assembles the window of the
// conversation as known describes it (an append's result: see Turn)
// instead of reading the conversation's metadata first. It is the recipe
// of a read, one function a step: plan and read (readContext), assemble
// (assemble), maintain the summary (maintainSummary, skipped by previews),
// complete the window (lastTurn, then recallInto) and account for what it
// left out (account).
func (m *Memory) context(ctx context.Context, key Key, p Policy, opts ContextOptions, known *Conversation) (Window, error) {
	if m.tracer != nil {
		return m.tracedContext(ctx, key, p, opts, known)
	}
	return m.contextSteps(ctx, key, p, opts, known)
}

// contextSteps is context's steps, untraced.
func (m *Memory) contextSteps(ctx context.Context, key Key, p Policy, opts ContextOptions, known *Conversation) (Window, error) {
	if known == nil { // Turn, which passes known, checked both already
		if err := key.Validate(); err != nil {
			return Window{}, err
		}
		if err := p.Validate(); err != nil {
			return Window{}, err
		}
	}
	var start time.Time
	if opts.Receipt {
		start = time.Now()
	}
	c, err := m.readContext(ctx, key, p, opts, known)
	if err != nil {
		return Window{}, err
	}
	var read time.Time
	if opts.Receipt {
		read = time.Now()
	}
	w, gap, err := m.assemble(ctx, &c)
	if !opts.Preview {
		w, err = m.maintainSummary(ctx, &c, w, gap, err)
	}
	if err == nil {
		w, err = m.lastTurn(ctx, &c, w)
	}
	if err == nil && c.plan.p.recalls() {
		w, err = m.recallInto(ctx, key, c.plan.p, w, c.plan.counter, !c.plan.recount, c.conv.User)
	}
	if err != nil {
		return Window{}, err
	}
	if c.plan.p.Cache == CacheStable {
		w = layoutStable(w)
	}
	w = c.account(w)
	if opts.Receipt {
		w.Receipt = c.receiptOf(w, read.Sub(start), time.Since(read))
	}
	return w, nil
}

// contextPlan is how a context read under a policy goes, worked out from
// the policy, the read's options and the counter of the conversation
// before the tail is read: Context and Turn's prefetch plan with it
// (planContext), and read the tail it asks for (Policy.tailQuery).
type contextPlan struct {
	// p is the policy with the counter's RequestOverhead; Context takes
	// the reserved messages off its budget once they are counted.
	p Policy
	// counter counts the window: the conversation's own, or
	// ContextOptions.Tokenizer's, and then recount is set: every message
	// read is counted anew instead of using the stored counts.
	counter Counter
	recount bool
}

// planContext plans a read under p of a conversation kept under own (for
// Turn's prefetch, the counter a new conversation gets).
func (m *Memory) planContext(p Policy, opts ContextOptions, own Counter) (contextPlan, error) {
	pl := contextPlan{p: p, counter: own}
	if opts.Tokenizer != "" && opts.Tokenizer != own.Name() {
		c, err := m.Counter(opts.Tokenizer)
		if err != nil {
			return contextPlan{}, err
		}
		pl.counter, pl.recount = c, true
	}
	if o, ok := pl.counter.(RequestOverhead); ok {
		pl.p.Overhead = o.RequestOverhead()
	}
	return pl, nil
}

// tailQuery is the tail a window under p (not PolicyAll) reads after the
// conversation's system messages, whose tokens are systemTokens, of a
// conversation of tokens tokens; tokens < 0 means a conversation known to
// outgrow the budget (Turn's prefetch, before the conversation is read,
// bets on it). A recall policy reads only its recent part when the
// conversation outgrew the budget (recall reads the rest of the history
// itself, and more of the tail if it leaves room). With a budget,
// Tokens 0 means the system messages take it all: none of the tail fits.
func (p Policy) tailQuery(systemTokens, tokens int64) TailQuery {
	q := TailQuery{Turns: p.Turns}
	if p.Budget > 0 {
		q.Tokens = max(p.Budget-int(systemTokens)-p.Overhead, 0)
		if q.Tokens > 0 && p.recalls() && (tokens < 0 || tokens > int64(q.Tokens)) {
			q.Tokens = min(q.Tokens, p.recentBudget())
		}
	}
	return q
}

// contextRead is one context read as its steps go: what it planned, what
// it read and the assembly of the window.
type contextRead struct {
	key      Key
	opts     ContextOptions
	plan     contextPlan
	conv     Conversation
	summary  *Summary // summary_buffer's, nil if none
	reserved int      // the tokens of opts.Reserve, off plan.p.Budget
	cached   bool     // the tail cache served the tail
	last     int64    // the last stored message, as far as the reads saw
	a        assembly
}

// readContext is the plan and read steps: the conversation's metadata
// (unless known), its summary (summary_buffer), the plan, the reserved
// messages' tokens, the tail the plan asks for and the pending messages.
func (m *Memory) readContext(ctx context.Context, key Key, p Policy, opts ContextOptions, known *Conversation) (contextRead, error) {
	c := contextRead{key: key, opts: opts}
	var since sinceRead
	var err error
	if known != nil {
		c.conv = *known
	} else if c.conv, since, err = m.conversation(ctx, key, p.Kind != PolicyAll && opts.Tokenizer == ""); err != nil {
		// The messages since the cache entry come along only for a window
		// the entry can serve: a tail under the conversation's own counts.
		return c, fmt.Errorf("context of %s: %w", key, err)
	}
	// The summary is read before the tail, so the tail reaches at least as
	// far as the summary covers, whatever the worker does in between.
	if p.Kind == PolicySummaryBuffer {
		if c.summary, err = m.cachedSummary(ctx, key, c.conv); err != nil {
			return c, err
		}
	}
	own, err := m.Counter(c.conv.Tokenizer)
	if err != nil {
		return c, err
	}
	if c.plan, err = m.planContext(p, opts, own); err != nil {
		return c, err
	}
	if err := m.reserve(ctx, &c); err != nil {
		return c, err
	}
	var msgs []Message
	if c.plan.recount {
		msgs, err = m.recountedTail(ctx, key, c.conv, c.plan.p, c.plan.counter)
	} else {
		msgs, err = m.tail(ctx, key, c.conv, since, c.plan.p, opts.Shared, &c.cached)
	}
	if err != nil {
		return c, fmt.Errorf("context of %s: %w", key, err)
	}
	// recent is this call's own copy (every read returns one): the window
	// may share it.
	c.a = assembly{p: c.plan.p, share: true}
	c.a.pinned, c.a.recent = splitPinned(msgs)
	c.last = c.conv.LastSeq
	if n := len(c.a.recent); n > 0 {
		c.last = max(c.last, c.a.recent[n-1].Seq) // appended since conv was read
	}
	if len(opts.Pending) > 0 {
		if c.a.recent, err = m.withPending(ctx, c.a.recent, opts.Pending, c.plan.counter, c.last); err != nil {
			return c, err
		}
	}
	if p.Cache == CacheStable {
		// The stored total, with what the tail read holds beyond it
		// (appended since conv was read, and pending), anchors a
		// cache-stable window (see CacheStable).
		c.a.total = c.conv.Tokens
		for i := len(c.a.recent) - 1; i >= 0 && c.a.recent[i].Seq > c.conv.LastSeq; i-- {
			c.a.total += int64(c.a.recent[i].Tokens)
		}
	}
	return c, nil
}

// reserve counts the reserved messages and takes their tokens off the
// plan's budget.
func (m *Memory) reserve(ctx context.Context, c *contextRead) error {
	for i, msg := range c.opts.Reserve {
		// Not stored: the caller's own limits apply, not the Memory's.
		if err := msg.Validate(NoLimits); err != nil {
			return fmt.Errorf("reserved message %d: %w", i, err)
		}
		n, err := m.blocks.count(ctx, c.plan.counter, msg)
		if err != nil {
			return err
		}
		c.reserved += n
	}
	p := &c.plan.p
	if p.Budget > 0 && c.reserved > 0 {
		if p.Budget -= c.reserved; p.Budget < 1 {
			return fmt.Errorf("%w: the reserved messages take %d tokens, the whole budget of %d", ErrBudgetTooSmall, c.reserved, p.Budget+c.reserved)
		}
	}
	return nil
}

// assemble is the assemble step: the facts block (p.Facts) and the
// summary's message join the parts read, and the window is fit from them
// (see assembly.window). For summary_buffer with recall, the window gets
// the recent part's budget: recall gets the rest.
func (m *Memory) assemble(ctx context.Context, c *contextRead) (w Window, gap bool, err error) {
	p := c.plan.p
	if p.Facts {
		if c.a.facts, err = m.factsMessage(ctx, c.key, c.conv.User, c.plan.counter); err != nil {
			return Window{}, false, err
		}
	}
	if c.summary != nil {
		if c.a.summary, err = summaryPartOf(ctx, *c.summary, c.plan.counter, c.plan.recount); err != nil {
			return Window{}, false, err
		}
	}
	if p.Kind == PolicySummaryBuffer && p.Recall || p.Kind == PolicyRecall && p.Cache == CacheStable {
		c.a.p.Budget = p.recentBudget()
	}
	return c.a.window()
}

// lastTurn assembles again over the whole last turn when the bounded
// tail held no user message that fits: either the newest one is too big,
// or unsendable units (a call still waiting for its results) took the
// tail's room. The result is a window, or ErrBudgetTooSmall saying how
// big.
func (m *Memory) lastTurn(ctx context.Context, c *contextRead, w Window) (Window, error) {
	if c.plan.p.Kind == PolicyAll || c.conv.Turns == 0 || w.Parts.Recent > 0 || len(c.opts.Pending) > 0 {
		return w, nil
	}
	last, err := m.store.Tail(ctx, c.key, TailQuery{Turns: 1})
	if err == nil && c.plan.recount {
		err = recountAll(ctx, c.plan.counter, last)
	}
	if err != nil {
		return Window{}, err
	}
	_, c.a.recent = splitPinned(last)
	c.a.summary = nil
	w, _, err = c.a.window()
	return w, err
}

// account is the last step: Window.Dropped counts the conversation's
// messages not sent, and Window.Reserved the reserved messages' tokens.
func (c *contextRead) account(w Window) Window {
	// Every message sent is a stored one of this conversation, unless some
	// are made up (facts, summary), pending or recalled.
	sent := len(w.Messages)
	if w.Facts != nil || w.Summary != nil || len(c.opts.Pending) > 0 || w.Parts.Recalled > 0 {
		sent = storedSent(w, c.last)
	}
	w.Dropped = int(c.last) - sent
	w.Reserved = c.reserved
	return w
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
	// total is the tokens of the conversation's messages (system messages
	// aside) up to the newest in recent: what a CacheStable window is
	// anchored to.
	total int64
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
	if err == nil {
		// A summary's window stays as it is: trimmed, it would leave a
		// gap between the summary and the window.
		w = stabilize(p, w, a.total)
	}
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
	bounded.Map[[sha256.Size]byte, int]
}

func (b *blockCounts) count(ctx context.Context, c Counter, msg Message) (int, error) {
	k := blockKey(c, msg)
	if n, ok := b.Get(k); ok {
		return n, nil
	}
	n, err := c.Count(ctx, msg)
	if err != nil {
		return 0, err
	}
	b.Put(k, n, 0)
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
