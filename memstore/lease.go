package memstore

import (
	"context"
	"sync"
	"time"

	"github.com/chatmem/chatmem"
)

var _ chatmem.Leaser = (*Store)(nil)

// leases are the store's leases (chatmem.Leaser), by conversation and kind.
// An expired lease stays in the map until it is taken again or released;
// there are at most as many as conversations worked on at once, times the
// kinds, plus those of holders that never released.
type leases struct {
	mu sync.Mutex
	m  map[leaseKey]*lease
}

type leaseKey struct {
	key  chatmem.Key
	kind string
}

type lease struct {
	holder  string
	expires time.Time
	wanted  bool
}

// Lease grants holder the lease named kind on the conversation at key; see
// chatmem.Leaser.
func (s *Store) Lease(ctx context.Context, key chatmem.Key, kind, holder string, ttl time.Duration) (bool, error) {
	if err := chatmem.ValidateLease(key, kind, holder); err != nil {
		return false, err
	}
	if err := chatmem.ValidateLeaseTTL(ttl); err != nil {
		return false, err
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	now := time.Now()
	ls := &s.leases
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.m == nil {
		ls.m = make(map[leaseKey]*lease)
	}
	k := leaseKey{key, kind}
	l := ls.m[k]
	switch {
	case l == nil || !now.Before(l.expires):
		ls.m[k] = &lease{holder: holder, expires: now.Add(ttl)}
	case l.holder == holder:
		l.expires = now.Add(ttl)
	default:
		l.wanted = true
		return false, nil
	}
	return true, nil
}

// Release ends holder's lease named kind on the conversation at key; see
// chatmem.Leaser.
func (s *Store) Release(ctx context.Context, key chatmem.Key, kind, holder string) (bool, error) {
	if err := chatmem.ValidateLease(key, kind, holder); err != nil {
		return false, err
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	ls := &s.leases
	ls.mu.Lock()
	defer ls.mu.Unlock()
	k := leaseKey{key, kind}
	l := ls.m[k]
	if l == nil || l.holder != holder {
		return false, nil
	}
	delete(ls.m, k)
	return l.wanted, nil
}

// drop deletes the leases on the conversation at key, when the
// conversation goes (Delete, expiry, purge, DeleteUser): nothing of it
// stays behind, not even a crashed holder's lease. A holder still at work
// then releases nothing, as after an expiry. Store.remove calls it under
// the store's write lock; the leases' mutex is taken after it, never
// before.
func (ls *leases) drop(key chatmem.Key) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for _, kind := range [...]string{chatmem.LeaseSummary, chatmem.LeaseFacts} {
		delete(ls.m, leaseKey{key, kind})
	}
}
