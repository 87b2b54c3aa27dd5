package postgres

import (
	"context"
	"fmt"

	"github.com/chatmem/chatmem"
)

var _ chatmem.ReceiptStore = (*Store)(nil)

// Receipts returns up to limit receipts stored with messages after seq
// after, oldest first, with one statement; see chatmem.ReceiptStore.
func (s *Store) Receipts(ctx context.Context, key chatmem.Key, after int64, limit int) ([]chatmem.StoredReceipt, error) {
	op := "postgres: receipts of " + key.String()
	if err := key.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	var lim *int // NULL: no limit
	if limit > 0 {
		lim = &limit
	}
	rows, err := s.pool.Query(ctx, s.q.receipts, key.Tenant, key.ID, s.now(), after, lim)
	if err != nil {
		return nil, wrap(ctx, op, err)
	}
	defer rows.Close()
	var out []chatmem.StoredReceipt
	for rows.Next() {
		var r chatmem.StoredReceipt
		if err := rows.Scan(&r.Seq, &r.Data); err != nil {
			return nil, wrap(ctx, op, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap(ctx, op, err)
	}
	if len(out) == 0 {
		if err := s.live(ctx, op, key); err != nil {
			return nil, err
		}
	}
	return out, nil
}
