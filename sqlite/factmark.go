package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/storekit"
)

var _ chatmem.FactMarker = (*Store)(nil)

const (
	// selectFactMark reads a live conversation's fact mark.
	selectFactMark = `SELECT fact_seq, last_seq, created_at FROM conversations
		WHERE tenant = ?1 AND id = ?2 AND ` + liveCond

	// setFactMark moves the fact mark.
	setFactMark = `UPDATE conversations SET fact_seq = ?3 WHERE tenant = ?1 AND id = ?2`

	// selectFactLaggards lists live conversations after (?1, ?2) whose
	// mark lags, along the primary key.
	selectFactLaggards = `SELECT tenant, id FROM conversations
		WHERE (tenant, id) > (?1, ?2) AND fact_seq < last_seq AND ` + liveCond + `
		ORDER BY tenant, id LIMIT ?4`
)

// FactMark returns the conversation's fact extraction watermark; see
// chatmem.FactMarker. It returns chatmem.ErrNotFound for a conversation
// that does not exist or has expired.
func (s *Store) FactMark(ctx context.Context, key chatmem.Key) (chatmem.FactMark, error) {
	if err := key.Validate(); err != nil {
		return chatmem.FactMark{}, err
	}
	var mk chatmem.FactMark
	var created int64
	err := s.r.row(ctx, selectFactMark, key.Tenant, key.ID, clampedNanos(s.now())).Scan(&mk.Seq, &mk.LastSeq, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return chatmem.FactMark{}, notFound(key)
	}
	if err != nil {
		return chatmem.FactMark{}, translate(ctx, err)
	}
	mk.Created = fromNanos(created)
	return mk, nil
}

// SetFactsThrough records facts as SetFactsOf does and moves the fact mark
// from prev to through in the same IMMEDIATE transaction; see
// chatmem.FactMarker. Nothing is written on error.
func (s *Store) SetFactsThrough(ctx context.Context, key chatmem.Key, created time.Time, facts []chatmem.Fact, prev, through int64) error {
	if err := storekit.CheckFactMark(prev, through); err != nil {
		return err
	}
	return s.setFacts(ctx, key, &created, facts, func(t tx, conv chatmem.Conversation) error {
		if err := storekit.CheckFactMarkWithin(through, conv.LastSeq); err != nil {
			return err
		}
		var seq, last, at int64
		if err := t.row(selectFactMark, key.Tenant, key.ID, clampedNanos(s.now())).Scan(&seq, &last, &at); err != nil {
			return err
		}
		if seq != prev {
			return fmt.Errorf("%w: the fact mark of %s is %d, not %d", chatmem.ErrConflict, key, seq, prev)
		}
		_, err := t.exec(setFactMark, key.Tenant, key.ID, through)
		return err
	})
}

// FactLaggards returns live conversations whose fact mark is below their
// last seq, after the key after, along the primary key; see
// chatmem.FactMarker. A page costs the conversations it passes over.
func (s *Store) FactLaggards(ctx context.Context, after chatmem.Key, limit int) ([]chatmem.Key, error) {
	if err := storekit.CheckPageLimit(limit); err != nil {
		return nil, err
	}
	rows, err := s.r.query(ctx, selectFactLaggards, after.Tenant, after.ID, clampedNanos(s.now()), limit)
	if err != nil {
		return nil, translate(ctx, err)
	}
	defer rows.Close()
	var out []chatmem.Key
	for rows.Next() {
		var k chatmem.Key
		if err := rows.Scan(&k.Tenant, &k.ID); err != nil {
			return nil, translate(ctx, err)
		}
		out = append(out, k)
	}
	return out, translate(ctx, rows.Err())
}
