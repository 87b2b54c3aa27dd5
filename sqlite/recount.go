package sqlite

import (
	"context"
	"fmt"

	"github.com/chatmem/chatmem"
)

var _ chatmem.Recounter = (*Store)(nil)
var _ chatmem.SinceReader = (*Store)(nil)

// Recount statements. They run once per maintenance call, not per turn, so
// they are not among the statements Open prepares on the pool; Recount
// prepares updateMessageCounts inside its transaction and runs it once per
// message.
const (
	// selectSystemSeqs reads the seqs of the system messages from the
	// partial index messages_system, without their rows.
	selectSystemSeqs = `SELECT seq FROM messages
		WHERE tenant = ?1 AND conv_id = ?2 AND role = 'system' ORDER BY seq`

	// updateMessageCounts sets one message's count and the non-system
	// tokens before it: one seek in messages_seq. (Run once per message it
	// takes half the time of UPDATE ... FROM a VALUES list of 1000 rows,
	// whose parsing and materializing cost more than the statement calls
	// they save: 0.9s against 1.9s for 100,000 messages.)
	updateMessageCounts = `UPDATE messages SET tokens = ?4, tokens_before = ?5
		WHERE tenant = ?1 AND conv_id = ?2 AND seq = ?3`

	// updateCounts stores a conversation's new totals and tokenizer;
	// updated_at and expires_at stay.
	updateCounts = `UPDATE conversations SET tokenizer = ?3, tokens = ?4, system_tokens = ?5
		WHERE tenant = ?1 AND id = ?2`
)

// Recount replaces the conversation's token counts, the tokens_before of
// every message and the conversation's totals and tokenizer, in one
// IMMEDIATE transaction (see chatmem.Recounter). It holds the write lock
// for the whole rewrite, about a second per 100,000 messages, during which
// readers go on reading the snapshot before it and every writer waits:
// this process's on the write connection, other processes' for up to their
// BusyTimeout (10s by default), after which they fail with
// chatmem.ErrUnavailable; so recount conversations of millions of messages
// when no other process writes. It returns chatmem.ErrNotFound, and
// chatmem.ErrConflict if the conversation is no longer at lastSeq; its
// arguments are checked with chatmem.ValidateRecount. Nothing is written
// on error.
func (s *Store) Recount(ctx context.Context, key chatmem.Key, tokenizer string, lastSeq int64, tokens []int) error {
	if err := key.Validate(); err != nil {
		return err
	}
	if err := chatmem.ValidateRecount(tokenizer, lastSeq, tokens); err != nil {
		return fmt.Errorf("recount %s: %w", key, err)
	}
	now := s.now()
	return s.write(ctx, func(t tx) error {
		conv, err := liveConversation(t, key, now)
		if err != nil {
			return err
		}
		if conv.LastSeq != lastSeq {
			return fmt.Errorf("%w: conversation %s is at seq %d, not %d", chatmem.ErrConflict, key, conv.LastSeq, lastSeq)
		}
		system, err := systemSeqs(t, key)
		if err != nil {
			return err
		}
		update, err := t.tx.PrepareContext(t.ctx, updateMessageCounts)
		if err != nil {
			return err
		}
		defer update.Close()
		var total, systemTotal int64 // total: the non-system tokens before the message
		for i, n := range tokens {
			seq := int64(i + 1)
			res, err := update.ExecContext(t.ctx, key.Tenant, key.ID, seq, n, total)
			if err != nil {
				return fmt.Errorf("recount message %d: %w", seq, err)
			}
			if got, err := res.RowsAffected(); err != nil {
				return err
			} else if got != 1 {
				return fmt.Errorf("recount message %d: no such row", seq)
			}
			if system[seq] {
				systemTotal += int64(n)
			} else {
				total += int64(n)
			}
		}
		_, err = t.tx.ExecContext(t.ctx, updateCounts, key.Tenant, key.ID, tokenizer, total, systemTotal)
		return err
	})
}

// systemSeqs returns the seqs of the conversation's system messages.
func systemSeqs(t tx, key chatmem.Key) (map[int64]bool, error) {
	rows, err := t.tx.QueryContext(t.ctx, selectSystemSeqs, key.Tenant, key.ID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[int64]bool)
	for rows.Next() {
		var seq int64
		if err := rows.Scan(&seq); err != nil {
			return nil, err
		}
		out[seq] = true
	}
	return out, rows.Err()
}
