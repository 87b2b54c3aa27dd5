package redis

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/storekit"
)

var _ chatmem.UserSearcher = (*Store)(nil)

// The user index (chatmem.UserSearcher) lives in the user's slot, beside
// the keys of users.go:
//
//	chatmem:user:{acme/u-42}:t:<term>  sorted set, one per term: the
//	                                   messages of the user's conversations
//	                                   with the term
//	chatmem:user:{acme/u-42}:terms     set: the terms the user has keys of
//	chatmem:user:{acme/u-42}:marks     hash: conversation ID -> "<gen>:<seq>",
//	                                   how far the index holds the
//	                                   conversation's generation gen
//
// A member of a term's set is "<ns><conversation> <seq> <gen>": ns the
// three digits of the message's CreatedAt below the microsecond, seq in 20
// digits, gen the conversation's generation (meta's gen); its score is the
// CreatedAt in microseconds (exact as a double until the year 2255). Redis
// orders members of one score by their bytes, and no ID holds a byte below
// the space, so ZREVRANGEBYSCORE lists them newest first by CreatedAt, then
// conversation ID, then seq, as UserPostings promises.
//
// A conversation's keys lie in another slot than its user's, so the append
// script cannot write the user index. Append writes it after its script,
// with userIndexScript, from the messages it just stored: the script adds
// the messages after the conversation's mark and moves the mark on. If
// that step fails (the process dies, Redis is unreachable), the append
// still stands (it is logged, as the tenant's index is): the next append
// to the conversation finds its mark behind its first seq and indexes the
// messages in between first (reading them back), so the index catches up,
// and until then UserPostings misses those messages. A conversation with
// no further append stays behind. (So does, at first, a conversation
// appended to before this index existed: each later append indexes up to
// maxCatchUp of its older messages, and its own once the rest are in.)
//
// Members are not removed when their conversation ends (Delete, expiry,
// PurgeInactive): UserPostings checks each one's conversation (it must be
// live, the user's, and of the member's gen) and removes those that fail,
// so a stale member is passed over once. DeleteUser deletes the whole index
// with the user's other keys.

// userIndexKeys returns the user index's terms set and marks hash. Their
// term keys are the terms set's name with "terms" replaced by "t:<term>",
// as for a conversation (see termBase in scripts.go).
func (s *Store) userIndexKeys(user chatmem.Key) []string {
	base := s.prefix + ":user:{" + user.Tenant + "/" + user.ID + "}:"
	return []string{base + "terms", base + "marks"}
}

// userTermKey returns the key of the user's sorted set of term.
func (s *Store) userTermKey(user chatmem.Key, term string) string {
	return s.prefix + ":user:{" + user.Tenant + "/" + user.ID + "}:t:" + term
}

// userIndexScript adds a conversation's messages to its user's index.
//
// KEYS: the user's terms set and marks hash. ARGV: the conversation ID,
// its gen, the first and last seq of the messages, then per message: its
// seq, score, member, the number of its terms and the terms. It indexes
// the messages after the conversation's mark (none if the mark is of
// another gen) and replies -1, unless the mark lies before the first seq:
// then it writes nothing and replies the mark, so that the caller sends
// the messages in between too.
var userIndexScript = newScript(luaPrelude + `
local set, marks = KEYS[1], KEYS[2]
local conv, gen, first, last = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local done = 0
local m = redis.call('HGET', marks, conv)
if m then
  local g, n = string.match(m, '^(.*):(%d+)$')
  if g == gen then done = tonumber(n) end
end
if done >= last then return -1 end
if done < first - 1 then return done end
local base = termBase(set)
local i = 5
while i <= #ARGV do
  local seq, score, member, n = tonumber(ARGV[i]), ARGV[i + 1], ARGV[i + 2], tonumber(ARGV[i + 3])
  if seq > done then
    for j = 1, n do
      local t = ARGV[i + 3 + j]
      redis.call('SADD', set, t)
      redis.call('ZADD', base .. t, score, member)
    end
  end
  i = i + 4 + n
end
redis.call('HSET', marks, conv, gen .. ':' .. last)
return -1
`)

// dropUserIndexScript deletes a user's index.
//
// KEYS: the user's terms set and marks hash. It replies 0.
var dropUserIndexScript = newScript(luaPrelude + `
dropTerms(KEYS[1])
redis.call('DEL', KEYS[2])
return 0
`)

// userMember returns the member and score of seq, created at, of
// generation gen of conversation conv.
func userMember(conv string, seq int64, gen string, at time.Time) (member, score string) {
	ns := at.UnixNano()
	us := ns / 1000
	if ns%1000 < 0 {
		us--
	}
	return fmt.Sprintf("%03d%s %020d %s", ns-us*1000, conv, seq, gen), strconv.FormatInt(us, 10)
}

// parseUserMember splits a member into its conversation, seq and gen.
func parseUserMember(member string) (conv string, seq int64, gen string, ok bool) {
	if len(member) < 3 {
		return "", 0, "", false
	}
	conv, rest, ok1 := strings.Cut(member[3:], " ")
	num, gen, ok2 := strings.Cut(rest, " ")
	seq, err := strconv.ParseInt(num, 10, 64)
	return conv, seq, gen, ok1 && ok2 && err == nil
}

// indexForUser adds msgs, just appended to the conversation at key of
// generation gen (with their seqs), to the index of the conversation's
// user, first catching up on the messages the index lacks before them
// (see the comment above userIndexKeys). terms[i] are msgs[i]'s
// chatmem.IndexTerms.
func (s *Store) indexForUser(ctx context.Context, key chatmem.Key, user, gen string, msgs []chatmem.Message, terms [][]string) error {
	if len(msgs) == 0 || gen == "" {
		return nil
	}
	keys := s.userIndexKeys(chatmem.Key{Tenant: key.Tenant, ID: user})
	for range 2 {
		first, last := msgs[0].Seq, msgs[len(msgs)-1].Seq
		args := []any{key.ID, gen, first, last}
		for i, m := range msgs {
			member, score := userMember(key.ID, m.Seq, gen, m.CreatedAt)
			args = append(args, m.Seq, score, member, len(terms[i]))
			for _, t := range terms[i] {
				args = append(args, t)
			}
		}
		reply, err := s.run(ctx, userIndexScript, keys, args...)
		if err != nil {
			return err
		}
		done, _ := reply.(int64)
		if done < 0 {
			return nil
		}
		// The index is behind: read the messages in between, at most
		// maxCatchUp of them, and send them with these, or alone if there
		// are more (the appends that follow take the rest).
		gap := first - 1 - done
		missed, err := s.Range(ctx, key, done, int(min(gap, maxCatchUp)))
		if err != nil {
			return fmt.Errorf("catch up from seq %d: %w", done, err)
		}
		if int64(len(missed)) != min(gap, maxCatchUp) {
			return fmt.Errorf("catch up from seq %d: read %d messages, want %d", done, len(missed), min(gap, maxCatchUp))
		}
		more := make([][]string, len(missed))
		for i, m := range missed {
			more[i] = chatmem.IndexTerms(m)
		}
		if gap > maxCatchUp {
			msgs, terms = missed, more
			continue
		}
		msgs, terms = append(missed, msgs...), append(more, terms...)
	}
	return nil
}

// maxCatchUp bounds the messages an append indexes for the user beyond
// its own, so that one append to a conversation the user index is far
// behind on (one appended to before the index existed) stays short: each
// append then catches up this many, and indexes its own once the index
// has reached them.
const maxCatchUp = 1000

// metaGen returns the gen field of the meta in the append script's reply
// after it appended.
func metaGen(key chatmem.Key, reply any) string {
	r, _ := reply.([]any)
	if len(r) < 3 {
		return ""
	}
	_, gen, _ := appendMeta(key, r[2:])
	return gen
}

// userEntry is one member of a term's set, parsed.
type userEntry struct {
	member, conv, gen string
	seq               int64
}

// UserPostings returns, for each of terms, the newest messages of the
// user's live conversations indexed under it, at most limit (see
// chatmem.UserSearcher). It reads the terms' sets in one pipeline
// (ZREVRANGEBYSCORE ... LIMIT, O(log n + limit) each), then checks the
// conversations they name with one HMGET of meta each, in a second
// pipeline; members of conversations that ended are removed and the read
// goes on past them. So its cost follows len(terms) and limit (and the
// stale members it meets once), not the user's history. It is safe for
// concurrent use.
func (s *Store) UserPostings(ctx context.Context, user chatmem.Key, terms []string, limit int) ([][]chatmem.UserHit, error) {
	if err := storekit.CheckUser(user); err != nil {
		return nil, err
	}
	if err := storekit.CheckPostings(terms, limit); err != nil {
		return nil, err
	}
	out := make([][]chatmem.UserHit, len(terms))
	for i := range out {
		out[i] = []chatmem.UserHit{}
	}
	offset := make([]int64, len(terms))
	open := make([]bool, len(terms))
	for i := range open {
		open[i] = true
	}
	checked := map[string]bool{} // conversation and gen -> the user's and live
	// Later rounds read by offset, which members added meanwhile shift:
	// seen keeps a member read twice from being returned twice.
	seen := map[string]bool{}
	for {
		var reading []int
		for i := range terms {
			if open[i] {
				reading = append(reading, i)
			}
		}
		if len(reading) == 0 {
			return out, nil
		}
		lists := make([]*goredis.StringSliceCmd, len(terms))
		_, err := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for _, i := range reading {
				lists[i] = p.ZRevRangeByScore(ctx, s.userTermKey(user, terms[i]), &goredis.ZRangeBy{
					Min: "-inf", Max: "+inf", Offset: offset[i], Count: int64(limit - len(out[i]))})
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("redis: user postings of %s: %w", user, wrap(ctx, err))
		}
		entries := make([][]userEntry, len(terms))
		var convs []string
		for _, i := range reading {
			members := lists[i].Val()
			if int64(len(members)) < int64(limit-len(out[i])) {
				open[i] = false // the set has no more
			}
			offset[i] += int64(len(members))
			for _, m := range members {
				if seen[strconv.Itoa(i)+" "+m] {
					continue
				}
				seen[strconv.Itoa(i)+" "+m] = true
				conv, seq, gen, ok := parseUserMember(m)
				if !ok {
					return nil, fmt.Errorf("redis: user postings of %s: term %q has member %q", user, terms[i], m)
				}
				entries[i] = append(entries[i], userEntry{member: m, conv: conv, gen: gen, seq: seq})
				if _, seen := checked[conv+" "+gen]; !seen {
					checked[conv+" "+gen] = false
					convs = append(convs, conv)
				}
			}
		}
		if err := s.checkUserConversations(ctx, user, convs, checked); err != nil {
			return nil, fmt.Errorf("redis: user postings of %s: %w", user, err)
		}
		stale := map[string][]any{}
		for _, i := range reading {
			for _, e := range entries[i] {
				if checked[e.conv+" "+e.gen] {
					out[i] = append(out[i], chatmem.UserHit{Conversation: e.conv, Seq: e.seq})
				} else {
					stale[terms[i]] = append(stale[terms[i]], e.member)
					offset[i]-- // the member is removed below
				}
			}
			if len(out[i]) >= limit {
				open[i] = false
			}
		}
		if len(stale) > 0 {
			_, err := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
				for t, members := range stale {
					p.ZRem(ctx, s.userTermKey(user, t), members...)
				}
				return nil
			})
			if err != nil {
				return nil, fmt.Errorf("redis: user postings of %s: remove stale members: %w", user, wrap(ctx, err))
			}
		}
	}
}

// checkUserConversations reads the meta of each of convs in one pipeline
// and sets checked["<conv> <gen>"] to whether the conversation is live,
// the user's and of generation gen, for each key of checked naming one of
// convs.
func (s *Store) checkUserConversations(ctx context.Context, user chatmem.Key, convs []string, checked map[string]bool) error {
	if len(convs) == 0 {
		return nil
	}
	cmds := make([]*goredis.SliceCmd, len(convs))
	_, err := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, id := range convs {
			cmds[i] = p.HMGet(ctx, s.metaKey(chatmem.Key{Tenant: user.Tenant, ID: id}), "last_seq", "expires_at", "user", "gen")
		}
		return nil
	})
	if err != nil {
		return wrap(ctx, err)
	}
	now := s.now()
	for i, id := range convs {
		v := cmds[i].Val()
		m := readSearchMeta([]any{v[0], v[1], v[3]}) // last_seq, expires_at, gen
		owner, _ := v[2].(string)
		if m.live(now) && owner == user.ID {
			if _, ok := checked[id+" "+m.gen]; ok {
				checked[id+" "+m.gen] = true
			}
		}
	}
	return nil
}

// UserMessagesAt returns the messages named by hits that belong to the
// user's live conversations, ordered by conversation ID and seq, each once
// (see chatmem.UserSearcher). It checks the conversations in one pipeline
// of HMGETs, then reads each one's messages as MessagesAt does, one round
// trip per conversation. It is safe for concurrent use.
func (s *Store) UserMessagesAt(ctx context.Context, user chatmem.Key, hits []chatmem.UserHit) ([]chatmem.UserMessage, error) {
	if err := storekit.CheckUser(user); err != nil {
		return nil, err
	}
	bySeq := map[string][]int64{}
	var convs []string
	for _, h := range hits {
		if chatmem.ValidateID(h.Conversation) != nil {
			continue // names no conversation
		}
		if _, ok := bySeq[h.Conversation]; !ok {
			convs = append(convs, h.Conversation)
		}
		bySeq[h.Conversation] = append(bySeq[h.Conversation], h.Seq)
	}
	slices.Sort(convs)
	cmds := make([]*goredis.SliceCmd, len(convs))
	if len(convs) > 0 {
		_, err := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for i, id := range convs {
				cmds[i] = p.HMGet(ctx, s.metaKey(chatmem.Key{Tenant: user.Tenant, ID: id}), "last_seq", "expires_at", "user")
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("redis: user messages of %s: %w", user, wrap(ctx, err))
		}
	}
	out := []chatmem.UserMessage{}
	now := s.now()
	for i, id := range convs {
		v := cmds[i].Val()
		owner, _ := v[2].(string)
		if !readSearchMeta([]any{v[0], v[1]}).live(now) || owner != user.ID {
			continue
		}
		msgs, err := s.MessagesAt(ctx, chatmem.Key{Tenant: user.Tenant, ID: id}, bySeq[id])
		if errors.Is(err, chatmem.ErrNotFound) {
			continue // ended since
		}
		if err != nil {
			return nil, fmt.Errorf("redis: user messages of %s: %w", user, err)
		}
		for _, m := range msgs {
			out = append(out, chatmem.UserMessage{Conversation: id, Message: m})
		}
	}
	slices.SortFunc(out, func(a, b chatmem.UserMessage) int {
		return cmp.Or(cmp.Compare(a.Conversation, b.Conversation), cmp.Compare(a.Seq, b.Seq))
	})
	return out, nil
}

// dropUserIndex deletes the user's index (DeleteUser).
func (s *Store) dropUserIndex(ctx context.Context, user chatmem.Key) error {
	_, err := s.run(ctx, dropUserIndexScript, s.userIndexKeys(user))
	return err
}
