package redis

import goredis "github.com/redis/go-redis/v9"

// script is a Lua script with its source at hand, for the EVAL that follows
// a NOSCRIPT reply when the script runs without the client's retries.
type script struct {
	*goredis.Script
	src string
}

func newScript(src string) script { return script{goredis.NewScript(src), src} }

// The Lua scripts below run atomically on the Redis node that owns the
// conversation's hash slot. They take the conversation's keys (all of them
// in the order of convKeys, or the few they use), so each script touches one
// hash slot only and runs unchanged on a Redis Cluster. The first key is
// always meta, whose last_seq field exists exactly when the conversation
// does.
//
// Times are Unix nanoseconds in decimal strings: Lua numbers are doubles, which
// cannot hold them exactly, so scripts compare them as strings (see lt) and
// only turn them into numbers to compute a PEXPIRE duration in milliseconds.

// luaPrelude defines the helpers every script shares.
const luaPrelude = `
-- lt reports whether the non-negative decimal integer a is less than b,
-- exactly, without going through a double.
local function lt(a, b)
  if #a ~= #b then return #a < #b end
  return a < b
end

-- expired reports whether a conversation whose expires_at is exp (or '0' or
-- nil: never) has expired at now.
local function expired(exp, now)
  return exp ~= nil and exp ~= false and exp ~= '0' and not lt(now, exp)
end

-- keepExpiry gives key the time to live meta has left, so that what is
-- written after the last append expires with the conversation.
local function keepExpiry(meta, key)
  local ttl = redis.call('PTTL', meta)
  if ttl > 0 then redis.call('PEXPIRE', key, ttl) end
end

-- termBase returns the start of the names of a conversation's term keys
-- (<base>t:), given its terms set (<base>terms). Term keys are not in KEYS:
-- the client does not know them all, and they share the hash tag, so they
-- live in the slot of the script's keys.
local function termBase(set)
  return string.sub(set, 1, -6) .. 't:'
end

-- dropTerms deletes the conversation's term keys and its terms set.
local function dropTerms(set)
  local base = termBase(set)
  local members = redis.call('SMEMBERS', set)
  for i = 1, #members, 500 do
    local ks = {}
    for j = i, math.min(i + 499, #members) do ks[#ks + 1] = base .. members[j] end
    redis.call('UNLINK', unpack(ks))
  end
  redis.call('DEL', set)
end

-- keepTerms makes the term keys and the terms set expire together, at
-- least as late as a conversation with ttl milliseconds to live: when the
-- set's time to live is shorter than ttl, all of them get twice ttl, so
-- that appends that keep pushing the expiry touch every term key once per
-- ttl of time, not on every append. It returns the set's time to live
-- afterwards (nil: no set, or it was just given to every key). The keys
-- may outlive the conversation by up to ttl: reads check meta, and a new
-- conversation under the key drops them first.
local function keepTerms(set, ttl)
  local left = redis.call('PTTL', set)
  if left == -2 then return nil end -- no terms
  if left < ttl then
    local ms = string.format('%d', 2 * ttl)
    local base = termBase(set)
    redis.call('PEXPIRE', set, ms)
    for _, term in ipairs(redis.call('SMEMBERS', set)) do redis.call('PEXPIRE', base .. term, ms) end
    return nil
  end
  return left
end

-- addPostings indexes seqs under terms: postings maps each term of order to
-- its seqs, ascending. ttl is the conversation's time to live in
-- milliseconds (nil: none); see keepTerms. Term keys created here take the
-- set's remaining time, read on the server, so they never outlive it
-- whatever the clients' clocks say.
local function addPostings(set, order, postings, ttl)
  local base = termBase(set)
  local created = {}
  for _, term in ipairs(order) do
    local k = base .. term
    if redis.call('SADD', set, term) == 1 then created[#created + 1] = k end
    local seqs = postings[term]
    for i = 1, #seqs, 500 do
      local args = {}
      for j = i, math.min(i + 499, #seqs) do
        args[#args + 1] = seqs[j]
        args[#args + 1] = seqs[j]
      end
      redis.call('ZADD', k, unpack(args))
    end
  end
  if not ttl then return end
  local left = keepTerms(set, ttl)
  if left then
    for _, k in ipairs(created) do redis.call('PEXPIRE', k, left) end
  end
end

-- indexMark returns the watermark of a conversation's search index, the
-- last seq up to which every message is indexed, from meta's last_seq,
-- ixseq, indexed and backfilled: ixseq where it is kept; else the
-- conversation was stored by an earlier version, which indexed each
-- message in its append ("indexed" set: all of them) or not at all (the
-- backfill's progress, or 0).
local function indexMark(last, ixseq, indexed, backfilled)
  if ixseq then return tonumber(ixseq) end
  if indexed then return last end
  return tonumber(backfilled) or 0
end

-- pushAll pushes the values of t onto key in chunks, because unpack is
-- limited to a few thousand values.
local function pushAll(key, t)
  for i = 1, #t, 1000 do
    redis.call('RPUSH', key, unpack(t, i, math.min(i + 999, #t)))
  end
end
`

// luaTail defines tailStart, which the tail script and the append script
// (for AppendTail) share: where the newest messages a TailQuery selects
// begin. See tailScript for how it searches.
const luaTail = `
-- tailStart returns the seq at which the newest messages selected by want
-- tokens and turns user messages begin (last + 1 if they select none), for
-- a conversation whose last seq is last and whose non-system messages
-- hold total tokens; cum and users are its lists. want or turns is
-- positive.
local function tailStart(cum, users, last, total, want, turns)
  local start = 1
  local target = total - want
  if want > 0 and target > 0 then
    -- at(j) is cum[j], read from the tail; cum[0] is 0.
    local function at(j)
      if j == 0 then return 0 end
      return tonumber(redis.call('LINDEX', cum, j - 1 - last))
    end
    -- Invariant: cum[lo] < target <= cum[hi], so the boundary is in lo+1..hi.
    local lo, hi = 0, last
    local guess = last - math.ceil(want * last / total) -- 0 <= guess < last
    if guess > 0 then
      local step = 1
      if at(guess) >= target then
        hi = guess
        while hi - step > lo do
          local p = hi - step
          if at(p) < target then lo = p; break end
          hi, step = p, step * 2
        end
      else
        lo = guess
        while lo + step < hi do
          local p = lo + step
          if at(p) >= target then hi = p; break end
          lo, step = p, step * 2
        end
      end
    end
    while hi - lo > 1 do
      if hi - lo <= 33 then
        local vals = redis.call('LRANGE', cum, lo - last, hi - 2 - last) -- cum[lo+1..hi-1]
        for i = 1, #vals do
          if tonumber(vals[i]) >= target then hi = lo + i; break end
        end
        break
      end
      local mid = math.floor((lo + hi) / 2)
      if at(mid) >= target then hi = mid else lo = mid end
    end
    start = hi + 1
  end
  if turns > 0 then
    local s = redis.call('LINDEX', users, -turns)
    if s then start = math.max(start, tonumber(s)) end
  end
  return start
end
`

// appendScript appends a batch of messages.
//
// KEYS: all of the conversation's. ARGV: now, expires_at ('0': this append
// sets no expiry), expected last seq (-1: none), idempotency key (empty:
// none), tokenizer, generation (a random token, recorded as meta's gen if the
// append creates the conversation), expected tokenizer (empty: none), the
// request's fingerprint (empty: none), user (empty: none; recorded as
// meta's user if the append creates the conversation, else it must be
// meta's), the user's erasure.Hex and the erasure epoch its admission
// read (see erasure.go; ” and 0 without a user), the tail query's tokens and turns (both 0: none, as for
// Append) and whether to read the tail's messages ('1') or only find
// where they start ('0': the client reads them behind the script, see
// Store.AppendTail), then per message: its JSON object, its tokens, and its kind
// ('s' system, 'u' user, 'o' other). The object starts with its seq when
// an expected last seq is given (the append then lands with the seqs
// that follow it, or not at all), and the script puts it in front
// otherwise.
//
// The script does not index the messages for search: that is
// indexScript's, from the watermark meta keeps (see indexMark), which the
// script only starts at 0 for a conversation it creates (and records, for
// one stored by a version that indexed in the append, at the last seq
// that version indexed). What it keeps of the index is its expiry: an
// append that sets one gives the term keys at least as long (keepTerms).
//
// It replies {0, last_seq} on a failed ExpectedLastSeq check, {7, revision}
// on a failed ExpectedRevision check (ARGV[16], -1 for none), {5, user} on
// a user other than the live conversation's, {3, tokenizer} on a failed
// ExpectedTokenizer check (tokenizer is the live conversation's, empty if
// none is recorded; a conversation the append creates, an expired one
// included, matches), {6, epoch} when it would create the conversation
// for a user whose erasure started after the admission (KEYS[12], the
// tombstones given with a user, hold a higher epoch than ARGV[11]), {1, first_seq, meta fields...} after appending (the
// fields as appendMeta lists them; with a tail query, followed by the
// system messages, the first seq of the tail and, if asked, its messages,
// read as the append left the conversation: see Store.AppendTail), {2,
// first_seq, meta, messages} when
// the idempotency key was applied before (meta as HGETALL lists it;
// messages are the original ones), and {4, 0} when it was applied with
// another fingerprint (both set). The idem hash holds
// "first:last:fingerprint" ("first:last" for keys stored before
// fingerprints were, which match any). Nothing of a live conversation is
// written on a failed check or a replay (an expired one's keys are
// deleted first, whatever follows).
var appendScript = newScript(luaPrelude + luaTail + `
local meta, msgs, cum, users, sys, idem, terms = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[10]
local now, newExp, expected, ikey, tokenizer, gen, expectedTok = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], ARGV[5], ARGV[6], ARGV[7]
local fingerprint = ARGV[8]
local user, userHash, epoch = ARGV[9], ARGV[10], tonumber(ARGV[11])
local tailTokens, tailTurns, tailRead = tonumber(ARGV[12]), tonumber(ARGV[13]), ARGV[14]
local receipt, receipts = ARGV[15], KEYS[11]
local expectedRev = tonumber(ARGV[16])

local m = redis.call('HMGET', meta, 'last_seq', 'expires_at', 'tokens', 'system_tokens', 'turns', 'tokenizer', 'user',
  'ixseq', 'created_at', 'gen', 'rev')
local last = tonumber(m[1])
local exp = m[2]
if last and expired(exp, now) then
  -- Expired but not yet removed by Redis (our clock runs ahead of its):
  -- the conversation no longer exists, so this append starts a new one.
  last = nil
end
if not last and user ~= '' and KEYS[12] then
  -- Creating a conversation of the user: not for an admission older than
  -- an erasure that started since (erasure.go).
  local t = redis.call('HGET', KEYS[12], userHash)
  if t and tonumber(t) > epoch then return {6, tonumber(t)} end
end
if not last then
  -- Nothing of an earlier conversation with this ID may leak into the new
  -- one: keys written after its last append can outlive its meta by a
  -- millisecond of expiry.
  dropTerms(terms)
  redis.call('DEL', unpack(KEYS, 1, 11))
end

-- A retried append must be a no-op even after later appends moved last_seq,
-- so the idempotency key is checked before ExpectedLastSeq.
if last and ikey ~= '' then
  local r = redis.call('HGET', idem, ikey)
  if r then
    local first, final, fp = string.match(r, '^(%d+):(%d+):?(.*)$')
    if fp ~= '' and fingerprint ~= '' and fp ~= fingerprint then
      return {4, 0}
    end
    first, final = tonumber(first), tonumber(final)
    return {2, first, redis.call('HGETALL', meta), redis.call('LRANGE', msgs, first - 1, final - 1)}
  end
end

if expected >= 0 and expected ~= (last or 0) then
  return {0, last or 0}
end
-- ExpectedRevision: rewound or redacted since (a conversation the append
-- creates is at revision 0).
if expectedRev >= 0 then
  local rev = 0
  if last then rev = tonumber(m[11]) or 0 end
  if rev ~= expectedRev then return {7, rev} end
end
-- The messages were counted with expectedTok: a live conversation kept
-- under another tokenizer must not take them.
if last and expectedTok ~= '' and (m[6] or '') ~= expectedTok then
  return {3, m[6] or ''}
end
-- A conversation belongs to the user it was created for, or to none.
if last and user ~= '' and (m[7] or '') ~= user then
  return {5, m[7] or ''}
end

local tokens, systemTokens, turns = 0, 0, 0
local convTokenizer, convUser, created, convGen, convRev = tokenizer, user, now, gen, 0
if last then
  convRev = tonumber(m[11]) or 0
  tokens, systemTokens, turns = tonumber(m[3]), tonumber(m[4]), tonumber(m[5])
  convTokenizer, convUser, created, convGen = m[6] or '', m[7] or '', m[9] or '', m[10] or ''
  if not m[8] then
    -- Stored by a version that kept no watermark: start it where that
    -- version's index stands, before this append's messages.
    local old = redis.call('HMGET', meta, 'indexed', 'backfilled')
    redis.call('HSET', meta, 'ixseq', indexMark(last, m[8], old[1], old[2]))
    redis.call('HDEL', meta, 'indexed', 'backfilled')
  end
else
  last, exp = 0, '0'
  redis.call('HSET', meta, 'tokenizer', tokenizer, 'created_at', now, 'gen', gen, 'ixseq', '0')
  if user ~= '' then redis.call('HSET', meta, 'user', user) end
end

local first = last + 1
local outMsgs, outCum, outUsers, outSys = {}, {}, {}, {}
for i = 17, #ARGV, 3 do
  last = last + 1
  -- Stored messages carry their seq, so each list entry reads on its own.
  local msg = ARGV[i]
  if expected < 0 then msg = '{"seq":' .. last .. ',' .. string.sub(msg, 2) end
  local n, kind = tonumber(ARGV[i + 1]), ARGV[i + 2]
  if kind == 's' then
    systemTokens = systemTokens + n
    outSys[#outSys + 1] = msg
  else
    tokens = tokens + n
    if kind == 'u' then
      turns = turns + 1
      outUsers[#outUsers + 1] = last
    end
  end
  outMsgs[#outMsgs + 1] = msg
  outCum[#outCum + 1] = tokens
end
pushAll(msgs, outMsgs)
pushAll(cum, outCum)
if #outUsers > 0 then pushAll(users, outUsers) end
if #outSys > 0 then pushAll(sys, outSys) end
if ikey ~= '' then
  redis.call('HSET', idem, ikey, first .. ':' .. last .. ':' .. fingerprint)
end
if receipt ~= '' then
  -- Scored by the seq of the message it is kept with; the member starts
  -- with it, so members are distinct.
  redis.call('ZADD', receipts, last, last .. ':' .. receipt)
end
if newExp ~= '0' then exp = newExp end
redis.call('HSET', meta, 'last_seq', last, 'tokens', tokens, 'system_tokens', systemTokens,
  'turns', turns, 'updated_at', now, 'expires_at', exp)
if newExp ~= '0' then
  -- Every key gets the expiry again, including those this append created.
  local ttl = math.max(1, math.floor((tonumber(exp) - tonumber(now)) / 1e6))
  local ms = string.format('%d', ttl)
  for i = 1, 11 do -- the conversation's keys, not the tombstones
    if KEYS[i] ~= terms then redis.call('PEXPIRE', KEYS[i], ms) end
  end
  keepTerms(terms, ttl)
elseif exp ~= '0' then
  -- A conversation that expires, appended to without a new expiry: the
  -- keys it had keep theirs, but one this append may have created (its
  -- first system message, user message or idempotency key) takes the
  -- conversation's, or it would outlive it.
  local ms = string.format('%d', math.max(1, math.floor((tonumber(exp) - tonumber(now)) / 1e6)))
  if #outSys > 0 then redis.call('PEXPIRE', sys, ms) end
  if #outUsers > 0 then redis.call('PEXPIRE', users, ms) end
  if ikey ~= '' then redis.call('PEXPIRE', idem, ms) end
  if receipt ~= '' then redis.call('PEXPIRE', receipts, ms) end
end
-- meta as it is now, the fields parseMeta reads and gen (for the user
-- index), by position (see appendMeta): no HGETALL, and no field names
-- for Lua to make strings of. Numbers go as integers.
local reply = {1, first, convTokenizer, convUser, last, tokens, systemTokens, turns, created, now, exp, convGen, convRev}
if tailTokens > 0 or tailTurns > 0 then
  -- AppendTail: the reads of System and Tail, in the append's snapshot.
  local start = tailStart(cum, users, last, tokens, tailTokens, tailTurns)
  reply[14] = redis.call('LRANGE', sys, 0, -1)
  reply[15] = start
  if tailRead == '1' then
    reply[16] = redis.call('LRANGE', msgs, start - 1, last - 1)
  end
end
return reply
`)

// tailScript finds the newest messages selected by a TailQuery; the caller
// then reads them from msgs with a plain LRANGE (see Store.Tail), because
// messages passed through the script's Lua cost the server several times
// what the LRANGE does.
//
// KEYS: meta, cum, users. ARGV: now, tokens, turns. It replies {-1} for a
// missing or expired conversation, else {first_seq, last_seq, gen}: the run
// is first_seq..last_seq (empty if first_seq > last_seq), and gen is meta's
// gen (empty for a conversation created before gen was recorded).
//
// The token run is found on the cum list (cum[j] holds the non-system tokens
// of messages 1..j): the run starts after the smallest j with
// cum[j] >= total - tokens. The search starts at the j that the
// conversation's mean tokens per message predicts, probes single entries
// with LINDEX at distances 1, 2, 4, ... from there until it has the boundary
// between two probes, and bisects that bracket (reading it with one LRANGE
// once it holds at most 32 entries). When the mean predicts the boundary
// exactly, that is two LINDEX calls. Every read counts from the tail of the
// list and lies within the run or as far again before it as the
// prediction erred, so the cost follows the size of the run, not the
// length of the conversation.
var tailScript = newScript(luaPrelude + luaTail + `
local meta, cum, users = KEYS[1], KEYS[2], KEYS[3]
local now, want, turns = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local m = redis.call('HMGET', meta, 'last_seq', 'expires_at', 'tokens', 'gen')
local last = tonumber(m[1])
if not last or expired(m[2], now) then return {-1} end
local gen = m[4] or ''
if want <= 0 and turns <= 0 then return {last + 1, last, gen} end

return {tailStart(cum, users, last, tonumber(m[3]), want, turns), last, gen}
`)

// tailReadScript reads a run tailScript found, if the conversation is still
// the one it found: Tail's fallback when its plain read did not check out.
//
// KEYS: meta, msgs. ARGV: first_seq, last_seq, gen. It replies {-1} if the
// conversation is gone or has another gen, else {first_seq, messages}.
var tailReadScript = newScript(`
local m = redis.call('HMGET', KEYS[1], 'last_seq', 'gen')
if not m[1] or (m[2] or '') ~= ARGV[3] then return {-1} end
return {tonumber(ARGV[1]), redis.call('LRANGE', KEYS[2], ARGV[1] - 1, ARGV[2] - 1)}
`)

// rangeScript reads up to limit messages after a seq.
//
// KEYS: meta, msgs. ARGV: now, after, limit (<= 0: all). It replies {-1} for a missing or
// expired conversation, else {first_seq, messages}.
var rangeScript = newScript(luaPrelude + `
local meta, msgs = KEYS[1], KEYS[2]
local now, after, limit = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local m = redis.call('HMGET', meta, 'last_seq', 'expires_at')
local last = tonumber(m[1])
if not last or expired(m[2], now) then return {-1} end
if after < 0 then after = 0 end
if after >= last then return {after + 1, {}} end
local stop = last
if limit > 0 and after + limit < last then stop = after + limit end
return {after + 1, redis.call('LRANGE', msgs, after, stop - 1)}
`)

// sinceScript reads the conversation's metadata and up to limit messages
// after a seq, in one snapshot (see Store.ConversationSince).
//
// KEYS: meta, msgs. ARGV: now, after, limit (>= 1). It replies {-1} for a
// missing or expired conversation, else {first_seq, messages, meta}, where
// meta is the HGETALL list of the meta hash and the messages end at its
// last_seq when limit allows.
var sinceScript = newScript(luaPrelude + `
local meta, msgs = KEYS[1], KEYS[2]
local now, after, limit = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local h = redis.call('HGETALL', meta)
local last, exp
for i = 1, #h, 2 do
  if h[i] == 'last_seq' then last = tonumber(h[i + 1])
  elseif h[i] == 'expires_at' then exp = h[i + 1] end
end
if not last or expired(exp, now) then return {-1} end
if after < 0 then after = 0 end
if after >= last then return {after + 1, {}, h} end
local stop = last
if after + limit < last then stop = after + limit end
return {after + 1, redis.call('LRANGE', msgs, after, stop - 1), h}
`)

// systemScript reads the system messages.
//
// KEYS: meta, sys. ARGV: now. It replies {-1} for a missing or expired conversation, else
// {0, messages}.
var systemScript = newScript(luaPrelude + `
local meta, sys = KEYS[1], KEYS[2]
local m = redis.call('HMGET', meta, 'last_seq', 'expires_at')
if not m[1] or expired(m[2], ARGV[1]) then return {-1} end
return {0, redis.call('LRANGE', sys, 0, -1)}
`)

// deleteScript deletes a conversation's keys, unless ARGV[2] is set and the
// conversation was updated at or after it (a purge that lost a race with an
// append).
//
// KEYS: all of the conversation's (the term keys are found through the
// terms set). ARGV: now, before (empty for an unconditional delete). It
// replies 1 if a live conversation was deleted, 0 if it was kept, and -1 if
// there was none (its keys, if it had expired, are deleted too).
var deleteScript = newScript(luaPrelude + `
local meta = KEYS[1]
local now, before = ARGV[1], ARGV[2]
local m = redis.call('HMGET', meta, 'last_seq', 'expires_at', 'updated_at')
local live = m[1] and not expired(m[2], now)
if live and before ~= '' and not lt(m[3], before) then return 0 end
dropTerms(KEYS[10])
redis.call('DEL', unpack(KEYS))
if live then return 1 end
return -1
`)

// readScript reads a hash of a live conversation: one field, or (with an
// empty field) all of them.
//
// KEYS: meta, the hash. ARGV: now, field. It replies {-1} for a missing or
// expired conversation, else {0, value} (nil for a missing field, the
// HGETALL list for all).
var readScript = newScript(luaPrelude + `
local m = redis.call('HMGET', KEYS[1], 'last_seq', 'expires_at')
if not m[1] or expired(m[2], ARGV[1]) then return {-1} end
if ARGV[2] == '' then return {0, redis.call('HGETALL', KEYS[2])} end
return {0, redis.call('HGET', KEYS[2], ARGV[2])}
`)

// putSummaryScript replaces the summary if the stored one covers prev.
//
// KEYS: meta, summary. ARGV: now, prev, covers_seq, text, tokens,
// summarizer, created_at, and the conversation's created_at (empty: any).
// It replies -1 for a missing or expired conversation, or one created at
// another time, 0 after storing, {1, covered} when the stored summary
// covers another seq, and {2, last_seq} when covers_seq is past the last
// message.
var putSummaryScript = newScript(luaPrelude + `
local meta, summary = KEYS[1], KEYS[2]
local m = redis.call('HMGET', meta, 'last_seq', 'expires_at', 'created_at')
if not m[1] or expired(m[2], ARGV[1]) then return -1 end
if ARGV[8] ~= '' and m[3] ~= ARGV[8] then return -1 end
local covered = tonumber(redis.call('HGET', summary, 'covers_seq')) or 0
if covered ~= tonumber(ARGV[2]) then return {1, covered} end
if tonumber(ARGV[3]) > tonumber(m[1]) then return {2, tonumber(m[1])} end
redis.call('HSET', summary, 'covers_seq', ARGV[3], 'text', ARGV[4], 'tokens', ARGV[5],
  'summarizer', ARGV[6], 'created_at', ARGV[7])
keepExpiry(meta, summary)
return 0
`)

// setFactsScript records facts in order: each becomes its key's current
// value and is appended to the key's history, a JSON array kept as text.
//
// KEYS: meta, facts, facthist. ARGV: now, the conversation's created_at
// (empty: any), then one pair per fact: its key and its JSON. It replies
// -1 for a missing or expired conversation, or one created at another
// time, else 0.
var setFactsScript = newScript(luaPrelude + luaSetFactPairs + `
local meta, facts, hist = KEYS[1], KEYS[2], KEYS[3]
local m = redis.call('HMGET', meta, 'last_seq', 'expires_at', 'created_at')
if not m[1] or expired(m[2], ARGV[1]) then return -1 end
if ARGV[2] ~= '' and m[3] ~= ARGV[2] then return -1 end
if #ARGV < 3 then return 0 end
setFactPairs(facts, hist, 3)
keepExpiry(meta, facts)
keepExpiry(meta, hist)
return 0
`)

// luaSetFactPairs defines setFactPairs(facts, hist, from): ARGV from
// index from on holds one pair per fact, its key and its JSON; each
// becomes its key's current value in the hash facts and is appended to
// the key's history (a JSON array) in hist. A conversation's facts and a
// user's are written by it alike.
const luaSetFactPairs = `
local function setFactPairs(facts, hist, from)
  for i = from, #ARGV, 2 do
    local name, fact = ARGV[i], ARGV[i + 1]
    redis.call('HSET', facts, name, fact)
    local h = redis.call('HGET', hist, name)
    if h then h = string.sub(h, 1, -2) .. ',' .. fact .. ']' else h = '[' .. fact .. ']' end
    redis.call('HSET', hist, name, h)
  end
end
`

// deleteFactScript removes a fact's current value and history.
//
// KEYS: meta, facts, facthist. ARGV: now, key. It replies -1 for a missing
// or expired conversation, else how many current values it removed (0 or
// 1).
var deleteFactScript = newScript(luaPrelude + `
local m = redis.call('HMGET', KEYS[1], 'last_seq', 'expires_at')
if not m[1] or expired(m[2], ARGV[1]) then return -1 end
redis.call('HDEL', KEYS[3], ARGV[2])
return redis.call('HDEL', KEYS[2], ARGV[2])
`)
