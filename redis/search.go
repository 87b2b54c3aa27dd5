package redis

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/chatmem/chatmem"
)

// The lexical index (chatmem.Searcher): the append script indexes every
// non-system message under chatmem.IndexTerms, computed here in Go, in a
// sorted set per term of the conversation, <base>t:<term>, whose members
// and scores are the seqs of the messages that have the term; the set
// <base>terms lists the conversation's terms, so that Delete, PurgeInactive
// and an append that creates the conversation again can remove the term
// keys in their scripts. A term is lower-case letters, digits and
// apostrophes, so "t:" followed by it names no other kind of key; every
// term key has the conversation's hash tag, and lives in its slot.
//
// Postings reads each term's newest seqs below before with
// ZREVRANGEBYSCORE ... LIMIT 0 limit, which costs O(log n + limit) for a
// term of n postings, and checks the conversation in the same MULTI/EXEC,
// so it is one round trip whose cost does not follow the length of the
// conversation.

// backfillBatch is how many messages one backfill script indexes.
const backfillBatch = 1000

// Postings returns, per term, the seqs of the conversation's messages
// indexed under it with seq < before, newest first, at most limit of them,
// with one MULTI/EXEC. See chatmem.Searcher.
//
// A conversation stored before the index existed (its meta has no
// "indexed" field) is indexed by the first Postings that reads it (see
// backfill), which costs a read of its messages once.
func (s *Store) Postings(ctx context.Context, key chatmem.Key, terms []string, before int64, limit int) ([][]int64, error) {
	if err := key.Validate(); err != nil {
		return nil, err
	}
	if limit < 1 {
		return nil, fmt.Errorf("%w: postings limit %d is below 1", chatmem.ErrInvalid, limit)
	}
	for i, t := range terms {
		if t == "" {
			return nil, fmt.Errorf("%w: search term %d is empty", chatmem.ErrInvalid, i)
		}
	}
	// Two backfills are enough: the second one can only be needed if the
	// conversation was deleted and created again by a process that does
	// not index (an older version of this package).
	for range 3 {
		out, meta, err := s.postings(ctx, key, terms, before, limit)
		if err != nil {
			return nil, err
		}
		if meta.indexed {
			return out, nil
		}
		if err := s.backfill(ctx, key); err != nil {
			return nil, fmt.Errorf("redis: postings of %s: %w", key, err)
		}
	}
	return nil, fmt.Errorf("redis: postings of %s: the conversation is still not indexed after a backfill", key)
}

// searchMeta is what the search reads need of meta.
type searchMeta struct {
	last    int64 // 0: no conversation
	expires time.Time
	indexed bool
	gen     string
}

// metaFields are the fields readSearchMeta parses, in its order.
var metaFields = []string{"last_seq", "expires_at", "indexed", "gen"}

func readSearchMeta(v []any) searchMeta {
	var m searchMeta
	str := func(i int) string {
		if i < len(v) {
			s, _ := v[i].(string)
			return s
		}
		return ""
	}
	m.last, _ = strconv.ParseInt(str(0), 10, 64)
	if n, _ := strconv.ParseInt(str(1), 10, 64); n > 0 {
		m.expires = time.Unix(0, n)
	}
	m.indexed = str(2) != ""
	m.gen = str(3)
	return m
}

// live reports whether the conversation exists at now.
func (m searchMeta) live(now time.Time) bool {
	return m.last > 0 && (m.expires.IsZero() || now.Before(m.expires))
}

// postings reads the postings and meta in one transaction.
func (s *Store) postings(ctx context.Context, key chatmem.Key, terms []string, before int64, limit int) ([][]int64, searchMeta, error) {
	meta := s.metaKey(key)
	max := "(" + strconv.FormatInt(before, 10)
	var head *goredis.SliceCmd
	lists := make([]*goredis.StringSliceCmd, len(terms))
	_, err := s.client.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		head = p.HMGet(ctx, meta, metaFields...)
		for i, t := range terms {
			lists[i] = p.ZRevRangeByScore(ctx, s.termKey(key, t), &goredis.ZRangeBy{Min: "-inf", Max: max, Count: int64(limit)})
		}
		return nil
	})
	if err != nil {
		return nil, searchMeta{}, fmt.Errorf("redis: postings of %s: %w", key, wrap(ctx, err))
	}
	m := readSearchMeta(head.Val())
	if !m.live(s.now()) {
		return nil, m, notFound(key)
	}
	out := make([][]int64, len(terms))
	for i, l := range lists {
		members := l.Val()
		seqs := make([]int64, len(members))
		for j, v := range members {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, m, fmt.Errorf("redis: postings of %s: term %q has member %q", key, terms[i], v)
			}
			seqs[j] = n
		}
		out[i] = seqs
	}
	return out, m, nil
}

// termKey returns the key of a term's sorted set.
func (s *Store) termKey(key chatmem.Key, term string) string {
	return s.prefix + ":{" + key.Tenant + "/" + key.ID + "}:t:" + term
}

// MessagesAt returns the messages with the given seqs, oldest first, each
// once, with one MULTI/EXEC: a check of meta and an LRANGE per run of
// consecutive seqs (seq n is at list index n-1). See chatmem.Searcher.
func (s *Store) MessagesAt(ctx context.Context, key chatmem.Key, seqs []int64) ([]chatmem.Message, error) {
	if err := key.Validate(); err != nil {
		return nil, err
	}
	want := make([]int64, 0, len(seqs))
	for _, n := range seqs {
		if n > 0 {
			want = append(want, n)
		}
	}
	slices.Sort(want)
	want = slices.Compact(want)
	type run struct{ first, last int64 }
	var runs []run
	for _, n := range want {
		if len(runs) > 0 && runs[len(runs)-1].last == n-1 {
			runs[len(runs)-1].last = n
		} else {
			runs = append(runs, run{n, n})
		}
	}
	keys := s.keysAt(key, kMeta, kMsgs)
	var head *goredis.SliceCmd
	items := make([]*goredis.StringSliceCmd, len(runs))
	_, err := s.client.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		head = p.HMGet(ctx, keys[0], metaFields[:2]...)
		for i, r := range runs {
			items[i] = p.LRange(ctx, keys[1], r.first-1, r.last-1)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("redis: messages of %s: %w", key, wrap(ctx, err))
	}
	if !readSearchMeta(head.Val()).live(s.now()) {
		return nil, notFound(key)
	}
	out := make([]chatmem.Message, 0, len(want))
	for i, r := range runs {
		msgs, err := decodeRecords(items[i].Val())
		if err != nil {
			return nil, fmt.Errorf("redis: messages of %s: %w", key, err)
		}
		for j, m := range msgs {
			if m.Seq != r.first+int64(j) {
				return nil, fmt.Errorf("redis: messages of %s: list index %d holds seq %d", key, r.first-1+int64(j), m.Seq)
			}
		}
		out = append(out, msgs...)
	}
	return out, nil
}

// backfillScript indexes a batch of a conversation's messages that were
// stored before the index existed, if the conversation is still the one
// they were read from.
//
// KEYS: meta, terms. ARGV: gen, the last seq of the batch, then per
// message: its seq, the number of its terms and the terms. It replies -1 if
// the conversation is gone or has another gen, 0 if the conversation is
// indexed (by this batch, or before), and else its last seq: the backfill
// goes on to there. Indexing is idempotent (a ZADD of a seq that is there
// changes nothing), so batches may run twice, concurrently too. The batch
// that reaches the last seq marks meta "indexed"; the others record their
// progress in meta's "backfilled", where the next backfill resumes. New
// term keys expire with the conversation (meta's remaining time to live),
// as the append script's do.
var backfillScript = newScript(luaPrelude + `
local meta, terms = KEYS[1], KEYS[2]
local m = redis.call('HMGET', meta, 'last_seq', 'gen', 'indexed', 'backfilled')
if not m[1] or (m[2] or '') ~= ARGV[1] then return -1 end
if m[3] then return 0 end
local postings, order = {}, {}
local i = 3
while i <= #ARGV do
  local seq, nterms = tonumber(ARGV[i]), tonumber(ARGV[i + 1])
  for j = i + 2, i + 1 + nterms do
    local term = ARGV[j]
    local p = postings[term]
    if not p then
      p = {}
      postings[term] = p
      order[#order + 1] = term
    end
    p[#p + 1] = seq
  end
  i = i + 2 + nterms
end
local ttl = redis.call('PTTL', meta)
if ttl < 0 then ttl = nil end
addPostings(terms, order, postings, ttl)
local to, last = tonumber(ARGV[2]), tonumber(m[1])
if to >= last then
  redis.call('HSET', meta, 'indexed', '1')
  redis.call('HDEL', meta, 'backfilled')
  return 0
end
if to > (tonumber(m[4]) or 0) then
  redis.call('HSET', meta, 'backfilled', to)
end
return last
`)

// backfill indexes a conversation stored before the index existed, batch
// by batch, from where an earlier backfill stopped (meta's "backfilled")
// to its last seq. It reads the messages with plain LRANGEs and indexes
// them with backfillScript, which checks that the conversation was not
// deleted or created again in between (gen; if it was, backfill stops, and
// the caller reads meta again) and, on the master, whether the last seq is
// reached: a client that reads from replicas may have read an older one.
// Messages appended meanwhile are indexed by their appends, and perhaps
// again by the backfill, which changes nothing.
func (s *Store) backfill(ctx context.Context, key chatmem.Key) error {
	keys := s.keysAt(key, kMeta, kMsgs, kTerms)
	fields, err := s.client.HMGet(ctx, keys[0], "last_seq", "gen", "indexed", "backfilled").Result()
	if err != nil {
		return wrap(ctx, err)
	}
	if fields[0] == nil || fields[2] != nil {
		return nil
	}
	hi, _ := strconv.ParseInt(fields[0].(string), 10, 64)
	gen, _ := fields[1].(string)
	from := int64(1)
	if done, ok := fields[3].(string); ok {
		n, _ := strconv.ParseInt(done, 10, 64)
		from = n + 1
	}
	for {
		to := min(from+backfillBatch-1, hi)
		args := []any{gen, to}
		if from <= to {
			list, err := s.client.LRange(ctx, keys[1], from-1, to-1).Result()
			if err != nil {
				return wrap(ctx, err)
			}
			if int64(len(list)) != to-from+1 {
				// Gone, or a replica behind the meta read.
				return fmt.Errorf("backfill: read %d messages of %d..%d", len(list), from, to)
			}
			msgs, err := decodeRecords(list)
			if err != nil {
				return fmt.Errorf("backfill: %w", err)
			}
			for i, m := range msgs {
				if m.Seq != from+int64(i) {
					return fmt.Errorf("backfill: list index %d holds seq %d", from-1+int64(i), m.Seq)
				}
				terms := chatmem.IndexTerms(m)
				args = append(args, m.Seq, len(terms))
				for _, t := range terms {
					args = append(args, t)
				}
			}
		}
		reply, err := s.run(ctx, backfillScript, []string{keys[0], keys[2]}, args...)
		if err != nil {
			return fmt.Errorf("backfill: %w", err)
		}
		n, ok := reply.(int64)
		if !ok {
			return fmt.Errorf("backfill: unexpected script reply %v", reply)
		}
		if n <= 0 {
			return nil
		}
		from, hi = to+1, max(hi, n)
	}
}
