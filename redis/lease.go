package redis

import (
	"context"
	"fmt"
	"time"

	"github.com/chatmem/chatmem"
)

var _ chatmem.Leaser = (*Store)(nil)

// A lease is a hash (holder, wanted) at the conversation's key
// <base>lease:<kind>, in its hash slot, that expires with the lease
// (PEXPIRE: Redis's clock, which every replica shares). A released lease
// is deleted.
var (
	// leaseScript takes the lease for ARGV[1] for ARGV[2] ms if it is free
	// or ARGV[1]'s, and otherwise marks it wanted; it returns 1 if granted.
	leaseScript = newScript(`
local h = redis.call('HGET', KEYS[1], 'holder')
if h == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if not h then
  redis.call('HSET', KEYS[1], 'holder', ARGV[1], 'wanted', '0')
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
redis.call('HSET', KEYS[1], 'wanted', '1')
return 0`)

	// releaseScript deletes ARGV[1]'s lease and returns 1 if it was wanted.
	releaseScript = newScript(`
if redis.call('HGET', KEYS[1], 'holder') ~= ARGV[1] then return 0 end
local w = redis.call('HGET', KEYS[1], 'wanted')
redis.call('DEL', KEYS[1])
if w == '1' then return 1 end
return 0`)
)

// leaseKey returns the key of the conversation's lease named kind.
func (s *Store) leaseKey(key chatmem.Key, kind string) string {
	return s.prefix + ":{" + key.Tenant + "/" + key.ID + "}:lease:" + kind
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
	v, err := s.run(ctx, leaseScript, []string{s.leaseKey(key, kind)}, holder, ttl.Milliseconds())
	if err != nil {
		return false, fmt.Errorf("redis: lease %s of %s: %w", kind, key, err)
	}
	return v == int64(1), nil
}

// Release ends holder's lease named kind on the conversation at key; see
// chatmem.Leaser.
func (s *Store) Release(ctx context.Context, key chatmem.Key, kind, holder string) (bool, error) {
	if err := chatmem.ValidateLease(key, kind, holder); err != nil {
		return false, err
	}
	v, err := s.run(ctx, releaseScript, []string{s.leaseKey(key, kind)}, holder)
	if err != nil {
		return false, fmt.Errorf("redis: release lease %s of %s: %w", kind, key, err)
	}
	return v == int64(1), nil
}
