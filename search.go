package chatmem

import (
	"context"
	"fmt"

	"github.com/chatmem/chatmem/internal/rank"
)

// MaxSearchLimit is the most hits one Search returns.
const MaxSearchLimit = 100

// DefaultSearchLimit is the number of hits a search returns when its
// caller gives no limit: REST's search routes and MCP's search_memory.
const DefaultSearchLimit = 10

// Hit is one stored message a search found.
type Hit struct {
	Message Message
	// Score ranks the hit: the summed inverse document frequency of the
	// query terms the message holds (higher is better).
	Score float64
	// Conversation is the conversation the message is in (SearchUser).
	Conversation string
}

// Search returns up to limit of the conversation's messages that hold terms
// of query (see Terms), best first (newer first among equal scores), found
// in the store's search index as PolicyRecall finds them, but without
// spreading scores to neighbours: every hit holds a query term. It calls no
// model; its cost follows the query's terms and the index's postings, not
// the length of the conversation. System messages are not indexed, so they
// are never hits. A query without terms has no hits.
//
// It wraps ErrInvalid for a bad key, a limit outside 1..MaxSearchLimit, or a
// store that keeps no search index, and returns ErrNotFound for a missing
// conversation. It is safe for concurrent use.
func (m *Memory) Search(ctx context.Context, key Key, query string, limit int) ([]Hit, error) {
	if err := key.Validate(); err != nil {
		return nil, err
	}
	if limit < 1 || limit > MaxSearchLimit {
		return nil, fmt.Errorf("%w: search limit %d is outside 1..%d", ErrInvalid, limit, MaxSearchLimit)
	}
	s := m.caps.search
	if s == nil {
		return nil, fmt.Errorf("%w: this store keeps no search index", ErrInvalid)
	}
	conv, err := m.store.Conversation(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("search %s: %w", key, err)
	}
	terms := Terms(query)
	if len(terms) > recallTerms {
		terms = terms[:recallTerms]
	}
	if len(terms) == 0 || conv.LastSeq == 0 {
		return nil, nil
	}
	postings, err := s.Postings(ctx, key, terms, conv.LastSeq+1, recallPostings)
	if err != nil {
		return nil, fmt.Errorf("search %s: %w", key, err)
	}
	ranked := make([]rank.Scored, 0, limit)
	for seq, sc := range rank.Terms(postings, conv.LastSeq) {
		ranked = append(ranked, rank.Scored{Seq: seq, Score: sc})
	}
	ranked = rank.Best(ranked, limit)
	seqs := make([]int64, len(ranked))
	for i, c := range ranked {
		seqs[i] = c.Seq
	}
	msgs, err := s.MessagesAt(ctx, key, seqs)
	if err != nil {
		return nil, fmt.Errorf("search %s: %w", key, err)
	}
	bySeq := make(map[int64]Message, len(msgs))
	for _, msg := range msgs {
		bySeq[msg.Seq] = msg
	}
	hits := make([]Hit, 0, len(ranked))
	for _, c := range ranked {
		if msg, ok := bySeq[c.Seq]; ok {
			hits = append(hits, Hit{Message: msg, Score: c.Score})
		}
	}
	return hits, nil
}
