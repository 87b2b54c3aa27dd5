package memstore

import (
	"context"
	"fmt"

	"github.com/chatmem/chatmem"
)

var _ chatmem.Recounter = (*Store)(nil)
var _ chatmem.SinceReader = (*Store)(nil)

// Recount replaces the conversation's token counts and tokenizer under the
// write lock, rewriting the counts in place and the running totals (cum)
// after them; see chatmem.Recounter. It costs O(n) in the length of the
// conversation, and readers wait for it.
func (s *Store) Recount(ctx context.Context, key chatmem.Key, tokenizer string, lastSeq int64, tokens []int) error {
	if err := key.Validate(); err != nil {
		return err
	}
	if err := chatmem.ValidateRecount(tokenizer, lastSeq, tokens); err != nil {
		return fmt.Errorf("recount %s: %w", key, err)
	}
	c, err := s.getForWrite(ctx, key)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if c.meta.LastSeq != lastSeq {
		return fmt.Errorf("%w: conversation %s is at seq %d, not %d", chatmem.ErrConflict, key, c.meta.LastSeq, lastSeq)
	}
	// Nothing below can fail, so the conversation is rewritten in place.
	var total, system int64
	for i, n := range tokens {
		c.msgs.tokens[i] = int64(n)
		if c.msgs.role(i) == chatmem.RoleSystem {
			system += int64(n)
		} else {
			total += int64(n)
		}
		c.cum[i+1] = total
	}
	c.meta.Tokens, c.meta.SystemTokens, c.meta.Tokenizer = total, system, tokenizer
	return nil
}
