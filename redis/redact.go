package redis

import (
	"context"
	"fmt"

	goredis "github.com/redis/go-redis/v9"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/storekit"
)

var _ chatmem.Redactor = (*Store)(nil)

// redactScript writes a message's redacted record over its old one, with
// what was derived from the old one in the conversation's slot. The
// record is made in Go (the caller read the old one and counted the new
// one); the script writes it only if the list still holds the old one
// there, and the conversation is at the expected last seq and revision.
//
// KEYS: meta, msgs, cum, sys, idem, summary, facts, facthist, terms.
// ARGV: now, seq, the expected last seq, the expected revision, the old
// record, the new record, the difference of the counts, '1' for a system
// message, the number of the old terms, the old terms, then the new
// terms. It replies {-1} for a missing or expired conversation, {0,
// last_seq, rev} when those are not the expected ones, {3} when the
// message is not the one read, else {1, meta} with meta as HGETALL has it
// after the redaction.
//
// Its cost is that of the running totals after the message (cum is cut
// there and pushed again, adjusted), plus the conversation's idempotency
// keys and fact histories.
var redactScript = newScript(luaPrelude + luaPruneFacts + `
local meta, msgs, cum, sys, idem, summary, facts, hist, terms = unpack(KEYS, 1, 9)
local now, seq, expected, expectedRev = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local old, new, delta, isSys, nOld = ARGV[5], ARGV[6], tonumber(ARGV[7]), ARGV[8] == '1', tonumber(ARGV[9])
local m = redis.call('HMGET', meta, 'last_seq', 'expires_at', 'rev', 'ixseq', 'indexed', 'backfilled', 'tokens', 'system_tokens')
if not m[1] or expired(m[2], now) then return {-1} end
local last, rev = tonumber(m[1]), tonumber(m[3]) or 0
if last ~= expected or rev ~= expectedRev then return {0, last, rev} end
if redis.call('LINDEX', msgs, seq - 1) ~= old then return {3} end

redis.call('LSET', msgs, seq - 1, new)
local tokens, systemTokens = tonumber(m[7]) or 0, tonumber(m[8]) or 0
if isSys then
  systemTokens = systemTokens + delta
  local list = redis.call('LRANGE', sys, 0, -1)
  for i, r in ipairs(list) do
    if r == old then redis.call('LSET', sys, i - 1, new) break end
  end
elseif delta ~= 0 then
  tokens = tokens + delta
  local after = redis.call('LRANGE', cum, seq - 1, -1)
  if seq == 1 then redis.call('DEL', cum) else redis.call('LTRIM', cum, 0, seq - 2) end
  local out = {}
  for i, v in ipairs(after) do out[i] = tonumber(v) + delta end
  pushAll(cum, out)
  keepExpiry(meta, cum)
end

-- The fingerprint of the append that stored the message was made from
-- its old text.
local keys = redis.call('HGETALL', idem)
for i = 1, #keys, 2 do
  local first, final, fp = string.match(keys[i + 1], '^(%d+):(%d+):?(.*)$')
  if first and tonumber(first) <= seq and tonumber(final) >= seq and fp ~= '' then
    redis.call('HSET', idem, keys[i], first .. ':' .. final)
  end
end

local covered = tonumber(redis.call('HGET', summary, 'covers_seq'))
if covered and covered >= seq then redis.call('DEL', summary) end

pruneFacts(facts, hist, function(f) return sourceSeq(f) == seq end)

-- The index: the message's postings are replaced if the index reached
-- it; else the indexing to come reads the new record.
if seq <= indexMark(last, m[4], m[5], m[6]) then
  local base = termBase(terms)
  for i = 10, 9 + nOld do
    local k = base .. ARGV[i]
    redis.call('ZREM', k, seq)
    if redis.call('EXISTS', k) == 0 then redis.call('SREM', terms, ARGV[i]) end
  end
  for i = 10 + nOld, #ARGV do
    local k = base .. ARGV[i]
    redis.call('SADD', terms, ARGV[i])
    if redis.call('ZADD', k, seq, seq) == 1 then keepExpiry(meta, k) end
  end
end
redis.call('HSET', meta, 'tokens', string.format('%d', tokens), 'system_tokens', string.format('%d', systemTokens),
  'rev', string.format('%d', rev + 1), 'updated_at', now)
return {1, redis.call('HGETALL', meta)}
`)

// redactUserScript replaces a redacted message's entries in its user's
// index, if the index holds it, and deletes the values of the user's
// facts taken from it.
//
// KEYS: the user's terms set, marks hash, facts and facthist. ARGV: the
// conversation's ID, its gen, the seq, the message's member and score,
// the number of the old terms, the old terms, then the new terms. It
// replies 0.
var redactUserScript = newScript(luaPrelude + luaPruneFacts + `
local set, marks, facts, hist = unpack(KEYS, 1, 4)
local conv, gen, seq, member, score, nOld = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], ARGV[5], tonumber(ARGV[6])
local from = '"conversation":"' .. conv .. '"'
pruneFacts(facts, hist, function(f)
  return sourceSeq(f) == seq and string.find(f, from, 1, true) ~= nil
end)
local m = redis.call('HGET', marks, conv)
if not m then return 0 end
local g, n = string.match(m, '^(.*):(%d+)$')
if g ~= gen or tonumber(n) < seq then return 0 end
local base = termBase(set)
for i = 7, 6 + nOld do
  redis.call('ZREM', base .. ARGV[i], member)
  if redis.call('EXISTS', base .. ARGV[i]) == 0 then redis.call('SREM', set, ARGV[i]) end
end
for i = 7 + nOld, #ARGV do
  redis.call('SADD', set, ARGV[i])
  redis.call('ZADD', base .. ARGV[i], score, member)
end
return 0
`)

// Redact writes r over one message with what was derived from it, in one
// script in the conversation's slot; see chatmem.Redactor. It reads the
// message first, makes its new record, and the script writes it only if
// nothing changed in between (ErrConflict otherwise). The user's facts
// taken from the message and its entries in the user's index are updated
// by a script in the user's slot after it (if that fails, it is logged,
// and they stay until the conversation is redacted or rewound again).
// Redis keeps no old values: the old record is gone once the script ran
// (from an AOF or RDB file at the next rewrite or save).
func (s *Store) Redact(ctx context.Context, key chatmem.Key, r chatmem.Redaction) (chatmem.Conversation, chatmem.Message, error) {
	if err := storekit.CheckRedact(key, r); err != nil {
		return chatmem.Conversation{}, chatmem.Message{}, err
	}
	keys := s.keysAt(key, kMeta, kMsgs, kCum, kSys, kIdem, kSummary, kFacts, kFactHist, kTerms)
	var rec *goredis.StringCmd
	var head *goredis.SliceCmd
	if _, err := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		head = p.HMGet(ctx, keys[0], "last_seq", "expires_at", "rev", "gen")
		rec = p.LIndex(ctx, keys[1], r.Seq-1)
		return nil
	}); err != nil && err != goredis.Nil {
		return chatmem.Conversation{}, chatmem.Message{}, fmt.Errorf("redis: redact %s: %w", key, wrap(ctx, err))
	}
	old, err := rec.Result()
	if err != nil {
		if err != goredis.Nil {
			return chatmem.Conversation{}, chatmem.Message{}, fmt.Errorf("redis: redact %s: %w", key, wrap(ctx, err))
		}
		// No such message: no conversation, or one rewound past it.
		last, ok := head.Val()[0].(string)
		if !ok {
			return chatmem.Conversation{}, chatmem.Message{}, notFound(key)
		}
		return chatmem.Conversation{}, chatmem.Message{}, fmt.Errorf("%w: conversation %s is at seq %s, not %d", chatmem.ErrConflict, key, last, r.ExpectedLastSeq)
	}
	gen, _ := head.Val()[3].(string)
	prev, err := decodeRecord(old)
	if err != nil {
		return chatmem.Conversation{}, chatmem.Message{}, fmt.Errorf("redis: redact %s: %w", key, err)
	}
	prev.Seq = r.Seq
	out := r.Apply(prev)
	rec2, err := encodeRecordAt(r.Seq, out)
	if err != nil {
		return chatmem.Conversation{}, chatmem.Message{}, fmt.Errorf("redis: redact %s: %w", key, err)
	}
	oldTerms, newTerms := chatmem.IndexTerms(prev), chatmem.IndexTerms(out)
	sys := "0"
	if out.Role == chatmem.RoleSystem {
		sys = "1"
	}
	args := []any{nanos(s.now()), r.Seq, r.ExpectedLastSeq, r.ExpectedRevision, old, rec2, out.Tokens - prev.Tokens, sys, len(oldTerms)}
	for _, t := range oldTerms {
		args = append(args, t)
	}
	for _, t := range newTerms {
		args = append(args, t)
	}
	reply, err := s.run(ctx, redactScript, keys, args...)
	if err != nil {
		return chatmem.Conversation{}, chatmem.Message{}, fmt.Errorf("redis: redact %s: %w", key, err)
	}
	rr, _ := reply.([]any)
	code := int64(-2)
	if len(rr) > 0 {
		code, _ = rr[0].(int64)
	}
	switch {
	case code == -1:
		return chatmem.Conversation{}, chatmem.Message{}, notFound(key)
	case code == 0 && len(rr) == 3:
		last, _ := rr[1].(int64)
		rev, _ := rr[2].(int64)
		return chatmem.Conversation{}, chatmem.Message{}, storekit.RedactConflict(key, last, rev, r)
	case code == 3:
		return chatmem.Conversation{}, chatmem.Message{}, fmt.Errorf("%w: message %d of %s changed while it was redacted", chatmem.ErrConflict, r.Seq, key)
	case code == 1 && len(rr) == 2:
	default:
		return chatmem.Conversation{}, chatmem.Message{}, fmt.Errorf("redis: redact %s: unexpected script reply %v", key, reply)
	}
	conv, err := parseMeta(key, rr[1])
	if err != nil {
		return chatmem.Conversation{}, chatmem.Message{}, fmt.Errorf("redis: redact %s: %w", key, err)
	}
	if conv.User != "" {
		user := chatmem.Key{Tenant: key.Tenant, ID: conv.User}
		member, score := userMember(key.ID, r.Seq, gen, prev.CreatedAt)
		uargs := []any{key.ID, gen, r.Seq, member, score, len(oldTerms)}
		for _, t := range oldTerms {
			uargs = append(uargs, t)
		}
		for _, t := range newTerms {
			uargs = append(uargs, t)
		}
		ukeys := append(s.userIndexKeys(user), s.userKeys(user)[1:]...)
		if _, err := s.run(ctx, redactUserScript, ukeys, uargs...); err != nil {
			s.log.ErrorContext(ctx, "redis: user index and facts after redaction", "key", key.String(), "user", conv.User, "err", err)
		}
	}
	return conv, out, nil
}
