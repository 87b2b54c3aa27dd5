package redis

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	goredis "github.com/redis/go-redis/v9"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/erasure"
	"github.com/chatmem/chatmem/storekit"
)

// Erasure records (chatmem.UserStore.DeleteUser) live in the user's hash
// slot, so that the script that admits an append of the user (admitScript)
// reads the record and adds the conversation to the user's index in one
// atomic step, on a Cluster too. Their keys must not name the user (an
// erased user's ID stays nowhere), so they take a hash tag of their own
// that falls in the same slot as the user's tag (slotTag), and a record is
// a field named by erasure.Hex:
//
//	chatmem:erasures:{<tag>}    hash: erasure.Hex(user) -> "epoch:running:finished"
//
// epoch counts the user's erasures, running is 1 while the last one to
// start runs, finished is when the last one completed (Unix nanoseconds, 0:
// none yet). A conversation's creation runs in the conversation's slot,
// after the admission: an erasure that starts between the two (it finds
// the conversation in the user's index, not yet created) leaves a
// tombstone in the conversation's slot, under a key of the same kind,
// named by a hash of the conversation:
//
//	chatmem:erased:{<tag>}:<hash of tenant and conversation ID>
//	                            hash: erasure.Hex(user) -> epoch, for tombstoneTTL
//
// and the append script refuses to create the conversation for the user if
// a tombstone's epoch is above the one its admission read. Only the
// admission and the creation of one append fall between, so the tombstone
// need not outlive them for long.

// tombstoneTTL is how long a tombstone is kept: far longer than the step
// between an append's admission and its script.
const tombstoneTTL = 3_600_000 // milliseconds

// slotTags holds, for each of Redis Cluster's 16384 slots, a short hash
// tag that falls in it. It is computed once, on first use.
var slotTags = sync.OnceValue(func() *[16384]string {
	var tags [16384]string
	for n, left := 0, len(tags); left > 0; n++ {
		t := strconv.Itoa(n)
		if slot := crc16(t) % 16384; tags[slot] == "" {
			tags[slot] = t
			left--
		}
	}
	return &tags
})

// slotTag returns a hash tag, without braces, that falls in the slot of the
// tag tag.
func slotTag(tag string) string {
	return slotTags()[crc16(tag)%16384]
}

// crc16 is CRC-16/XMODEM, with which Redis Cluster maps keys to slots.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// erasuresKey returns the key of the erasure records in user's slot.
func (s *Store) erasuresKey(user chatmem.Key) string {
	return s.prefix + ":erasures:{" + slotTag(user.Tenant+"/"+user.ID) + "}"
}

// tombKey returns the key of the tombstones in the conversation's slot.
func (s *Store) tombKey(key chatmem.Key) string {
	return s.prefix + ":erased:{" + slotTag(key.Tenant+"/"+key.ID) + "}:" + erasure.Hex(key)
}

// luaErasure parses an erasure record (nil: none) into epoch, running and
// finished.
const luaErasure = `
local function erasureOf(r)
  if not r then return 0, false, '0' end
  local epoch, running, finished = string.match(r, '^(%d+):(%d):(%d+)$')
  return tonumber(epoch), running == '1', finished
end
`

// admitScript admits an append bound to a user: it refuses it if an
// erasure of the user runs, or (ARGV[3] not '0') completed at or after
// the work started, and otherwise adds the conversation to the user's
// index.
//
// KEYS: the user's convs, the erasure records of its slot. ARGV: the
// conversation's ID, erasure.Hex(user), when the work started (Unix
// nanoseconds, '0': now). It replies {0, epoch, added} when admitted (added
// is 1 if the conversation was not in the index), {1, 0, 0} while an
// erasure runs, {2, finished, 0} after one that completed too late.
var admitScript = newScript(luaPrelude + luaErasure + `
local epoch, running, finished = erasureOf(redis.call('HGET', KEYS[2], ARGV[2]))
if running then return {1, 0, 0} end
if ARGV[3] ~= '0' and finished ~= '0' and not lt(finished, ARGV[3]) then return {2, finished, 0} end
return {0, epoch, redis.call('ZADD', KEYS[1], 0, ARGV[1])}
`)

// startErasureScript records that an erasure of the user runs.
//
// KEYS: the erasure records of the user's slot. ARGV: erasure.Hex(user).
// It replies the erasure's epoch.
var startErasureScript = newScript(luaErasure + `
local epoch, running, finished = erasureOf(redis.call('HGET', KEYS[1], ARGV[1]))
epoch = epoch + 1
redis.call('HSET', KEYS[1], ARGV[1], epoch .. ':1:' .. finished)
return epoch
`)

// finishErasureScript records that the erasure of epoch ARGV[2]
// completed at ARGV[3]; if another one started since, it stays running.
//
// KEYS: the erasure records of the user's slot. ARGV: erasure.Hex(user),
// the epoch, now. It replies 0.
var finishErasureScript = newScript(luaErasure + `
local epoch, running, finished = erasureOf(redis.call('HGET', KEYS[1], ARGV[1]))
local flag = '0'
if epoch ~= tonumber(ARGV[2]) and running then flag = '1' end
redis.call('HSET', KEYS[1], ARGV[1], epoch .. ':' .. flag .. ':' .. ARGV[3])
return 0
`)

// setDerivedUserFactsScript records a user's facts as setUserFactsScript
// does (or, ARGV[4] '1', replaces them as replaceUserFactsScript does) if
// no erasure of the user runs and, for a write from a conversation, the
// user's erasure record is still at the epoch read before the
// conversation was checked (ARGV[2]), or, for work started at ARGV[3]
// (not '0'), no erasure completed at or after it.
//
// KEYS: the user's facts, facthist, the erasure records of its slot. ARGV:
// erasure.Hex(user), the epoch read (empty: none), the start ('0': none), the
// replace flag, then setUserFactsScript's pairs. It replies 0, 1 (nothing
// written) while an erasure runs or if one started since the epoch, or 2
// (nothing written) if one completed at or after the start.
var setDerivedUserFactsScript = newScript(luaPrelude + luaErasure + luaSetFactPairs + `
local epoch, running, finished = erasureOf(redis.call('HGET', KEYS[3], ARGV[1]))
if running or (ARGV[2] ~= '' and epoch ~= tonumber(ARGV[2])) then return 1 end
if ARGV[3] ~= '0' and finished ~= '0' and not lt(finished, ARGV[3]) then return 2 end
if ARGV[4] == '1' then redis.call('DEL', KEYS[1], KEYS[2]) end
setFactPairs(KEYS[1], KEYS[2], 5)
return 0
`)

// admission is what admit found: the epoch of the user's erasures the
// append script compares tombstones with.
type admission struct {
	user  string // erasure.Hex of the user
	epoch int64
}

// admit admits an append of key bound to user (see admitScript) and, if the
// conversation was new to the user's index, lists the user in its tenant.
func (s *Store) admit(ctx context.Context, key chatmem.Key, user string, opts chatmem.AppendOptions) (admission, error) {
	u := chatmem.Key{Tenant: key.Tenant, ID: user}
	started := "0"
	if !opts.Started.IsZero() {
		started = nanos(opts.Started)
	}
	uh := erasure.Hex(u)
	reply, err := s.run(ctx, admitScript, []string{s.userKeys(u)[0], s.erasuresKey(u)}, key.ID, uh, started)
	if err != nil {
		return admission{}, err
	}
	r, ok := reply.([]any)
	if !ok || len(r) != 3 {
		return admission{}, fmt.Errorf("unexpected script reply %v", reply)
	}
	status, _ := r[0].(int64)
	switch status {
	case 1:
		return admission{}, fmt.Errorf("%w: user %s is being erased", chatmem.ErrErased, user)
	case 2:
		finished, _ := r[1].(string)
		return admission{}, fmt.Errorf("%w: user %s was erased at %s ns, after the work started (%s ns)", chatmem.ErrErased, user, finished, started)
	}
	epoch, _ := r[1].(int64)
	if added, _ := r[2].(int64); added == 1 {
		if err := s.listUser(ctx, u); err != nil {
			return admission{}, err
		}
	}
	return admission{user: uh, epoch: epoch}, nil
}

// startErasure records that an erasure of user runs and returns its epoch.
func (s *Store) startErasure(ctx context.Context, user chatmem.Key) (int64, error) {
	reply, err := s.run(ctx, startErasureScript, []string{s.erasuresKey(user)}, erasure.Hex(user))
	if err != nil {
		return 0, err
	}
	epoch, _ := reply.(int64)
	return epoch, nil
}

// finishErasure records that the erasure of epoch completed.
func (s *Store) finishErasure(ctx context.Context, user chatmem.Key, epoch int64) error {
	_, err := s.run(ctx, finishErasureScript, []string{s.erasuresKey(user)}, erasure.Hex(user), epoch, nanos(s.now()))
	return err
}

// SetDerivedUserFacts records p.Facts as p.User's if p.Conversation is
// live, created at p.Created and bound to p.User; see chatmem.UserStore.
// The conversation and the user lie in different slots, so it reads the
// user's erasure epoch, then the conversation's meta, then writes with a
// script that checks the epoch has not moved (and no erasure runs): an
// erasure that started after the first read fails the write, and one that
// completed before it left nothing for the second read to find. A plain
// Delete of the conversation between the second read and the script is
// not seen (the facts outlive their conversation, as SetUserFacts's do).
//
// With p.Started, the script alone decides, from the user's erasure
// record, which lies in the user's slot: the check and the write are one
// step. The record is read once before too, so that a refused write does
// not list the user (the tenant's set of users lies in another slot and
// is written first; see users.go).
func (s *Store) SetDerivedUserFacts(ctx context.Context, p chatmem.DerivedUserFacts) error {
	user := p.User
	if err := storekit.CheckUser(user); err != nil {
		return err
	}
	if err := p.Check(); err != nil {
		return err
	}
	args, err := s.userFactArgs(p.Facts)
	if err != nil {
		return err
	}
	op := fmt.Sprintf("redis: set facts of user %s from conversation %s", user, p.Conversation)
	started := "0"
	if p.Conversation == "" {
		started = nanos(p.Started)
		op = fmt.Sprintf("redis: set facts of user %s for work started at %s ns", user, started)
	}
	gone := fmt.Errorf("%w: conversation %s of user %s, created at %s, is gone", chatmem.ErrNotFound, p.Conversation, user.ID, p.Created)
	uh, records := erasure.Hex(user), s.erasuresKey(user)
	r, err := s.client.HGet(ctx, records, uh).Result()
	if err != nil && err != goredis.Nil {
		return fmt.Errorf("%s: %w", op, wrap(ctx, err))
	}
	epoch := "0"
	if err == nil {
		fields := strings.Split(r, ":")
		if len(fields) != 3 {
			return fmt.Errorf("%s: erasure record %q", op, r)
		}
		if err := derivedRefused(p, gone, fields[1] == "1", fields[2]); err != nil {
			return err
		}
		epoch = fields[0]
	}
	if p.Conversation != "" {
		key := chatmem.Key{Tenant: user.Tenant, ID: p.Conversation}
		conv, err := s.Conversation(ctx, key)
		if err != nil {
			return err
		}
		if !conv.CreatedAt.Equal(p.Created) || conv.User != user.ID {
			return gone
		}
	} else {
		epoch = "" // the start decides
	}
	if len(args) == 0 {
		return nil
	}
	if err := s.listUser(ctx, user); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	replace := "0"
	if p.Replace {
		replace = "1"
	}
	keys := s.userKeys(user)
	reply, err := s.run(ctx, setDerivedUserFactsScript, []string{keys[1], keys[2], records}, append([]any{uh, epoch, started, replace}, args...)...)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	switch n, _ := reply.(int64); {
	case n == 0:
		return nil
	case p.Conversation != "":
		return gone
	case n == 1:
		return derivedRefused(p, gone, true, "0")
	}
	return fmt.Errorf("%w: user %s was erased after the work started (%s ns)", chatmem.ErrErased, user.ID, started)
}

// derivedRefused returns the error of SetDerivedUserFacts p for a user's
// erasure record read as running and finished: gone for a conversation's
// facts while an erasure runs, ErrErased for work started at p.Started if
// an erasure runs or completed at or after it, else nil.
func derivedRefused(p chatmem.DerivedUserFacts, gone error, running bool, finished string) error {
	switch {
	case p.Conversation != "" && running:
		return gone
	case p.Conversation != "":
		return nil
	case running:
		return fmt.Errorf("%w: user %s is being erased", chatmem.ErrErased, p.User.ID)
	}
	if f, err := strconv.ParseInt(finished, 10, 64); err == nil && (f == 0 || f < p.Started.UnixNano()) {
		return nil
	}
	return fmt.Errorf("%w: user %s was erased at %s ns, after the work started (%s ns)", chatmem.ErrErased, p.User.ID, finished, nanos(p.Started))
}

// stepErasure calls the test hook between DeleteUser's steps.
func (s *Store) stepErasure() {
	if s.eraseStep != nil {
		s.eraseStep()
	}
}
