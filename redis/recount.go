package redis

import (
	"context"
	"fmt"
	"strconv"

	"github.com/chatmem/chatmem"
)

var _ chatmem.Recounter = (*Store)(nil)

// recountScript rewrites a conversation's counts: the "tokens" of every
// stored message (in msgs, and in sys for the system messages), the cum
// list and meta's tokens, system_tokens and tokenizer.
//
// KEYS: meta, msgs, cum, sys, and two scratch keys of the conversation's
// hash slot for the new msgs and cum lists. ARGV: now, the expected last
// seq, the tokenizer, then the count of each message, seq 1 first.
//
// It replies {-1} for a missing or expired conversation, {0, last_seq} when
// last_seq is not the expected one, {2, seq} for a stored message not in
// the shape encodeRecord writes (nothing is changed), and {1} after the
// rewrite.
//
// It copies msgs to the scratch list 1000 messages at a time, replacing the
// number after the first "tokens": of each (a JSON key that no text before
// it can imitate: every key before it is a fixed field name, and a quote
// inside a string value is escaped), and builds the new cum list beside
// it; only once every message has been rewritten does it rename the
// scratch lists over the old ones, so an error on the way changes nothing.
// The renamed lists get meta's time to live, as the scratch lists had none.
var recountScript = newScript(luaPrelude + `
local meta, msgs, cum, sys, newMsgs, newCum = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local now, expected, tokenizer = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local m = redis.call('HMGET', meta, 'last_seq', 'expires_at')
local last = tonumber(m[1])
if not last or expired(m[2], now) then return {-1} end
if last ~= expected then return {0, last} end

redis.call('DEL', newMsgs, newCum)
local total, systemTotal = 0, 0
local outSys = {}
for first = 0, last - 1, 1000 do
  local items = redis.call('LRANGE', msgs, first, first + 999)
  local outMsgs, outCum = {}, {}
  for i, rec in ipairs(items) do
    local seq = first + i
    local n = ARGV[3 + seq]
    local stored, role = string.match(rec, '^{"seq":(%d+),"role":"(%a+)"')
    local a, b = string.find(rec, '"tokens":%d+')
    if tonumber(stored) ~= seq or not a then
      redis.call('DEL', newMsgs, newCum)
      return {2, seq}
    end
    rec = string.sub(rec, 1, a - 1) .. '"tokens":' .. n .. string.sub(rec, b + 1)
    if role == 'system' then
      systemTotal = systemTotal + tonumber(n)
      outSys[#outSys + 1] = rec
    else
      total = total + tonumber(n)
    end
    outMsgs[i] = rec
    outCum[i] = total
  end
  if #items ~= math.min(1000, last - first) then
    redis.call('DEL', newMsgs, newCum)
    return {2, first + #items + 1}
  end
  redis.call('RPUSH', newMsgs, unpack(outMsgs))
  redis.call('RPUSH', newCum, unpack(outCum))
end

redis.call('RENAME', newMsgs, msgs)
redis.call('RENAME', newCum, cum)
redis.call('DEL', sys)
pushAll(sys, outSys)
redis.call('HSET', meta, 'tokenizer', tokenizer, 'tokens', total, 'system_tokens', systemTotal)
keepExpiry(meta, msgs)
keepExpiry(meta, cum)
keepExpiry(meta, sys)
return {1}
`)

// Recount replaces the conversation's token counts, running totals and
// tokenizer with one script run (see chatmem.Recounter and recountScript).
// The script holds the Redis node for the whole rewrite, which is a copy of
// every message: a few milliseconds per thousand messages, seconds for a
// conversation of a million, during which that node answers no one else
// (on a Cluster, only the node of the conversation's slot). It is for
// maintenance, off peak.
//
// A Tail that runs beside a Recount may find its run by the old counts and
// read the messages with the new ones (Tail reads messages outside its
// script; see the package documentation): the messages are the
// conversation's, and Memory fits the window to its budget with the counts
// they carry, so the window may be shorter than it could be, never over
// budget.
//
// It returns chatmem.ErrNotFound, and chatmem.ErrConflict if the
// conversation is no longer at lastSeq; its arguments are checked with
// chatmem.ValidateRecount. Nothing is written on error.
func (s *Store) Recount(ctx context.Context, key chatmem.Key, tokenizer string, lastSeq int64, tokens []int) error {
	if err := key.Validate(); err != nil {
		return err
	}
	if err := chatmem.ValidateRecount(tokenizer, lastSeq, tokens); err != nil {
		return fmt.Errorf("redis: recount %s: %w", key, err)
	}
	keys := s.keysAt(key, kMeta, kMsgs, kCum, kSys)
	base := s.prefix + ":{" + key.Tenant + "/" + key.ID + "}:"
	keys = append(keys, base+"recount:msgs", base+"recount:cum")
	args := make([]any, 0, 3+len(tokens))
	args = append(args, nanos(s.now()), lastSeq, tokenizer)
	for _, n := range tokens {
		args = append(args, strconv.Itoa(n))
	}
	reply, err := s.run(ctx, recountScript, keys, args...)
	if err != nil {
		return fmt.Errorf("redis: recount %s: %w", key, err)
	}
	r, ok := reply.([]any)
	if !ok || len(r) == 0 {
		return fmt.Errorf("redis: recount %s: unexpected script reply %v", key, reply)
	}
	switch status, _ := r[0].(int64); {
	case status == -1:
		return notFound(key)
	case status == 0 && len(r) == 2:
		return fmt.Errorf("%w: conversation %s is at seq %d, not %d", chatmem.ErrConflict, key, r[1], lastSeq)
	case status == 1:
		return nil
	case status == 2 && len(r) == 2:
		return fmt.Errorf("redis: recount %s: stored message %d is not in the shape the store writes", key, r[1])
	}
	return fmt.Errorf("redis: recount %s: unexpected script reply %v", key, reply)
}
