package memstore

import (
	"context"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/storekit"
)

var _ chatmem.UsageStore = (*Store)(nil)

// usageKey identifies one hour bucket of the cost ledger.
type usageKey struct {
	hour                                    time.Time
	tenant, user, conversation, model, kind string
}

// usageBuckets are the ledger's hour buckets, under their own mutex: they
// outlive conversations and tenants.
type usageBuckets struct {
	m map[usageKey]chatmem.UsageRecord
}

func keyOf(r chatmem.UsageRecord) usageKey {
	return usageKey{r.Hour.UTC(), r.Tenant, r.User, r.Conversation, r.Model, r.Kind}
}

// AddUsage adds each record to its hour bucket; see chatmem.UsageStore.
func (s *Store) AddUsage(ctx context.Context, recs []chatmem.UsageRecord) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, r := range recs {
		if err := r.Validate(); err != nil {
			return err
		}
	}
	s.usageMu.Lock()
	defer s.usageMu.Unlock()
	if s.usage.m == nil {
		s.usage.m = make(map[usageKey]chatmem.UsageRecord)
	}
	for _, r := range recs {
		s.usage.add(r)
	}
	return nil
}

func (b *usageBuckets) add(r chatmem.UsageRecord) {
	r.Hour = r.Hour.UTC()
	k := keyOf(r)
	p := b.m[k]
	r.Calls += p.Calls
	r.Tokens = r.Tokens.Add(p.Tokens)
	b.m[k] = r
}

// Usage sums the buckets q selects; see chatmem.UsageStore.
func (s *Store) Usage(ctx context.Context, q chatmem.UsageQuery) ([]chatmem.Usage, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := q.Validate(); err != nil {
		return nil, err
	}
	s.usageMu.Lock()
	recs := make([]chatmem.UsageRecord, 0, len(s.usage.m))
	for _, r := range s.usage.m {
		if q.Tenant == "" || r.Tenant == q.Tenant {
			recs = append(recs, r)
		}
	}
	s.usageMu.Unlock()
	return chatmem.GroupUsage(recs, q), nil
}

// AnonymizeUsage moves the user's buckets to the ones with no user and no
// conversation; see chatmem.UsageStore.
func (s *Store) AnonymizeUsage(ctx context.Context, user chatmem.Key) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := storekit.CheckUser(user); err != nil {
		return err
	}
	s.usageMu.Lock()
	defer s.usageMu.Unlock()
	var theirs []chatmem.UsageRecord
	for k, r := range s.usage.m {
		if k.tenant == user.Tenant && k.user == user.ID {
			theirs = append(theirs, r)
			delete(s.usage.m, k)
		}
	}
	for _, r := range theirs {
		r.User, r.Conversation = "", ""
		s.usage.add(r)
	}
	return nil
}
