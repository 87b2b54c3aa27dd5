package memstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/storekit"
)

var _ chatmem.FactMarker = (*Store)(nil)

// FactMark returns the conversation's fact extraction watermark; see
// chatmem.FactMarker.
func (s *Store) FactMark(ctx context.Context, key chatmem.Key) (chatmem.FactMark, error) {
	c, err := s.get(ctx, key)
	if err != nil {
		return chatmem.FactMark{}, err
	}
	defer s.mu.RUnlock()
	return chatmem.FactMark{Seq: c.factSeq, LastSeq: c.meta.LastSeq, Created: c.meta.CreatedAt}, nil
}

// SetFactsThrough records facts and moves the mark from prev to through
// under one lock; see chatmem.FactMarker. A conversation created again
// under the key is a new struct, so its mark starts at 0.
func (s *Store) SetFactsThrough(ctx context.Context, key chatmem.Key, created time.Time, facts []chatmem.Fact, prev, through int64) error {
	if err := key.Validate(); err != nil {
		return err
	}
	if err := storekit.CheckFacts(facts); err != nil {
		return err
	}
	if err := storekit.CheckFactMark(prev, through); err != nil {
		return err
	}
	now := time.Now()
	c, err := s.getOfForWrite(ctx, key, &created)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if err := storekit.CheckFactMarkWithin(through, c.meta.LastSeq); err != nil {
		return err
	}
	if c.factSeq != prev {
		return fmt.Errorf("%w: the fact mark of %s is %d, not %d", chatmem.ErrConflict, key, c.factSeq, prev)
	}
	c.facts = recordFacts(c.facts, facts, now, false)
	c.factSeq = through
	return nil
}

// FactLaggards returns live conversations whose mark is below their
// LastSeq, after the key after; see chatmem.FactMarker. It walks the
// tenants in order and each tenant's sorted IDs from after, so its cost
// follows the conversations it passes over.
func (s *Store) FactLaggards(ctx context.Context, after chatmem.Key, limit int) ([]chatmem.Key, error) {
	if err := storekit.CheckPageLimit(limit); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	now := time.Now()
	s.mu.RLock()
	defer s.mu.RUnlock()
	names := make([]string, 0, len(s.tenants))
	for name := range s.tenants {
		if name >= after.Tenant {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var out []chatmem.Key
	for _, name := range names {
		tn := s.tenants[name]
		i := 0
		if name == after.Tenant {
			i, _ = slices.BinarySearchFunc(tn.ids, after.ID, func(id, target string) int {
				if id == target {
					return -1 // strictly after
				}
				return cmp.Compare(id, target)
			})
		}
		for ; i < len(tn.ids); i++ {
			c := tn.convs[tn.ids[i]]
			if c == nil || c.expired(now) || c.factSeq >= c.meta.LastSeq {
				continue
			}
			out = append(out, chatmem.Key{Tenant: name, ID: tn.ids[i]})
			if len(out) == limit {
				return out, nil
			}
		}
	}
	return out, nil
}
