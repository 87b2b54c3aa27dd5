package chatmem

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/chatmem/chatmem/internal/rank"
)

// MetaRecalled is the "chatmem" metadata value of the messages PolicyRecall
// brings back from older history (copies of stored messages, their content
// prefixed with a marker; see Memory.Context).
const MetaRecalled = "recalled"

// How recall ranks (see recallRanking): these were tuned on LoCoMo and are
// measured by `chatmem eval` (docs/evaluation.md).
const (
	// recallTerms caps the query terms taken from the newest user message.
	recallTerms = 32
	// recallPostings is the limit per term: a term's newest 256 messages.
	// It bounds a search's cost; a term found in more messages than that
	// is common in this conversation and weighs little anyway.
	recallPostings = 256
	// recallUserPostings is the limit per term of recall across a user's
	// conversations (Policy.Scope ScopeUser), where a term's newest
	// messages come from all of them: half of recallPostings. A long
	// history fills every term's list, so the read and the ranking cost
	// what the limit lets them, and 128 messages of a term are as many as
	// a short history of a few hundred gives its common ones. On LoCoMo
	// with each session a conversation of one user, evidence recall at
	// 2,048 tokens was 0.864 with 256 and 0.865 with 128 (0.855 with 64).
	recallUserPostings = 128
	// lengthNorm divides a candidate's score by (its tokens +
	// lengthPad)^lengthNorm: of two turns about as relevant, the shorter
	// leaves room for another. lengthPad is about what a full marker
	// costs, which a short message pays all the same.
	lengthNorm = 0.3
	lengthPad  = 6
	// recallPool is how many of the best-scored messages are read to be
	// packed (at least; budgets over 2,000 tokens read one per 20 tokens).
	recallPool = 100
	// speakerBoost multiplies the score of a message whose speaker (Name)
	// the query names.
	speakerBoost = 2.0
	// defaultRecentShare is the share of a recall budget the recent window
	// gets when Policy.Recent is 0.
	defaultRecentShare = 10 // one tenth
)

// appendMarker appends the prefix a recalled message's content gets: its
// sequence number and the time it was stored, so the model can tell when it
// was said. A message that follows a recalled message of the same minute
// gets only its sequence number: "[#413] ".
func appendMarker(b []byte, seq int64, t time.Time, withTime bool) []byte {
	b = append(b, "[#"...)
	b = strconv.AppendInt(b, seq, 10)
	if withTime {
		b = append(b, ' ')
		b = t.UTC().AppendFormat(b, "2006-01-02 15:04")
	}
	return append(b, "] "...)
}

// recaller finds and packs the older messages most relevant to a query.
type recaller struct {
	search  Searcher
	key     Key
	counter Counter
	// speakers holds the terms of the speaker names (Message.Name) seen
	// in the recent window.
	speakers map[string]bool
	// embedder and vectors, when set, add a vector search to the ranking.
	embedder Embedder
	vectors  VectorStore
	log      func(msg string, args ...any)
	// mark, when set, writes the markers instead of appendMarker (recall
	// across a user's conversations names the conversation too).
	mark func(b []byte, seq int64, t time.Time, withTime bool) []byte
}

// Embedding retrieval: how far back a vector search looks and how many
// hits it brings.
const (
	vectorSpan = 4096
	vectorHits = 100
)

// fuse merges the lexical ranking with a vector search for query by
// reciprocal rank fusion (each list adds 1/(rrfK+rank)). A failed embedding
// or search is logged and leaves the lexical ranking as it was: a turn
// never fails because the embedding model did.
func (r recaller) fuse(ctx context.Context, query string, before int64, lexical []rank.Scored) []rank.Scored {
	if r.embedder == nil || r.vectors == nil || before <= 1 || query == "" {
		return lexical
	}
	vecs, err := r.embedder.Embed(ctx, []string{query})
	var hits []VectorHit
	if err == nil && len(vecs) == 1 {
		hits, err = r.vectors.NearestVectors(ctx, r.key, r.embedder.Name(), vecs[0], before, vectorSpan, vectorHits)
	}
	if err != nil {
		r.log("recall: vector search failed; lexical ranking only", "key", r.key.String(), "err", err)
		return lexical
	}
	seqs := make([]int64, len(hits))
	for i, h := range hits {
		seqs[i] = h.Seq
	}
	return rank.Fuse(lexical, seqs)
}

// ranking scores the messages before `before` for query. Each message
// scores as the passage of five around it: every query term found in that
// passage adds its inverse document frequency once, weighted by how far
// from the message its nearest occurrence is (1 in the message itself,
// near1 next to it, near2 two away). That is BM25 with binary term
// frequency and no length normalization (the variant that ranked best on
// LoCoMo) over overlapping passages rather than single messages: a turn
// scores for the words of the question it answers, and a term repeated
// through an exchange counts once, so an exchange that has more of the
// query's terms ranks above one that repeats a single term. It returns the
// candidates, best first.
func (r recaller) ranking(ctx context.Context, query string, before int64) ([]rank.Scored, error) {
	terms := r.terms(query)
	if len(terms) == 0 || before <= 1 {
		return nil, nil
	}
	postings, err := r.search.Postings(ctx, r.key, terms, before, recallPostings)
	if err != nil {
		return nil, err
	}
	out := rank.Passages(postings, before-1, before)
	slices.SortFunc(out, rank.Better)
	return out, nil
}

// terms returns the terms of query that recall searches for.
func (r recaller) terms(query string) []string {
	terms := Terms(query)
	if len(r.speakers) > 0 {
		// A speaker's name matches every greeting addressed to them: it
		// boosts their messages (see recall) instead of being searched.
		terms = slices.DeleteFunc(terms, func(t string) bool { return r.speakers[t] })
	}
	if len(terms) > recallTerms {
		terms = terms[:recallTerms]
	}
	return terms
}

// recall returns copies of the older messages (Seq < before, none in
// exclude) most relevant to query that fit budget tokens, marked and in
// conversation order, and their tokens. Tool calls come with all their
// results (or not at all), and the first message returned is a user
// message, so the window that puts them first still starts with one.
func (r recaller) recall(ctx context.Context, query string, before int64, budget int) ([]Message, int, error) {
	if budget <= 0 {
		return nil, 0, nil
	}
	ranked, err := r.ranking(ctx, query, before)
	if err != nil {
		return nil, 0, err
	}
	if ranked = r.fuse(ctx, query, before, ranked); len(ranked) == 0 {
		return nil, 0, nil
	}
	pool := max(recallPool, budget/20)
	if len(ranked) > pool {
		ranked = ranked[:pool]
	}
	// Read the pool with the message before each: a recalled run that
	// starts with an answer needs its question. (Tool units are completed
	// below.)
	want := make([]int64, 0, len(ranked)*2)
	for _, c := range ranked {
		want = append(want, c.Seq-1, c.Seq)
	}
	msgs, err := r.search.MessagesAt(ctx, r.key, want)
	if err != nil {
		return nil, 0, err
	}
	bySeq := make(map[int64]Message, len(msgs))
	for _, m := range msgs {
		bySeq[m.Seq] = m
	}
	if err := r.completeToolUnits(ctx, bySeq, before); err != nil {
		return nil, 0, err
	}
	return r.pack(ctx, query, ranked, bySeq, before, budget)
}

// pack fills budget with the best of ranked (candidates read into bySeq,
// with the rest of their tool units), boosting the messages of speakers
// the query names, and returns them marked, in order, and their tokens.
func (r recaller) pack(ctx context.Context, query string, ranked []rank.Scored, bySeq map[int64]Message, before int64, budget int) ([]Message, int, error) {
	named := speakers(query)
	for i, c := range ranked {
		m, ok := bySeq[c.Seq]
		if !ok {
			continue
		}
		if m.Name != "" && named(m.Name) {
			ranked[i].Score *= speakerBoost
		}
		ranked[i].Score /= math.Pow(float64(max(m.Tokens, 0)+lengthPad), lengthNorm)
	}
	slices.SortStableFunc(ranked, func(a, b rank.Scored) int { return cmp.Compare(b.Score, a.Score) })

	p := packer{r: r, bySeq: bySeq, before: before, left: budget, chosen: make(map[int64]int), markers: make(map[string]int)}
	p.rank = make([]int64, len(ranked))
	for i, c := range ranked {
		p.rank[i] = c.Seq
	}
	// Packing charges a full marker to a message whose predecessor is not
	// chosen yet; once the result settles the markers, what they saved is
	// packed again, a few times at most.
	used := 0
	var err error
	for range 3 {
		for _, c := range ranked {
			if p.left <= 0 {
				break
			}
			if err := p.add(ctx, c.Seq); err != nil {
				return nil, 0, err
			}
		}
		if err := p.startWithUser(ctx); err != nil {
			return nil, 0, err
		}
		before := used
		if used, err = p.settle(ctx, budget); err != nil {
			return nil, 0, err
		}
		if used == before {
			break
		}
	}
	return p.result(), used, nil
}

// speakers returns a function reporting whether query names the speaker
// name: whether every term of the name is a term of the query ("What did
// Caroline's sister say?" names Caroline).
func speakers(query string) func(name string) bool {
	terms := make(map[string]bool)
	for _, t := range Terms(query) {
		terms[t] = true
	}
	memo := make(map[string]bool)
	return func(name string) bool {
		named, ok := memo[name]
		if !ok {
			nt := Terms(name)
			named = len(nt) > 0
			for _, t := range nt {
				named = named && terms[t]
			}
			memo[name] = named
		}
		return named
	}
}

// completeToolUnits reads, for every tool call or result in bySeq, the rest
// of its unit, so that units are sent whole or not at all.
func (r recaller) completeToolUnits(ctx context.Context, bySeq map[int64]Message, before int64) error {
	want := unitGaps(bySeq, before)
	if len(want) == 0 {
		return nil
	}
	more, err := r.search.MessagesAt(ctx, r.key, want)
	for _, m := range more {
		bySeq[m.Seq] = m
	}
	return err
}

// unitGaps returns the sequence numbers (below before) that may hold the
// rest of the tool units of the messages in bySeq and are not in it.
func unitGaps(bySeq map[int64]Message, before int64) []int64 {
	var want []int64
	for seq, m := range bySeq {
		if m.Role == RoleTool || len(m.ToolCalls) > 0 {
			// A call's results follow it, at most one per call; a
			// result's call is at most maxToolCalls messages back.
			lo, hi := seq-maxUnitReach, seq+maxUnitReach
			for s := max(lo, 1); s <= hi && s < before; s++ {
				if _, ok := bySeq[s]; !ok {
					want = append(want, s)
				}
			}
		}
	}
	return want
}

// maxUnitReach is how far from a tool message recall looks for the rest of
// its unit. A unit with more parallel calls than that is not recalled.
const maxUnitReach = 16

// packer fills a recall budget with units, best first.
type packer struct {
	r      recaller
	bySeq  map[int64]Message
	before int64
	left   int
	chosen map[int64]int // seq -> tokens charged (message and marker)
	// markers memoizes the tokens of each marker: packing prices the same
	// ones again and again.
	markers map[string]int
	buf     []byte // the marker being priced
	// rank holds the candidates' sequence numbers, best first: when room
	// is needed, the worst chosen go first (evict).
	rank []int64
}

// unitOf returns the sequence numbers of the unit holding seq (a message,
// or a tool call with all its results), and whether it can be sent.
func (p *packer) unitOf(seq int64) (lo, hi int64, ok bool) {
	m, found := p.bySeq[seq]
	if !found || m.Role == RoleSystem {
		return 0, 0, false
	}
	lo, hi = seq, seq
	if m.Role == RoleTool {
		for lo > 0 {
			prev, found := p.bySeq[lo-1]
			if !found {
				return 0, 0, false
			}
			lo--
			if prev.Role != RoleTool {
				break
			}
		}
	}
	call := p.bySeq[lo]
	if len(call.ToolCalls) == 0 {
		return lo, hi, m.Role != RoleTool
	}
	for hi = lo; hi-lo < int64(len(call.ToolCalls)); hi++ {
		next, found := p.bySeq[hi+1]
		if !found || next.Role != RoleTool || hi+1 >= p.before {
			return 0, 0, false
		}
	}
	results := make([]Message, 0, hi-lo)
	for s := lo + 1; s <= hi; s++ {
		results = append(results, p.bySeq[s])
	}
	return lo, hi, answersAll(call, results)
}

// add packs the unit holding seq if it fits.
func (p *packer) add(ctx context.Context, seq int64) error {
	if _, done := p.chosen[seq]; done {
		return nil
	}
	lo, hi, ok := p.unitOf(seq)
	if !ok {
		return nil
	}
	cost := make([]int, 0, hi-lo+1)
	total := 0
	for s := lo; s <= hi; s++ {
		prev := int64(0)
		if _, ok := p.chosen[s-1]; ok || s > lo {
			prev = s - 1
		}
		c, err := p.cost(ctx, s, prev)
		if err != nil {
			return err
		}
		cost = append(cost, c)
		total += c
	}
	if total > p.left {
		return nil
	}
	for s := lo; s <= hi; s++ {
		p.chosen[s] = cost[s-lo]
	}
	p.left -= total
	return nil
}

// marker returns the marker of message seq: "[#seq time] ", or "[#seq] "
// when prev, the message recalled just before it (0 for none), is of the
// same minute and conversation, adjacent or not: the markers are read in
// order, so a time left out is the one before it.
func (p *packer) marker(seq, prev int64) []byte {
	m := p.bySeq[seq]
	pm, ok := p.bySeq[prev]
	mark := appendMarker
	if p.r.mark != nil {
		mark = p.r.mark
	}
	// The numbers of two conversations (recall across a user's) differ
	// above userSeqBits: a marker names its conversation when the one
	// before it is of another.
	short := prev != 0 && ok && prev>>userSeqBits == seq>>userSeqBits && sameMinute(pm.CreatedAt, m.CreatedAt)
	p.buf = mark(p.buf[:0], seq, m.CreatedAt, !short)
	return p.buf
}

// prevOf returns the message recalled before seqs[i] (seqs: the chosen,
// in order), or 0 for none.
func (p *packer) prevOf(seqs []int64, i int) int64 {
	if i == 0 {
		return 0
	}
	return seqs[i-1]
}

func sameMinute(a, b time.Time) bool {
	return a.UTC().Truncate(time.Minute).Equal(b.UTC().Truncate(time.Minute))
}

// cost is what message seq costs recalled: its tokens and its marker's.
func (p *packer) cost(ctx context.Context, seq, prev int64) (int, error) {
	marker := p.marker(seq, prev)
	n, ok := p.markers[string(marker)] // no allocation for the lookup
	if !ok {
		n = len(marker) // one token per byte at most
		if tc, ok := p.r.counter.(TextCounter); ok {
			var err error
			if n, err = tc.CountText(string(marker)); err != nil {
				return 0, err
			}
		}
		p.markers[string(marker)] = n
	}
	return p.bySeq[seq].Tokens + n, nil
}

// startWithUser makes the earliest recalled message a user message: it adds
// the user message just before the earliest run if it fits, once the
// worst-ranked messages after that run made room for it if need be (evict),
// and drops the earliest run otherwise, until the first is a user message.
func (p *packer) startWithUser(ctx context.Context) error {
	for len(p.chosen) > 0 {
		first := slices.Min(slices.Collect(maps.Keys(p.chosen)))
		if p.bySeq[first].Role == RoleUser {
			return nil
		}
		if prev, ok := p.bySeq[first-1]; ok && prev.Role == RoleUser {
			c, err := p.cost(ctx, first-1, 0)
			if err != nil {
				return err
			}
			if c <= p.left || p.evict(c, first) {
				p.chosen[first-1] = c
				p.left -= c
				return nil
			}
		}
		p.dropFirstRun()
	}
	return nil
}

// evict unchooses the worst-ranked chosen units that hold no message at or
// before keep, until need tokens are left, and reports whether they are.
// When they cannot be, it changes nothing (the caller drops the earliest
// run instead, and what evict would have dropped stays chosen).
func (p *packer) evict(need int, keep int64) bool {
	var drop []int64
	left, gone := p.left, map[int64]bool{}
	for i := len(p.rank) - 1; i >= 0 && left < need; i-- {
		if _, ok := p.chosen[p.rank[i]]; !ok || gone[p.rank[i]] {
			continue
		}
		lo, hi, _ := p.unitOf(p.rank[i])
		if lo <= keep {
			continue
		}
		for s := lo; s <= hi; s++ {
			if c, ok := p.chosen[s]; ok && !gone[s] {
				left += c
				gone[s] = true
				drop = append(drop, s)
			}
		}
	}
	if left < need {
		return false
	}
	for _, s := range drop {
		delete(p.chosen, s)
	}
	p.left = left
	return true
}

// dropFirstRun unchooses the earliest recalled message and those after it
// up to the next user message, giving their tokens back.
func (p *packer) dropFirstRun() {
	first := slices.Min(slices.Collect(maps.Keys(p.chosen)))
	for s := first; ; s++ {
		c, ok := p.chosen[s]
		if !ok || (s > first && p.bySeq[s].Role == RoleUser) {
			return
		}
		delete(p.chosen, s)
		p.left += c
	}
}

// settle prices the chosen messages with their final markers, now that
// their neighbours are known, and records those prices in p.chosen. A
// message whose short marker became a full one (its predecessor dropped)
// may push the total over budget, in which case the worst-ranked messages
// after the earliest are dropped (evict), or the earliest runs when only
// they are left. It returns the tokens of what is chosen, at most budget.
func (p *packer) settle(ctx context.Context, budget int) (int, error) {
	for {
		seqs := slices.Sorted(maps.Keys(p.chosen))
		costs := make([]int, len(seqs))
		used := 0
		for i, s := range seqs {
			c, err := p.cost(ctx, s, p.prevOf(seqs, i))
			if err != nil {
				return 0, err
			}
			costs[i] = c
			used += c
		}
		for i, s := range seqs {
			p.chosen[s] = costs[i]
		}
		p.left = budget - used
		if used <= budget {
			return used, nil
		}
		if p.evict(0, seqs[0]) {
			continue
		}
		p.dropFirstRun()
		for len(p.chosen) > 0 && p.bySeq[slices.Min(slices.Collect(maps.Keys(p.chosen)))].Role != RoleUser {
			p.dropFirstRun()
		}
	}
}

// result returns copies of the chosen messages, marked, in conversation
// order, with the tokens settle priced them at.
func (p *packer) result() []Message {
	seqs := slices.Sorted(maps.Keys(p.chosen))
	out := make([]Message, len(seqs))
	for i, s := range seqs {
		m := p.bySeq[s].Clone()
		m.Content = string(p.marker(s, p.prevOf(seqs, i))) + m.Content
		m.Tokens = p.chosen[s]
		if m.Metadata == nil {
			m.Metadata = make(map[string]string, 1)
		}
		m.Metadata[MetaKey] = MetaRecalled
		out[i] = m
	}
	return out
}

// recallInto adds recalled messages to w, a window assembled under p with
// the recent part's budget (summary_buffer) or the whole budget (recall).
// For PolicyRecall it first cuts the window's newest messages down to
// p.Recent tokens (never below the newest user message), recalls into the
// rest of the budget, then gives what recall left unused back to the
// messages it cut, newest first, reading more of them if the window was
// read short (extend: the stored counts are the window's, not recounted).
// With p.Scope ScopeUser, user (the conversation's user, if any) and a
// store that is a UserSearcher, it recalls from all of the user's
// conversations (recallUser).
func (m *Memory) recallInto(ctx context.Context, key Key, p Policy, w Window, c Counter, extend bool, user string) (Window, error) {
	search := m.caps.search
	if search == nil {
		return Window{}, fmt.Errorf("%w: this store keeps no search index, so it cannot recall", ErrInvalid)
	}
	head := 0 // pinned and made-up system messages come first
	for head < len(w.Messages) && w.Messages[head].Role == RoleSystem {
		head++
	}
	recent := w.Messages[head:]
	us := m.caps.userSearch
	acrossUser := us != nil && p.Scope == ScopeUser && user != ""
	if len(recent) == 0 || recent[0].Seq <= 1 && !acrossUser {
		return w, nil // the window reaches back to the start: nothing to recall
	}
	query := newestUserText(recent)
	cut := 0
	if p.Kind == PolicyRecall && p.Cache != CacheStable {
		// A cache-stable window was assembled within the recent part's
		// budget already, from a start that must not move.
		cut = recentCut(recent, p.recentBudget())
	}
	kept := sumTokens(recent[cut:])
	fixed := w.Tokens - w.Parts.Recent // pinned, facts, summary, overhead
	left := p.Budget - fixed - kept
	if p.Cache == CacheStable {
		// Recall's share is fixed: what the stable part leaves unused
		// while it is short of its budget (after a step) stays unsent,
		// so that the part of the request that changes stays small.
		left = min(left, p.Budget-p.recentBudget())
	}
	r := recaller{search: search, key: key, counter: c, speakers: make(map[string]bool), log: m.log.Warn}
	if m.embedder != nil && m.allowModels(ctx, key.Tenant) == nil {
		r.embedder, r.vectors = m.embedder, m.caps.vectors
		ctx = m.usageCtx(ctx, key, user, CallEmbed)
	}
	for _, m := range recent {
		if m.Name != "" {
			for _, t := range Terms(m.Name) {
				r.speakers[t] = true
			}
		}
	}
	var recalled []Message
	var used int
	var err error
	if acrossUser {
		recalled, used, err = r.recallUser(ctx, us, Key{Tenant: key.Tenant, ID: user}, key.ID, query, recent[cut].Seq, left)
	} else {
		recalled, used, err = r.recall(ctx, query, recent[cut].Seq, left)
	}
	if err != nil {
		return Window{}, fmt.Errorf("recall for %s: %w", key, err)
	}
	floor := int64(0)
	if len(recalled) > 0 {
		floor = recalled[len(recalled)-1].Seq
	}
	ext := cut
	if p.Cache != CacheStable { // giving back would move a stable window's start
		if recent, ext, err = m.giveBack(ctx, key, p, recent, cut, floor, left-used, extend); err != nil {
			return Window{}, err
		}
	}
	out := make([]Message, 0, head+len(recalled)+len(recent)-ext)
	out = append(out, w.Messages[:head]...)
	out = append(out, recalled...)
	out = append(out, recent[ext:]...)
	w.Messages = out
	w.Parts.Recent = sumTokens(recent[ext:])
	w.Parts.Recalled = used
	w.Tokens = fixed + w.Parts.Recent + used
	return w, nil
}

// newestUserText is the content of the newest user message of msgs:
// recall's query.
func newestUserText(msgs []Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == RoleUser {
			return msgs[i].Content
		}
	}
	return ""
}

// giveBack gives what recall left (spare tokens) back to the messages of
// recent (the window's) before cut, newest unit first, down to the
// first recalled message (floor), and returns where the window's recent
// part then starts (ext, at a user message). For PolicyRecall, when only
// the recent part was read (cut 0, extend: the stored counts are the
// window's), it first reads the messages before recent that spare can
// hold, and recent comes back with them.
func (m *Memory) giveBack(ctx context.Context, key Key, p Policy, recent []Message, cut int, floor int64, spare int, extend bool) (_ []Message, ext int, _ error) {
	if p.Kind == PolicyRecall && cut == 0 && spare > 0 && extend && recent[0].Seq > floor+1 {
		// Only the recent part was read (Memory.tail): recall left room, so
		// read the messages before it that the room can hold.
		longer, err := m.store.Tail(ctx, key, TailQuery{Tokens: sumTokens(recent) + spare})
		if err != nil {
			return nil, 0, fmt.Errorf("context of %s: %w", key, err)
		}
		var before []Message
		for _, msg := range longer {
			if msg.Role != RoleSystem && msg.Seq < recent[0].Seq {
				before = append(before, msg)
			}
		}
		if len(before) > 0 && before[len(before)-1].Seq == recent[0].Seq-1 {
			recent = append(before, recent...)
			cut = len(before)
		}
	}
	ext = cut
	for ext > 0 {
		u := prevUnit(recent, ext)
		if recent[u.start].Seq <= floor || u.tokens > spare {
			break
		}
		spare -= u.tokens
		ext = u.start
	}
	for ext < cut && recent[ext].Role != RoleUser { // the recent part starts with a user message
		ext = nextUnit(recent, ext)
	}
	return recent, ext, nil
}

// recentCut returns where the newest part of recent (a window's messages,
// all sendable) that fits keep tokens starts: the oldest user message of
// it, and never after the newest user message.
func recentCut(recent []Message, keep int) int {
	cut, used, user := len(recent), 0, false
	for pos := len(recent); pos > 0; {
		u := prevUnit(recent, pos)
		if user && used+u.tokens > keep {
			break
		}
		used += u.tokens
		pos = u.start
		if u.user {
			cut, user = pos, true
		}
	}
	if !user {
		return 0
	}
	return cut
}

// nextUnit returns where the unit of msgs starting at i ends: past a tool
// call's results.
func nextUnit(msgs []Message, i int) int {
	j := i + 1
	if len(msgs[i].ToolCalls) > 0 {
		for j < len(msgs) && msgs[j].Role == RoleTool {
			j++
		}
	}
	return j
}

func sumTokens(msgs []Message) int {
	n := 0
	for _, m := range msgs {
		n += m.Tokens
	}
	return n
}
