package redis

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/storekit"
)

var _ chatmem.RevisionRewinder = (*Store)(nil)

// rewindScript deletes a conversation's messages after a seq with what was
// derived from them in its slot, and gives it a new gen: readers that
// checked gen (Tail's reads outside its script, IndexPending's batches)
// then know the messages they read may be gone, as after a re-creation.
//
// KEYS: the conversation's keys (convKeys). ARGV: now, toSeq, the expected
// last seq, the new gen, the expected revision ("" for any). It replies
// {-1} for a missing or expired conversation, {0, last_seq} when last_seq
// is not the expected one, {3, rev} when the revision is not, {1,
// meta} when toSeq is the last seq (nothing changed), else {2, meta}, meta
// as HGETALL has it after the rewind.
//
// Its cost is that of the rewound messages, plus the conversation's terms
// (each term key loses its rewound seqs), idempotency keys and fact
// histories.
var rewindScript = newScript(luaPrelude + luaPruneFacts + `
local meta, msgs, cum, users, sys, idem, summary, facts, hist, terms, receipts = unpack(KEYS, 1, 11)
local now, to, expected, gen, expectedRev = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5])
local m = redis.call('HMGET', meta, 'last_seq', 'expires_at', 'system_tokens', 'ixseq', 'indexed', 'backfilled', 'fact_seq', 'rev')
if not m[1] or expired(m[2], now) then return {-1} end
local last = tonumber(m[1])
if last ~= expected then return {0, last} end
local rev = tonumber(m[8]) or 0
if expectedRev and rev ~= expectedRev then return {3, rev} end
if to == last then return {1, redis.call('HGETALL', meta)} end

-- The totals: system messages and user messages popped from their lists'
-- ends, the non-system tokens read from cum.
local systemTokens = tonumber(m[3]) or 0
while true do
  local r = redis.call('LINDEX', sys, -1)
  if not r then break end
  local d = cjson.decode(r)
  if d.seq <= to then break end
  systemTokens = systemTokens - (d.tokens or 0)
  redis.call('RPOP', sys)
end
while true do
  local u = redis.call('LINDEX', users, -1)
  if not u or tonumber(u) <= to then break end
  redis.call('RPOP', users)
end
local tokens = 0
if to > 0 then
  tokens = tonumber(redis.call('LINDEX', cum, to - 1))
  redis.call('LTRIM', msgs, 0, to - 1)
  redis.call('LTRIM', cum, 0, to - 1)
else
  redis.call('DEL', msgs, cum)
end

-- An append's idempotency key goes if it stored any rewound message.
local keys = redis.call('HGETALL', idem)
for i = 1, #keys, 2 do
  local final = tonumber(string.match(keys[i + 1], '^%d+:(%d+)'))
  if final and final > to then redis.call('HDEL', idem, keys[i]) end
end

local covered = tonumber(redis.call('HGET', summary, 'covers_seq'))
if covered and covered > to then redis.call('DEL', summary) end

-- The receipts of rewound messages go with them.
redis.call('ZREMRANGEBYSCORE', receipts, '(' .. to, '+inf')

-- The values stated by rewound messages leave the facts' histories.
pruneFacts(facts, hist, function(f) return sourceSeq(f) > to end)

-- The index loses the rewound seqs, and its watermark goes back.
local base = termBase(terms)
for _, t in ipairs(redis.call('SMEMBERS', terms)) do
  local k = base .. t
  redis.call('ZREMRANGEBYSCORE', k, '(' .. to, '+inf')
  if redis.call('EXISTS', k) == 0 then redis.call('SREM', terms, t) end
end
local mark = math.min(indexMark(last, m[4], m[5], m[6]), to)
local fseq = math.min(tonumber(m[7]) or 0, to)
local seqs = string.format('%d', to)
redis.call('HDEL', meta, 'indexed', 'backfilled')
redis.call('HSET', meta, 'last_seq', seqs, 'tokens', string.format('%d', tokens),
  'system_tokens', string.format('%d', systemTokens), 'turns', redis.call('LLEN', users),
  'updated_at', now, 'gen', gen, 'ixseq', string.format('%d', mark), 'fact_seq', string.format('%d', fseq),
  'rev', string.format('%d', rev + 1))
return {2, redis.call('HGETALL', meta)}
`)

// luaPruneFacts defines pruneFacts(facts, hist, drop), which deletes the
// values for which drop(value) is true from every fact history in the
// hash hist (JSON arrays of the objects Go wrote, split here without
// decoding them, so that the values kept stay byte for byte) and makes
// the newest value left each key's current one in the hash facts (none
// left: the key goes), and sourceSeq(value), a value's source_seq.
const luaPruneFacts = `
local function splitValues(s)
  local out, depth, inStr, esc, start = {}, 0, false, false, 0
  for i = 2, #s - 1 do
    local c = string.byte(s, i)
    if inStr then
      if esc then esc = false elseif c == 92 then esc = true elseif c == 34 then inStr = false end
    elseif c == 34 then inStr = true
    elseif c == 123 then
      if depth == 0 then start = i end
      depth = depth + 1
    elseif c == 125 then
      depth = depth - 1
      if depth == 0 then out[#out + 1] = string.sub(s, start, i) end
    end
  end
  return out
end

-- A quote inside a string is escaped, so this finds the top-level field.
local function sourceSeq(f)
  return tonumber(string.match(f, '"source_seq":(%d+)')) or 0
end

local function pruneFacts(facts, hist, drop)
  local h = redis.call('HGETALL', hist)
  for i = 1, #h, 2 do
    local kept, dropped = {}, false
    for _, f in ipairs(splitValues(h[i + 1])) do
      if drop(f) then dropped = true else kept[#kept + 1] = f end
    end
    if dropped then
      if #kept == 0 then
        redis.call('HDEL', hist, h[i])
        redis.call('HDEL', facts, h[i])
      else
        redis.call('HSET', hist, h[i], '[' .. table.concat(kept, ',') .. ']')
        redis.call('HSET', facts, h[i], kept[#kept])
      end
    end
  end
end
`

// rewindUserFactsScript deletes the values of the user's facts taken from
// a conversation's messages after a seq, as rewindScript does for the
// conversation's own facts.
//
// KEYS: the user's facts and facthist. ARGV: the conversation's ID, toSeq.
// It replies 0.
var rewindUserFactsScript = newScript(luaPruneFacts + `
local from = '"conversation":"' .. ARGV[1] .. '"'
local to = tonumber(ARGV[2])
pruneFacts(KEYS[1], KEYS[2], function(f)
  return sourceSeq(f) > to and string.find(f, from, 1, true) ~= nil
end)
return 0
`)

// Rewind deletes the conversation's messages after toSeq with what was
// derived from them, in one script in the conversation's slot; see
// chatmem.Rewinder. The user's facts taken from the rewound messages go in
// a script in the user's slot after it (if that fails, it is logged, and
// they stay). The conversation gets a new gen, so the user index
// (which lives in the user's slot) passes over every member of the
// conversation from before the rewind; Rewind then indexes the kept
// messages for the user again, as an append catches up on a conversation
// the index is behind on: all of them up to maxCatchUp, else the first
// maxCatchUp, the conversation's next appends taking the rest. Until
// then, and if that step fails (it is logged: the next append does it),
// the user's search misses them. A Tail racing the rewind may take one
// more round trip.
func (s *Store) Rewind(ctx context.Context, key chatmem.Key, toSeq, expectedLastSeq int64) (chatmem.Conversation, error) {
	return s.rewind(ctx, key, toSeq, expectedLastSeq, "")
}

// RewindRevision is Rewind that also checks the conversation's Revision;
// see chatmem.RevisionRewinder.
func (s *Store) RewindRevision(ctx context.Context, key chatmem.Key, toSeq, expectedLastSeq, expectedRevision int64) (chatmem.Conversation, error) {
	if err := storekit.CheckRewindRevision(expectedRevision); err != nil {
		return chatmem.Conversation{}, err
	}
	return s.rewind(ctx, key, toSeq, expectedLastSeq, strconv.FormatInt(expectedRevision, 10))
}

// rewind is Rewind, and RewindRevision with expectedRevision not "".
func (s *Store) rewind(ctx context.Context, key chatmem.Key, toSeq, expectedLastSeq int64, expectedRevision string) (chatmem.Conversation, error) {
	if err := storekit.CheckRewind(key, toSeq, expectedLastSeq); err != nil {
		return chatmem.Conversation{}, err
	}
	gen := rand.Text()
	reply, err := s.run(ctx, rewindScript, s.convKeys(key), nanos(s.now()), toSeq, expectedLastSeq, gen, expectedRevision)
	if err != nil {
		return chatmem.Conversation{}, fmt.Errorf("redis: rewind %s: %w", key, err)
	}
	r, _ := reply.([]any)
	code := int64(-2)
	if len(r) > 0 {
		code, _ = r[0].(int64)
	}
	switch {
	case code == -1:
		return chatmem.Conversation{}, notFound(key)
	case code == 0 && len(r) == 2:
		last, _ := r[1].(int64)
		return chatmem.Conversation{}, storekit.RewindConflict(key, last, expectedLastSeq)
	case code == 3 && len(r) == 2:
		rev, _ := r[1].(int64)
		want, _ := strconv.ParseInt(expectedRevision, 10, 64)
		return chatmem.Conversation{}, storekit.RevisionConflict(key, rev, want)
	case (code == 1 || code == 2) && len(r) == 2:
	default:
		return chatmem.Conversation{}, fmt.Errorf("redis: rewind %s: unexpected script reply %v", key, reply)
	}
	conv, err := parseMeta(key, r[1])
	if err != nil {
		return chatmem.Conversation{}, fmt.Errorf("redis: rewind %s: %w", key, err)
	}
	if code == 2 && conv.User != "" {
		user := chatmem.Key{Tenant: key.Tenant, ID: conv.User}
		if _, err := s.run(ctx, rewindUserFactsScript, s.userKeys(user)[1:], key.ID, toSeq); err != nil {
			s.log.ErrorContext(ctx, "redis: user facts after rewind", "key", key.String(), "user", conv.User, "err", err)
		}
		if toSeq > 0 {
			if err := s.reindexForUser(ctx, key, conv.User, gen, toSeq); err != nil {
				s.log.ErrorContext(ctx, "redis: index for the user after rewind", "key", key.String(), "user", conv.User, "err", err)
			}
		}
	}
	return conv, nil
}

// reindexForUser indexes the conversation's message toSeq, of generation
// gen, for its user, with the kept messages before it that the catch-up of
// indexForUser takes.
func (s *Store) reindexForUser(ctx context.Context, key chatmem.Key, user, gen string, toSeq int64) error {
	msgs, err := s.Range(ctx, key, toSeq-1, 1)
	if err != nil {
		return err
	}
	if len(msgs) != 1 || msgs[0].Seq != toSeq {
		return errors.New("the last kept message is gone")
	}
	return s.indexForUser(ctx, key, user, gen, msgs, [][]string{chatmem.IndexTerms(msgs[0])})
}
