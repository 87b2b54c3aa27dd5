package sqlite

import (
	"context"

	"github.com/chatmem/chatmem"
)

var _ chatmem.ReceiptStore = (*Store)(nil)

// Receipts returns up to limit receipts stored with messages after seq
// after, oldest first, in the snapshot in which the conversation is live;
// see chatmem.ReceiptStore.
func (s *Store) Receipts(ctx context.Context, key chatmem.Key, after int64, limit int) ([]chatmem.StoredReceipt, error) {
	if err := key.Validate(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = -1
	}
	now := s.now()
	var out []chatmem.StoredReceipt
	err := s.read(ctx, func(t tx) error {
		if _, err := liveConversation(t, key, now); err != nil {
			return err
		}
		rows, err := t.query(selectReceipts, key.Tenant, key.ID, after, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var r chatmem.StoredReceipt
			if err := rows.Scan(&r.Seq, &r.Data); err != nil {
				return err
			}
			out = append(out, r)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
