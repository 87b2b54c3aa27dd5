package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/storekit"
)

var _ chatmem.FactMarker = (*Store)(nil)

// factMarkExpr is a conversation's fact mark: fact_seq if it was set in
// this conversation (fact_of is its created_at), else 0.
const factMarkExpr = `CASE WHEN fact_of = created_at THEN fact_seq ELSE 0 END`

const (
	// selectFactMark reads a live conversation's fact mark.
	selectFactMark = `SELECT ` + factMarkExpr + `, last_seq, created_at FROM {s}.conversations
WHERE tenant = $1 AND id = $2 AND (expires_at IS NULL OR expires_at > $3)`

	// setFactMark moves the fact mark of a conversation whose row the
	// transaction has locked.
	setFactMark = `UPDATE {s}.conversations SET fact_seq = $3, fact_of = created_at WHERE tenant = $1 AND id = $2`

	// selectFactLaggards lists live conversations after ($1, $2) whose
	// mark lags, along the primary key.
	selectFactLaggards = `SELECT tenant, id FROM {s}.conversations
WHERE (tenant, id) > ($1, $2) AND (expires_at IS NULL OR expires_at > $3) AND ` + factMarkExpr + ` < last_seq
ORDER BY tenant, id LIMIT $4`
)

// factQuery names the store's schema in one of the statements above.
func (s *Store) factQuery(sql string) string {
	return strings.ReplaceAll(sql, "{s}", pgx.Identifier{s.schema}.Sanitize())
}

// FactMark returns the conversation's fact extraction watermark; see
// chatmem.FactMarker.
func (s *Store) FactMark(ctx context.Context, key chatmem.Key) (chatmem.FactMark, error) {
	op := "postgres: fact mark of " + key.String()
	if err := key.Validate(); err != nil {
		return chatmem.FactMark{}, fmt.Errorf("%s: %w", op, err)
	}
	var mk chatmem.FactMark
	err := s.pool.QueryRow(ctx, s.factQuery(selectFactMark), key.Tenant, key.ID, s.now()).Scan(&mk.Seq, &mk.LastSeq, &mk.Created)
	if err != nil {
		return chatmem.FactMark{}, wrap(ctx, op, err)
	}
	return mk, nil
}

// SetFactsThrough records facts as SetFactsOf does and moves the fact mark
// from prev to through in the same transaction, under the conversation's
// row lock; see chatmem.FactMarker. Nothing is written on error.
func (s *Store) SetFactsThrough(ctx context.Context, key chatmem.Key, created time.Time, facts []chatmem.Fact, prev, through int64) error {
	if err := storekit.CheckFactMark(prev, through); err != nil {
		return fmt.Errorf("postgres: set facts of %s: %w", key, err)
	}
	return s.setFacts(ctx, key, &created, facts, func(tx pgx.Tx, lastSeq int64) error {
		if err := storekit.CheckFactMarkWithin(through, lastSeq); err != nil {
			return err
		}
		var seq, last int64
		var at time.Time
		if err := tx.QueryRow(ctx, s.factQuery(selectFactMark), key.Tenant, key.ID, s.now()).Scan(&seq, &last, &at); err != nil {
			return err
		}
		if seq != prev {
			return fmt.Errorf("%w: the fact mark is %d, not %d", chatmem.ErrConflict, seq, prev)
		}
		_, err := tx.Exec(ctx, s.factQuery(setFactMark), key.Tenant, key.ID, through)
		return err
	})
}

// FactLaggards returns live conversations whose fact mark is below their
// last seq, after the key after, along the primary key; see
// chatmem.FactMarker. A page costs the conversations it passes over.
func (s *Store) FactLaggards(ctx context.Context, after chatmem.Key, limit int) ([]chatmem.Key, error) {
	const op = "postgres: fact laggards"
	if err := storekit.CheckPageLimit(limit); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	rows, err := s.pool.Query(ctx, s.factQuery(selectFactLaggards), after.Tenant, after.ID, s.now(), limit)
	if err != nil {
		return nil, wrap(ctx, op, err)
	}
	var out []chatmem.Key
	var k chatmem.Key
	if _, err := pgx.ForEachRow(rows, []any{&k.Tenant, &k.ID}, func() error {
		out = append(out, k)
		return nil
	}); err != nil {
		return nil, wrap(ctx, op, err)
	}
	return out, nil
}
