package redis

import (
	"bytes"
	"context"
	"fmt"
	"strconv"

	"github.com/chatmem/chatmem"
)

var _ chatmem.ReceiptStore = (*Store)(nil)

// receiptsScript reads up to limit receipts after a seq. The receipts key
// is a sorted set scored by the seq of the message each is kept with,
// whose members are "seq:receipt" (see appendScript; rewindScript trims
// it with the messages).
//
// KEYS: meta, receipts. ARGV: now, after, limit (<= 0: all). It replies
// {-1} for a missing or expired conversation, else {0, members}.
var receiptsScript = newScript(luaPrelude + `
local m = redis.call('HMGET', KEYS[1], 'last_seq', 'expires_at')
if not m[1] or expired(m[2], ARGV[1]) then return {-1} end
local limit = tonumber(ARGV[3])
if limit <= 0 then limit = -1 end
return {0, redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. ARGV[2], '+inf', 'LIMIT', 0, limit)}
`)

// Receipts returns up to limit receipts stored with messages after seq
// after, oldest first, with one script run; see chatmem.ReceiptStore.
func (s *Store) Receipts(ctx context.Context, key chatmem.Key, after int64, limit int) ([]chatmem.StoredReceipt, error) {
	if err := key.Validate(); err != nil {
		return nil, err
	}
	reply, err := s.run(ctx, receiptsScript, s.keysAt(key, kMeta, kReceipts), nanos(s.now()), after, limit)
	if err != nil {
		return nil, fmt.Errorf("redis: receipts of %s: %w", key, err)
	}
	r, ok := reply.([]any)
	if !ok || len(r) == 0 {
		return nil, fmt.Errorf("redis: receipts of %s: unexpected script reply %v", key, reply)
	}
	if n, _ := r[0].(int64); n < 0 || len(r) < 2 {
		return nil, notFound(key)
	}
	members, _ := r[1].([]any)
	out := make([]chatmem.StoredReceipt, 0, len(members))
	for _, m := range members {
		b := []byte(fmt.Sprint(m))
		i := bytes.IndexByte(b, ':')
		seq, err := strconv.ParseInt(string(b[:max(i, 0)]), 10, 64)
		if i < 0 || err != nil {
			return nil, fmt.Errorf("redis: receipts of %s: a member without its seq", key)
		}
		out = append(out, chatmem.StoredReceipt{Seq: seq, Data: b[i+1:]})
	}
	return out, nil
}
