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

// The lexical index (chatmem.Searcher): every non-system message is
// indexed under chatmem.IndexTerms, computed here in Go, in a sorted set
// per term of the conversation, <base>t:<term>, whose members and scores
// are the seqs of the messages that have the term; the set <base>terms
// lists the conversation's terms, so that Delete, PurgeInactive and an
// append that creates the conversation again can remove the term keys in
// their scripts. A term is lower-case letters, digits and apostrophes, so
// "t:" followed by it names no other kind of key; every term key has the
// conversation's hash tag, and lives in its slot.
//
// The append does not index: it writes the messages and nothing a search
// needs, so that a turn costs one short script. meta's ixseq is the
// index's watermark, the last seq up to which every message is indexed
// (indexMark reads it, and what versions before it kept). IndexPending
// brings the index up to the last seq, batch by batch, from the
// watermark, with indexScript, which moves the watermark in the same
// script as the postings it adds: the worker calls it off the request
// path (chatmem.IndexCatcher), and Postings calls it itself when the
// watermark lags behind what it is asked about, so a message is found
// from the moment its append returns, and a crash or a dropped job only
// delays the indexing.
//
// Postings reads each term's newest seqs below before with
// ZREVRANGEBYSCORE ... LIMIT 0 limit, which costs O(log n + limit) for a
// term of n postings, and checks the conversation and its watermark in the
// same MULTI/EXEC, so it is one round trip whose cost does not follow the
// length of the conversation (plus, when the worker has fallen behind, the
// indexing of the messages past the watermark).

// indexBatch is how many messages one indexScript run indexes.
const indexBatch = 1000

// Postings returns, per term, the seqs of the conversation's messages
// indexed under it with seq < before, newest first, at most limit of them,
// with one MULTI/EXEC. See chatmem.Searcher.
//
// When the index's watermark is behind the messages asked about (the
// worker has not caught up yet, or the conversation was stored before the
// index existed), Postings indexes them first (IndexPending) and reads
// again.
func (s *Store) Postings(ctx context.Context, key chatmem.Key, terms []string, before int64, limit int) ([][]int64, error) {
	if err := key.Validate(); err != nil {
		return nil, err
	}
	if err := storekit.CheckPostings(terms, limit); err != nil {
		return nil, err
	}
	// What must be indexed: the messages before before, as far as the
	// conversation reached when Postings was called. Later appends may
	// move last_seq on meanwhile; they need not be waited for.
	var need int64 = -1
	for range 3 {
		out, meta, err := s.postings(ctx, key, terms, before, limit)
		if err != nil {
			return nil, err
		}
		if need < 0 {
			need = min(meta.last, before-1)
		}
		if meta.mark >= need {
			return out, nil
		}
		if err := s.IndexPending(ctx, key); err != nil {
			return nil, fmt.Errorf("redis: postings of %s: %w", key, err)
		}
	}
	return nil, fmt.Errorf("redis: postings of %s: the index is still behind after catching up", key)
}

// searchMeta is what the search reads need of meta.
type searchMeta struct {
	exists  bool // meta has a last_seq (0 after a rewind to 0)
	last    int64
	expires time.Time
	gen     string
	mark    int64 // the index's watermark (see indexMark)
	rev     string
}

// metaFields are the fields readSearchMeta parses, in its order.
var metaFields = []string{"last_seq", "expires_at", "gen", "ixseq", "indexed", "backfilled", "rev"}

func readSearchMeta(v []any) searchMeta {
	var m searchMeta
	str := func(i int) (string, bool) {
		if i < len(v) {
			s, ok := v[i].(string)
			return s, ok
		}
		return "", false
	}
	num := func(i int) int64 {
		s, _ := str(i)
		n, _ := strconv.ParseInt(s, 10, 64)
		return n
	}
	_, m.exists = str(0)
	m.last = num(0)
	if n := num(1); n > 0 {
		m.expires = time.Unix(0, n)
	}
	m.gen, _ = str(2)
	m.rev, _ = str(6)
	// As the scripts' indexMark: ixseq, else what an earlier version kept.
	if _, ok := str(3); ok {
		m.mark = num(3)
	} else if _, ok := str(4); ok {
		m.mark = m.last
	} else {
		m.mark = num(5)
	}
	return m
}

// live reports whether the conversation exists at now.
func (m searchMeta) live(now time.Time) bool {
	return m.exists && (m.expires.IsZero() || now.Before(m.expires))
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

// indexScript indexes a batch of a conversation's messages, the next
// ones after its watermark, if the conversation is still the one they were
// read from. It is where a message's terms go into the index: every
// message is indexed by it, once its append returned.
//
// KEYS: meta, terms. ARGV: gen, rev (the revision the batch was read at,
// empty for 0), the first and the last seq of the batch, then per
// message: its seq, the number of its terms and the terms. It replies -1
// if the conversation is gone or has another gen or revision (a
// redaction changed a message since the read), 0 if the
// index is up to date (by this batch, or before), and else the
// conversation's last seq: the caller goes on to there. Indexing is
// idempotent (a ZADD of a seq that is there changes nothing), so batches
// may run twice, concurrently too; the watermark (meta's ixseq) moves to
// the batch's last seq if the batch starts at or before it, and never
// back. New term keys expire with the conversation (meta's remaining time
// to live), as keepTerms has it.
var indexScript = newScript(luaPrelude + `
local meta, terms = KEYS[1], KEYS[2]
local m = redis.call('HMGET', meta, 'last_seq', 'gen', 'ixseq', 'indexed', 'backfilled', 'rev')
if not m[1] or (m[2] or '') ~= ARGV[1] or (m[6] or '') ~= ARGV[2] then return -1 end
local last = tonumber(m[1])
local mark = indexMark(last, m[3], m[4], m[5])
local from, to = tonumber(ARGV[3]), tonumber(ARGV[4])
if to > mark and from <= mark + 1 then
  local postings, order = {}, {}
  local i = 5
  while i <= #ARGV do
    local seq, nterms = tonumber(ARGV[i]), tonumber(ARGV[i + 1])
    if seq > mark then
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
    end
    i = i + 2 + nterms
  end
  local ttl = redis.call('PTTL', meta)
  if ttl < 0 then ttl = nil end
  addPostings(terms, order, postings, ttl)
  mark = to
  redis.call('HSET', meta, 'ixseq', mark)
  redis.call('HDEL', meta, 'indexed', 'backfilled')
end
if mark >= last then return 0 end
return last
`)

// IndexPending indexes the conversation's messages past its index's
// watermark, up to its last seq, indexBatch at a time: it reads them with
// plain LRANGEs and indexes each batch with indexScript, which checks that
// the conversation was not deleted or created again in between (gen; if
// it was, IndexPending stops: the new conversation's index starts at 0)
// and, on the master, whether the last seq is reached (a client that
// reads from replicas may have read an older one). Messages appended
// meanwhile are indexed too, up to the last seq the last batch finds. It
// returns chatmem.ErrNotFound for a conversation that does not exist. It
// is safe for concurrent use: batches indexed twice change nothing. See
// chatmem.IndexCatcher.
func (s *Store) IndexPending(ctx context.Context, key chatmem.Key) error {
	if err := key.Validate(); err != nil {
		return err
	}
	keys := s.keysAt(key, kMeta, kMsgs, kTerms)
	fields, err := s.client.HMGet(ctx, keys[0], metaFields...).Result()
	if err != nil {
		return fmt.Errorf("redis: index %s: %w", key, wrap(ctx, err))
	}
	meta := readSearchMeta(fields)
	if !meta.live(s.now()) {
		return notFound(key)
	}
	from, hi := meta.mark+1, meta.last
	for from <= hi {
		to := min(from+indexBatch-1, hi)
		args := []any{meta.gen, meta.rev, from, to}
		list, err := s.client.LRange(ctx, keys[1], from-1, to-1).Result()
		if err != nil {
			return fmt.Errorf("redis: index %s: %w", key, wrap(ctx, err))
		}
		if int64(len(list)) != to-from+1 {
			// Gone, or a replica behind the meta read.
			return fmt.Errorf("redis: index %s: read %d messages of %d..%d", key, len(list), from, to)
		}
		msgs, err := decodeRecords(list)
		if err != nil {
			return fmt.Errorf("redis: index %s: %w", key, err)
		}
		for i, m := range msgs {
			if m.Seq != from+int64(i) {
				return fmt.Errorf("redis: index %s: list index %d holds seq %d", key, from-1+int64(i), m.Seq)
			}
			args = appendIndexArgs(args, m)
		}
		reply, err := s.run(ctx, indexScript, []string{keys[0], keys[2]}, args...)
		if err != nil {
			return fmt.Errorf("redis: index %s: %w", key, err)
		}
		n, ok := reply.(int64)
		if !ok {
			return fmt.Errorf("redis: index %s: unexpected script reply %v", key, reply)
		}
		if n <= 0 {
			return nil
		}
		from, hi = to+1, max(hi, n)
	}
	return nil
}

// appendIndexArgs adds what indexScript takes of a message to args: its
// seq, the number of its index terms and the terms (none for a system
// message, see chatmem.IndexTerms).
func appendIndexArgs(args []any, m chatmem.Message) []any {
	terms := chatmem.IndexTerms(m)
	args = append(args, m.Seq, len(terms))
	for _, t := range terms {
		args = append(args, t)
	}
	return args
}
