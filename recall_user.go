package chatmem

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/chatmem/chatmem/internal/rank"
)

// Metadata keys of a message recalled across a user's conversations
// (Policy.Scope ScopeUser): the conversation it comes from and its sequence
// number there. A message of another conversation has Seq 0 in the window,
// as the messages Context makes up do: it is not one of this
// conversation's messages.
const (
	MetaConversation = "chatmem_conversation"
	MetaSeq          = "chatmem_seq"
)

// userSeqBits splits the candidate numbers of recall across a user's
// conversations: a message is numbered conv<<userSeqBits | seq, conv being
// its conversation's place (from 1) among those the search found. The
// numbers of one conversation are contiguous and those of two never touch
// (local seq 0 is no message), so recaller's neighbour spread, tool units
// and packing work on them as on one conversation's sequence numbers.
const userSeqBits = 40

const userSeqMask = 1<<userSeqBits - 1

// recallUser is recall (see recaller.recall) over every conversation of
// user, current included: it returns copies of the older messages most
// relevant to query that fit budget tokens, leaving out current's messages
// from before on (its recent window), with their tokens. The messages are
// grouped by conversation, oldest conversation first and current last,
// each in its order; each is marked with its conversation and date
// ("[conv-id #12 2026-05-01 10:00] ") and carries MetaConversation and
// MetaSeq, and those of other conversations have Seq 0. Ranking is
// recall's (rank.Passages, with passages within a conversation, and pack's
// speaker boost and length normalization), over the user's postings: its
// cost follows the query's
// terms and recallUserPostings, not the user's history. The number of messages
// that BM25 weighs a term against is the larger of the distinct messages
// found and current's messages before the window, the user's total being
// unknown without a read of their history. The vector search of recall
// does not reach across conversations.
func (r recaller) recallUser(ctx context.Context, us UserSearcher, user Key, current string, query string, before int64, budget int) ([]Message, int, error) {
	terms := r.terms(query)
	if budget <= 0 || len(terms) == 0 {
		return nil, 0, nil
	}
	postings, err := us.UserPostings(ctx, user, terms, recallUserPostings)
	if err != nil {
		return nil, 0, err
	}
	convs, place, keys, n := numberUserHits(postings, current, before)
	key := func(conv string, seq int64) int64 { return place[conv]<<userSeqBits | seq }
	limit := key(current, before) // current is last: the others are all below
	ranked := rank.Passages(keys, max(n, before-1), limit)
	// A neighbour at local seq 0 is no message.
	ranked = slices.DeleteFunc(ranked, func(c rank.Scored) bool { return c.Seq&userSeqMask == 0 })
	if len(ranked) == 0 {
		return nil, 0, nil
	}
	// Only the pool is ranked: the order of the rest (thousands of
	// positions for a long history) is never used.
	ranked = rank.Best(ranked, max(recallPool, budget/20))

	hit := func(k int64) UserHit { return UserHit{Conversation: convs[k>>userSeqBits-1], Seq: k & userSeqMask} }
	bySeq := make(map[int64]Message, len(ranked)*2)
	read := func(want []int64) error {
		hits := make([]UserHit, 0, len(want))
		for _, k := range want {
			// A tool unit's reach may step out of its conversation's
			// numbers: below seq 1 is no message.
			if p, seq := k>>userSeqBits, k&userSeqMask; p >= 1 && p <= int64(len(convs)) && seq != 0 && seq <= userSeqMask-maxUnitReach {
				hits = append(hits, hit(k))
			}
		}
		if len(hits) == 0 {
			return nil
		}
		msgs, err := us.UserMessagesAt(ctx, user, hits)
		for _, m := range msgs {
			if _, ok := place[m.Conversation]; ok {
				bySeq[key(m.Conversation, m.Seq)] = m.Message
			}
		}
		return err
	}
	// Each candidate with the message before it, then the rest of the tool
	// units, as recall reads them.
	want := make([]int64, 0, len(ranked)*2)
	for _, c := range ranked {
		want = append(want, c.Seq-1, c.Seq)
	}
	if err := read(want); err != nil {
		return nil, 0, err
	}
	if err := read(unitGaps(bySeq, limit)); err != nil {
		return nil, 0, err
	}

	convs, bySeq, ranked = oldestFirst(convs, bySeq, ranked, current)
	limit = int64(len(convs))<<userSeqBits | before
	r.mark = userMarker(convs)
	return r.pack(ctx, query, ranked, bySeq, limit, budget)
}

// oldestFirst renumbers the conversations of recall across a user's
// conversations oldest first (by the earliest message read of each),
// current still last, so that what is recalled reads in the order it was
// said; conversations of which nothing was read drop out. The messages
// come back as copies carrying MetaConversation and MetaSeq, and those of
// other conversations than current with Seq 0.
func oldestFirst(convs []string, bySeq map[int64]Message, ranked []rank.Scored, current string) ([]string, map[int64]Message, []rank.Scored) {
	first := make(map[int64]time.Time)
	for k, m := range bySeq {
		if p := k >> userSeqBits; first[p].IsZero() || m.CreatedAt.Before(first[p]) {
			first[p] = m.CreatedAt
		}
	}
	order := make([]int64, 0, len(convs)) // new place-1 -> old place
	for p := int64(1); p < int64(len(convs)); p++ {
		if _, ok := first[p]; ok {
			order = append(order, p)
		}
	}
	slices.SortStableFunc(order, func(a, b int64) int { return first[a].Compare(first[b]) })
	order = append(order, int64(len(convs)))
	renum := make(map[int64]int64, len(order)) // old place -> new place
	newConvs := make([]string, len(order))
	for i, p := range order {
		renum[p] = int64(i + 1)
		newConvs[i] = convs[p-1]
	}
	move := func(k int64) int64 { return renum[k>>userSeqBits]<<userSeqBits | k&userSeqMask }
	moved := make(map[int64]Message, len(bySeq))
	for k, m := range bySeq {
		m = m.Clone()
		conv := convs[k>>userSeqBits-1]
		if m.Metadata == nil {
			m.Metadata = make(map[string]string, 3)
		}
		m.Metadata[MetaConversation] = conv
		m.Metadata[MetaSeq] = strconv.FormatInt(m.Seq, 10)
		if conv != current {
			m.Seq = 0
		}
		moved[move(k)] = m
	}
	kept := ranked[:0]
	for _, c := range ranked {
		if _, ok := renum[c.Seq>>userSeqBits]; ok {
			kept = append(kept, rank.Scored{Seq: move(c.Seq), Score: c.Score})
		}
	}
	return newConvs, moved, kept
}

// userMarker marks a message recalled across a user's conversations (see
// recaller.mark) with its conversation, one of convs by its number:
// "[conv-id #12 2026-05-01 10:00] ".
func userMarker(convs []string) func(b []byte, k int64, t time.Time, withTime bool) []byte {
	return func(b []byte, k int64, t time.Time, withTime bool) []byte {
		if !withTime {
			return appendMarker(b, k&userSeqMask, t, false)
		}
		b = append(b, '[')
		b = append(b, convs[k>>userSeqBits-1]...)
		b = append(b, " #"...)
		b = strconv.AppendInt(b, k&userSeqMask, 10)
		b = append(b, ' ')
		b = t.UTC().AppendFormat(b, "2006-01-02 15:04")
		return append(b, "] "...)
	}
}

// numberUserHits numbers the hits of postings (a UserPostings answer) for
// recall (see userSeqBits), leaving out current's messages from before on:
// convs[i] is the conversation numbered i+1 (ordered by ID, current last
// when it is not ""), place its inverse, keys the postings numbered, and n
// how many distinct messages they name.
func numberUserHits(postings [][]UserHit, current string, before int64) (convs []string, place map[string]int64, keys [][]int64, n int64) {
	place = make(map[string]int64)
	for _, list := range postings {
		for _, h := range list {
			if _, ok := place[h.Conversation]; !ok && h.Conversation != current {
				place[h.Conversation] = 0
				convs = append(convs, h.Conversation)
			}
		}
	}
	slices.Sort(convs) // map order is random; ties must not be
	if current != "" {
		convs = append(convs, current)
	}
	for i, c := range convs {
		place[c] = int64(i + 1)
	}
	keys = make([][]int64, len(postings))
	distinct := make(map[int64]bool)
	for i, list := range postings {
		for _, h := range list {
			if h.Seq < 1 || h.Seq > userSeqMask || h.Conversation == current && h.Seq >= before {
				continue
			}
			k := place[h.Conversation]<<userSeqBits | h.Seq
			keys[i] = append(keys[i], k)
			distinct[k] = true
		}
	}
	return convs, place, keys, int64(len(distinct))
}

// SearchUser is Search over every conversation of the user (a Key whose ID
// is the user's): up to limit messages of the user's conversations that
// hold terms of query, best first (newer first among equal scores), each
// Hit naming its Conversation. Its cost follows the query's terms and the
// index's postings, not the user's history; an unknown user has no hits.
//
// It wraps ErrInvalid for a bad user, a limit outside 1..MaxSearchLimit,
// or a store that keeps no index of users (UserSearcher). It is safe for
// concurrent use.
func (m *Memory) SearchUser(ctx context.Context, user Key, query string, limit int) ([]Hit, error) {
	if err := user.Validate(); err != nil {
		return nil, err
	}
	if limit < 1 || limit > MaxSearchLimit {
		return nil, fmt.Errorf("%w: search limit %d is outside 1..%d", ErrInvalid, limit, MaxSearchLimit)
	}
	us := m.caps.userSearch
	if us == nil {
		return nil, fmt.Errorf("%w: this store keeps no search index of users", ErrInvalid)
	}
	terms := Terms(query)
	if len(terms) > recallTerms {
		terms = terms[:recallTerms]
	}
	if len(terms) == 0 {
		return nil, nil
	}
	postings, err := us.UserPostings(ctx, user, terms, recallPostings)
	if err != nil {
		return nil, fmt.Errorf("search user %s: %w", user, err)
	}
	convs, _, keys, n := numberUserHits(postings, "", 0)
	// Newer first among equal scores: the order of the postings, which
	// are newest first.
	order := make(map[int64]int)
	for _, list := range keys {
		for i, k := range list {
			if o, ok := order[k]; !ok || i < o {
				order[k] = i
			}
		}
	}
	ranked := make([]rank.Scored, 0, len(order))
	for k, sc := range rank.Terms(keys, n) {
		ranked = append(ranked, rank.Scored{Seq: k, Score: sc})
	}
	slices.SortFunc(ranked, func(a, b rank.Scored) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		if c := cmp.Compare(order[a.Seq], order[b.Seq]); c != 0 {
			return c
		}
		return cmp.Compare(b.Seq, a.Seq)
	})
	ranked = ranked[:min(len(ranked), limit)]
	hits := make([]UserHit, len(ranked))
	for i, c := range ranked {
		hits[i] = UserHit{Conversation: convs[c.Seq>>userSeqBits-1], Seq: c.Seq & userSeqMask}
	}
	msgs, err := us.UserMessagesAt(ctx, user, hits)
	if err != nil {
		return nil, fmt.Errorf("search user %s: %w", user, err)
	}
	byHit := make(map[UserHit]Message, len(msgs))
	for _, msg := range msgs {
		byHit[UserHit{msg.Conversation, msg.Seq}] = msg.Message
	}
	out := make([]Hit, 0, len(ranked))
	for i, c := range ranked {
		if msg, ok := byHit[hits[i]]; ok {
			out = append(out, Hit{Message: msg, Score: c.Score, Conversation: hits[i].Conversation})
		}
	}
	return out, nil
}
