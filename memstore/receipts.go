package memstore

import (
	"context"
	"maps"
	"slices"

	"github.com/chatmem/chatmem"
)

var _ chatmem.ReceiptStore = (*Store)(nil)

// Receipts returns up to limit of the receipts stored with messages after
// seq after, oldest first; see chatmem.ReceiptStore.
func (s *Store) Receipts(ctx context.Context, key chatmem.Key, after int64, limit int) ([]chatmem.StoredReceipt, error) {
	c, err := s.get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	seqs := slices.Sorted(maps.Keys(c.receipts))
	var out []chatmem.StoredReceipt
	for _, seq := range seqs {
		if seq > after && (limit <= 0 || len(out) < limit) {
			out = append(out, chatmem.StoredReceipt{Seq: seq, Data: slices.Clone(c.receipts[seq])})
		}
	}
	return out, nil
}
