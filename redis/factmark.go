package redis

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/storekit"
)

var _ chatmem.FactMarker = (*Store)(nil)

// The fact mark lives in the conversation's meta hash: fact_seq, and
// fact_of, the created_at (Unix nanoseconds) of the conversation it was
// set in. An expired conversation started afresh gets a new created_at,
// so a mark of another fact_of counts as 0.

// FactMark returns the conversation's fact extraction watermark, from one
// HGETALL of meta; see chatmem.FactMarker.
func (s *Store) FactMark(ctx context.Context, key chatmem.Key) (chatmem.FactMark, error) {
	if err := key.Validate(); err != nil {
		return chatmem.FactMark{}, err
	}
	fields, err := s.client.HGetAll(ctx, s.metaKey(key)).Result()
	if err != nil {
		return chatmem.FactMark{}, fmt.Errorf("redis: fact mark of %s: %w", key, wrap(ctx, err))
	}
	conv, err := parseMeta(key, fields)
	if err != nil {
		return chatmem.FactMark{}, fmt.Errorf("redis: fact mark of %s: %w", key, err)
	}
	if !s.live(conv) {
		return chatmem.FactMark{}, notFound(key)
	}
	return chatmem.FactMark{Seq: factSeq(fields), LastSeq: conv.LastSeq, Created: conv.CreatedAt}, nil
}

// factSeq returns the fact mark that meta's fields hold.
func factSeq(fields map[string]string) int64 {
	if fields["fact_of"] == "" || fields["fact_of"] != fields["created_at"] {
		return 0
	}
	n, _ := strconv.ParseInt(fields["fact_seq"], 10, 64)
	return n
}

// setFactsThroughScript is setFactsScript with the compare-and-set of the
// fact mark: it writes the facts and moves the mark from prev to through,
// or nothing.
//
// KEYS: meta, facts, facthist. ARGV: now, the conversation's created_at,
// prev, through, then one pair per fact: its key and its JSON. It replies
// -1 for a missing or expired conversation, or one created at another
// time; -2 if the mark is not prev; {-3, last_seq} if through is beyond
// last_seq; else 0.
var setFactsThroughScript = newScript(luaPrelude + luaSetFactPairs + `
local meta, facts, hist = KEYS[1], KEYS[2], KEYS[3]
local m = redis.call('HMGET', meta, 'last_seq', 'expires_at', 'created_at', 'fact_seq', 'fact_of')
if not m[1] or expired(m[2], ARGV[1]) then return -1 end
if m[3] ~= ARGV[2] then return -1 end
local mark = '0'
if m[5] and m[5] == m[3] and m[4] then mark = m[4] end
if mark ~= ARGV[3] then return -2 end
if lt(m[1], ARGV[4]) then return {-3, tonumber(m[1])} end
setFactPairs(facts, hist, 5)
redis.call('HSET', meta, 'fact_seq', ARGV[4], 'fact_of', m[3])
if #ARGV >= 5 then
  keepExpiry(meta, facts)
  keepExpiry(meta, hist)
end
return 0
`)

// SetFactsThrough records facts and moves the fact mark from prev to
// through with one script; see chatmem.FactMarker. Nothing is written on
// error.
func (s *Store) SetFactsThrough(ctx context.Context, key chatmem.Key, created time.Time, facts []chatmem.Fact, prev, through int64) error {
	if err := key.Validate(); err != nil {
		return err
	}
	if err := storekit.CheckFactMark(prev, through); err != nil {
		return err
	}
	now := s.now()
	gen, ok := generation(&created)
	args, err := appendFactArgs(make([]any, 0, 4+2*len(facts)), facts, now, false,
		nanos(now), gen, strconv.FormatInt(prev, 10), strconv.FormatInt(through, 10))
	if err != nil {
		return err
	}
	if !ok {
		return notFound(key)
	}
	reply, err := s.run(ctx, setFactsThroughScript, s.keysAt(key, kMeta, kFacts, kFactHist), args...)
	if err != nil {
		return fmt.Errorf("redis: set facts of %s: %w", key, err)
	}
	if r, ok := reply.([]any); ok && len(r) == 2 {
		// {-3, last_seq}: through is past the last message.
		last, _ := r[1].(int64)
		if err := storekit.CheckFactMarkWithin(through, last); err != nil {
			return fmt.Errorf("facts of %s: %w", key, err)
		}
		return fmt.Errorf("redis: set facts of %s: unexpected script reply %v", key, reply)
	}
	switch n, _ := reply.(int64); n {
	case -1:
		return notFound(key)
	case -2:
		return fmt.Errorf("%w: the fact mark of %s is not %d", chatmem.ErrConflict, key, prev)
	}
	return nil
}

// FactLaggards returns live conversations whose fact mark is below their
// last seq, after the key after; see chatmem.FactMarker. It finds the
// tenants with one SCAN (as PurgeInactive does), then walks each tenant's
// index of IDs from after, a page at a time, reading the pages' meta
// hashes in one pipelined round trip.
func (s *Store) FactLaggards(ctx context.Context, after chatmem.Key, limit int) ([]chatmem.Key, error) {
	if err := storekit.CheckPageLimit(limit); err != nil {
		return nil, err
	}
	tenants, err := s.tenants(ctx)
	if err != nil {
		return nil, fmt.Errorf("redis: fact laggards: %w", err)
	}
	slices.Sort(tenants)
	var out []chatmem.Key
	for _, tenant := range tenants {
		if tenant < after.Tenant {
			continue
		}
		lo := "-"
		if tenant == after.Tenant {
			lo = "(" + after.ID
		}
		for len(out) < limit {
			ids, err := s.client.ZRangeByLex(ctx, s.indexKey(tenant), &goredis.ZRangeBy{Min: lo, Max: "+", Count: int64(limit)}).Result()
			if err != nil {
				return nil, fmt.Errorf("redis: fact laggards: %w", wrap(ctx, err))
			}
			if len(ids) == 0 {
				break
			}
			lo = "(" + ids[len(ids)-1]
			cmds := make([]*goredis.MapStringStringCmd, len(ids))
			if _, err := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
				for i, id := range ids {
					cmds[i] = p.HGetAll(ctx, s.metaKey(chatmem.Key{Tenant: tenant, ID: id}))
				}
				return nil
			}); err != nil {
				return nil, fmt.Errorf("redis: fact laggards: %w", wrap(ctx, err))
			}
			for i, id := range ids {
				key := chatmem.Key{Tenant: tenant, ID: id}
				fields := cmds[i].Val()
				conv, err := parseMeta(key, fields)
				if err != nil {
					return nil, fmt.Errorf("redis: fact laggards: %s: %w", key, err)
				}
				if s.live(conv) && factSeq(fields) < conv.LastSeq && len(out) < limit {
					out = append(out, key)
				}
			}
			if len(ids) < limit {
				break
			}
		}
		if len(out) == limit {
			break
		}
	}
	return out, nil
}
