package redis

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/erasure"
	"github.com/chatmem/chatmem/storekit"
)

var (
	_ chatmem.UserStore        = (*Store)(nil)
	_ chatmem.UserLister       = (*Store)(nil)
	_ chatmem.UserFactReplacer = (*Store)(nil)
)

// A user's keys share the hash tag {<tenant>/<user>} after the part
// "user:", so they live in one slot, on a Cluster too, and never clash
// with a conversation's keys (which start with "{" right after the
// prefix) or a tenant's index ("tenant:"):
//
//	chatmem:user:{acme/u-42}:convs     sorted set: the IDs of the user's
//	                                   conversations, score 0 (ZRANGE BYLEX)
//	chatmem:user:{acme/u-42}:facts     hash: fact key -> current fact JSON
//	chatmem:user:{acme/u-42}:facthist  hash: fact key -> JSON array of values
//
// A tenant's users are listed (Users) from one more key, beside the
// tenant's index of conversations:
//
//	chatmem:tenant:acme:users          sorted set: the IDs of the tenant's
//	                                   users, score 0 (ZRANGE BYLEX)
//
// It lies in another slot than the users' keys too, so it is written as
// the user's convs index is: a user's ID is added before anything of the
// user is written (SetUserFacts, ReplaceUserFacts, an append with a user),
// so the set may name users with nothing left, never miss one that has
// something. Users checks each candidate; DeleteUser removes the ID after
// the user's keys are gone. Data written before these sets existed is
// listed by the first Users call (listUsersOnce: one SCAN for the users'
// keys, then the key chatmem:users-listed marks it done).
//
// A user's conversations lie in other slots than the user's keys, so no
// script writes both. An append with a user adds the conversation's ID to
// convs before its script runs (admitScript, which also checks the user's
// erasure record: erasure.go): the index may name conversations that do
// not exist or belong to someone else (the script refused the user, or
// the process died in between), never miss one bound to the user.
// UserConversations checks each candidate's meta; DeleteUser deletes a
// conversation only if its meta names the user, and removes its member
// after the conversation is gone, so a DeleteUser interrupted at any point
// finishes when called again.

// userKeys returns the user's keys: convs, facts, facthist.
func (s *Store) userKeys(user chatmem.Key) []string {
	base := s.prefix + ":user:{" + user.Tenant + "/" + user.ID + "}:"
	return []string{base + "convs", base + "facts", base + "facthist"}
}

// usersKey returns the key of a tenant's sorted set of user IDs.
func (s *Store) usersKey(tenant string) string {
	return s.prefix + ":tenant:" + tenant + ":users"
}

// listUser adds the user to its tenant's set of users.
func (s *Store) listUser(ctx context.Context, user chatmem.Key) error {
	return wrap(ctx, s.client.ZAdd(ctx, s.usersKey(user.Tenant), goredis.Z{Member: user.ID}).Err())
}

// UserConversations returns one page of the user's live conversations in
// ID order, from the user's index, skipping members whose conversation is
// gone or is not the user's; see chatmem.UserStore.
func (s *Store) UserConversations(ctx context.Context, user chatmem.Key, page chatmem.PageRequest) (chatmem.Page, error) {
	if err := storekit.CheckUser(user); err != nil {
		return chatmem.Page{}, err
	}
	limit, err := storekit.PageLimit(page.Limit)
	if err != nil {
		return chatmem.Page{}, err
	}
	index := s.userKeys(user)[0]
	after := page.After
	convs := []chatmem.Conversation{}
	for len(convs) <= limit {
		lo := "-"
		if after != "" {
			lo = "(" + after
		}
		want := limit + 1 - len(convs)
		ids, err := s.client.ZRangeByLex(ctx, index, &goredis.ZRangeBy{Min: lo, Max: "+", Count: int64(want)}).Result()
		if err != nil {
			return chatmem.Page{}, fmt.Errorf("redis: conversations of user %s: %w", user, wrap(ctx, err))
		}
		if len(ids) == 0 {
			break
		}
		after = ids[len(ids)-1]
		metas, err := s.metas(ctx, user.Tenant, ids)
		if err != nil {
			return chatmem.Page{}, fmt.Errorf("redis: conversations of user %s: %w", user, err)
		}
		for _, conv := range metas {
			if s.live(conv) && conv.User == user.ID {
				convs = append(convs, conv)
			}
		}
		if len(ids) < want {
			break
		}
	}
	var next string
	if len(convs) > limit {
		convs = convs[:limit]
		next = convs[limit-1].Key.ID
	}
	return chatmem.Page{Conversations: convs, Next: next}, nil
}

// metas reads the meta hashes of the tenant's conversations ids, in one
// pipeline.
func (s *Store) metas(ctx context.Context, tenant string, ids []string) ([]chatmem.Conversation, error) {
	cmds := make([]*goredis.MapStringStringCmd, len(ids))
	_, err := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGetAll(ctx, s.metaKey(chatmem.Key{Tenant: tenant, ID: id}))
		}
		return nil
	})
	if err != nil {
		return nil, wrap(ctx, err)
	}
	out := make([]chatmem.Conversation, len(ids))
	for i, id := range ids {
		if out[i], err = parseMeta(chatmem.Key{Tenant: tenant, ID: id}, cmds[i].Val()); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// UserFacts returns the current value of every user fact, ordered by key
// (byte order), with one HGETALL; see chatmem.UserStore.
func (s *Store) UserFacts(ctx context.Context, user chatmem.Key) ([]chatmem.Fact, error) {
	if err := storekit.CheckUser(user); err != nil {
		return nil, err
	}
	fields, err := s.client.HGetAll(ctx, s.userKeys(user)[1]).Result()
	if err != nil {
		return nil, fmt.Errorf("redis: facts of user %s: %w", user, wrap(ctx, err))
	}
	out := make([]chatmem.Fact, 0, len(fields))
	for name, raw := range fields {
		var f chatmem.Fact
		if err := json.Unmarshal([]byte(raw), &f); err != nil {
			return nil, fmt.Errorf("redis: facts of user %s: decode %s: %w", user, name, err)
		}
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b chatmem.Fact) int { return cmp.Compare(a.Key, b.Key) })
	return out, nil
}

// UserFactHistory returns every value the named user fact has had, oldest
// first, with one HGET; see chatmem.UserStore.
func (s *Store) UserFactHistory(ctx context.Context, user chatmem.Key, name string) ([]chatmem.Fact, error) {
	if err := storekit.CheckUser(user); err != nil {
		return nil, err
	}
	if err := chatmem.ValidateFactKey(name); err != nil {
		return nil, err
	}
	raw, err := s.client.HGet(ctx, s.userKeys(user)[2], name).Result()
	if err == goredis.Nil {
		return nil, fmt.Errorf("%w: user %s has no fact %q", chatmem.ErrNotFound, user, name)
	}
	if err != nil {
		return nil, fmt.Errorf("redis: history of fact %s of user %s: %w", name, user, wrap(ctx, err))
	}
	var out []chatmem.Fact
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		return nil, fmt.Errorf("redis: history of fact %s of user %s: %w", name, user, err)
	}
	return out, nil
}

// SetUserFacts records facts as the user's, in order, with one script;
// see chatmem.UserStore.
func (s *Store) SetUserFacts(ctx context.Context, user chatmem.Key, facts []chatmem.Fact) error {
	if err := storekit.CheckUser(user); err != nil {
		return err
	}
	args, err := s.userFactArgs(facts)
	if err != nil || len(args) == 0 {
		return err
	}
	if err := s.listUser(ctx, user); err != nil {
		return fmt.Errorf("redis: set facts of user %s: %w", user, err)
	}
	if _, err := s.run(ctx, setUserFactsScript, s.userKeys(user)[1:], args...); err != nil {
		return fmt.Errorf("redis: set facts of user %s: %w", user, err)
	}
	return nil
}

// ReplaceUserFacts deletes every fact of the user with its history and
// records facts, with one script on the user's slot; see
// chatmem.UserFactReplacer.
func (s *Store) ReplaceUserFacts(ctx context.Context, user chatmem.Key, facts []chatmem.Fact) error {
	if err := storekit.CheckReplaceFacts(user, facts); err != nil {
		return err
	}
	args, err := s.userFactArgs(facts)
	if err != nil {
		return err
	}
	if err := s.listUser(ctx, user); err != nil {
		return fmt.Errorf("redis: replace facts of user %s: %w", user, err)
	}
	if _, err := s.run(ctx, replaceUserFactsScript, s.userKeys(user)[1:], args...); err != nil {
		return fmt.Errorf("redis: replace facts of user %s: %w", user, err)
	}
	return nil
}

// userFactArgs checks facts and returns the user-fact scripts' arguments
// for them (appendFactArgs).
func (s *Store) userFactArgs(facts []chatmem.Fact) ([]any, error) {
	return appendFactArgs(make([]any, 0, 2*len(facts)), facts, s.now(), true)
}

// DeleteUserFact removes the named user fact and its history; see
// chatmem.UserStore.
func (s *Store) DeleteUserFact(ctx context.Context, user chatmem.Key, name string) error {
	if err := storekit.CheckUser(user); err != nil {
		return err
	}
	if err := chatmem.ValidateFactKey(name); err != nil {
		return err
	}
	keys := s.userKeys(user)
	var n *goredis.IntCmd
	_, err := s.client.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		p.HDel(ctx, keys[2], name)
		n = p.HDel(ctx, keys[1], name)
		return nil
	})
	if err != nil {
		return fmt.Errorf("redis: delete fact %s of user %s: %w", name, user, wrap(ctx, err))
	}
	if n.Val() == 0 {
		return fmt.Errorf("%w: user %s has no fact %q", chatmem.ErrNotFound, user, name)
	}
	return nil
}

// eraseBatch is how many index members DeleteUser reads at a time.
const eraseBatch = 100

// DeleteUser erases the user; see chatmem.UserStore. For each member of
// the user's index it deletes the conversation, expired or not, with one
// script that checks meta names the user (a member may be stale), removes
// it from its tenant's index, and only then removes the member; last it
// deletes the user's keys. Every step is safe to repeat, so after an
// error calling it again finishes.
func (s *Store) DeleteUser(ctx context.Context, user chatmem.Key) (int, error) {
	if err := storekit.CheckUser(user); err != nil {
		return 0, err
	}
	// The record goes first: from then on no append of the user is
	// admitted, and one admitted before indexed its conversation, which
	// the loop below deletes, or tombstones if it is not created yet.
	epoch, err := s.startErasure(ctx, user)
	if err != nil {
		return 0, fmt.Errorf("redis: delete user %s: %w", user, err)
	}
	s.stepErasure()
	uh := erasure.Hex(user)
	keys := s.userKeys(user)
	deleted := 0
	for {
		ids, err := s.client.ZRangeByLex(ctx, keys[0], &goredis.ZRangeBy{Min: "-", Max: "+", Count: eraseBatch}).Result()
		if err != nil {
			return deleted, fmt.Errorf("redis: delete user %s: %w", user, wrap(ctx, err))
		}
		if len(ids) == 0 {
			break
		}
		for _, id := range ids {
			key := chatmem.Key{Tenant: user.Tenant, ID: id}
			n, err := s.run(ctx, deleteUserConversationScript, append(s.convKeys(key), s.tombKey(key)), user.ID, uh, epoch, tombstoneTTL)
			if err != nil {
				return deleted, fmt.Errorf("redis: delete user %s: conversation %s: %w", user, id, err)
			}
			if n, _ := n.(int64); n == 1 {
				deleted++
				if err := s.unindex(ctx, key); err != nil {
					return deleted, fmt.Errorf("redis: delete user %s: conversation %s: %w", user, id, err)
				}
			}
			if err := s.client.ZRem(ctx, keys[0], id).Err(); err != nil {
				return deleted, fmt.Errorf("redis: delete user %s: %w", user, wrap(ctx, err))
			}
			s.stepErasure()
		}
	}
	if err := s.dropUserIndex(ctx, user); err != nil { // usersearch.go
		return deleted, fmt.Errorf("redis: delete user %s: %w", user, err)
	}
	s.stepErasure()
	if err := s.client.Del(ctx, keys...).Err(); err != nil {
		return deleted, fmt.Errorf("redis: delete user %s: %w", user, wrap(ctx, err))
	}
	s.stepErasure()
	if err := s.client.ZRem(ctx, s.usersKey(user.Tenant), user.ID).Err(); err != nil {
		return deleted, fmt.Errorf("redis: delete user %s: %w", user, wrap(ctx, err))
	}
	s.stepErasure()
	if err := s.finishErasure(ctx, user, epoch); err != nil {
		return deleted, fmt.Errorf("redis: delete user %s: %w", user, err)
	}
	return deleted, nil
}

// Users returns one page of the tenant's users with a fact or a live
// conversation, in ID order, from the tenant's set of users; see
// chatmem.UserLister. A member with facts is listed at once; one without
// is listed if a member of its convs index is a live conversation of the
// user (read a batch at a time until one is). Members with nothing left
// are skipped, and stay until DeleteUser: removing them here could race
// with a write that has listed the user and not yet written.
func (s *Store) Users(ctx context.Context, tenant string, page chatmem.PageRequest) (chatmem.UserPage, error) {
	if err := storekit.CheckTenant(tenant); err != nil {
		return chatmem.UserPage{}, err
	}
	limit, err := storekit.PageLimit(page.Limit)
	if err != nil {
		return chatmem.UserPage{}, err
	}
	if err := s.listUsersOnce(ctx); err != nil {
		return chatmem.UserPage{}, fmt.Errorf("redis: users of %s: %w", tenant, err)
	}
	index := s.usersKey(tenant)
	after := page.After
	users := []string{}
	for len(users) <= limit {
		lo := "-"
		if after != "" {
			lo = "(" + after
		}
		want := limit + 1 - len(users)
		ids, err := s.client.ZRangeByLex(ctx, index, &goredis.ZRangeBy{Min: lo, Max: "+", Count: int64(want)}).Result()
		if err != nil {
			return chatmem.UserPage{}, fmt.Errorf("redis: users of %s: %w", tenant, wrap(ctx, err))
		}
		if len(ids) == 0 {
			break
		}
		after = ids[len(ids)-1]
		facts := make([]*goredis.IntCmd, len(ids))
		_, err = s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for i, id := range ids {
				facts[i] = p.Exists(ctx, s.userKeys(chatmem.Key{Tenant: tenant, ID: id})[1])
			}
			return nil
		})
		if err != nil {
			return chatmem.UserPage{}, fmt.Errorf("redis: users of %s: %w", tenant, wrap(ctx, err))
		}
		for i, id := range ids {
			ok := facts[i].Val() > 0
			if !ok {
				if ok, err = s.hasLiveConversation(ctx, chatmem.Key{Tenant: tenant, ID: id}); err != nil {
					return chatmem.UserPage{}, fmt.Errorf("redis: users of %s: %w", tenant, err)
				}
			}
			if ok {
				users = append(users, id)
			}
		}
		if len(ids) < want {
			break
		}
	}
	var next string
	if len(users) > limit {
		users = users[:limit]
		next = users[limit-1]
	}
	return chatmem.UserPage{Users: users, Next: next}, nil
}

// usersListedKey marks a store whose tenants' sets of users name every
// user: set by listUsersOnce.
func (s *Store) usersListedKey() string { return s.prefix + ":users-listed" }

// listUsersOnce fills the tenants' sets of users from the users' keys, once
// per store: data written before the sets existed (chatmem before
// UserLister) has users in no set. It finds them with one SCAN over the
// keyspace for the users' facts and convs keys, adds each user to its
// tenant's set, then sets usersListedKey; later calls, here or in any
// process, read the key (or the process's flag) and do nothing. Users
// written meanwhile add themselves, so a SCAN that misses them loses
// nothing.
func (s *Store) listUsersOnce(ctx context.Context) error {
	if s.usersListed.Load() {
		return nil
	}
	n, err := s.client.Exists(ctx, s.usersListedKey()).Result()
	if err != nil {
		return wrap(ctx, err)
	}
	if n == 0 {
		head := s.prefix + ":user:{"
		err := s.scan(ctx, head+"*}:*", func(ctx context.Context, keys []string) error {
			var users []chatmem.Key
			for _, k := range keys {
				// <prefix>:user:{<tenant>/<user>}:<part>: IDs hold no
				// '{', '}' or '/'.
				tag, _, ok := strings.Cut(strings.TrimPrefix(k, head), "}")
				tenant, user, ok2 := strings.Cut(tag, "/")
				if ok && ok2 && chatmem.ValidateID(tenant) == nil && chatmem.ValidateUser(user) == nil {
					users = append(users, chatmem.Key{Tenant: tenant, ID: user})
				}
			}
			if _, err := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
				for _, u := range users {
					p.ZAdd(ctx, s.usersKey(u.Tenant), goredis.Z{Member: u.ID})
				}
				return nil
			}); err != nil {
				return err
			}
			// A DeleteUser that ran between the SCAN and the ZADD (its
			// keys gone, its ID removed) would leave the ID behind, a
			// trace of an erased user: an ID whose keys are gone now is
			// removed again. DeleteUser removes the ID after the keys, so
			// one running after this check removes it itself.
			exists := make([]*goredis.IntCmd, len(users))
			if _, err := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
				for i, u := range users {
					exists[i] = p.Exists(ctx, s.userKeys(u)...)
				}
				return nil
			}); err != nil {
				return err
			}
			_, err := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
				for i, u := range users {
					if exists[i].Val() == 0 {
						p.ZRem(ctx, s.usersKey(u.Tenant), u.ID)
					}
				}
				return nil
			})
			return err
		})
		if err != nil {
			return fmt.Errorf("list the users written before the users' sets: %w", err)
		}
		if err := s.client.Set(ctx, s.usersListedKey(), "1", 0).Err(); err != nil {
			return wrap(ctx, err)
		}
	}
	s.usersListed.Store(true)
	return nil
}

// hasLiveConversation reports whether a member of the user's convs index
// is a live conversation bound to the user, reading eraseBatch members at
// a time until one is.
func (s *Store) hasLiveConversation(ctx context.Context, user chatmem.Key) (bool, error) {
	index := s.userKeys(user)[0]
	lo := "-"
	for {
		ids, err := s.client.ZRangeByLex(ctx, index, &goredis.ZRangeBy{Min: lo, Max: "+", Count: eraseBatch}).Result()
		if err != nil {
			return false, wrap(ctx, err)
		}
		if len(ids) == 0 {
			return false, nil
		}
		metas, err := s.metas(ctx, user.Tenant, ids)
		if err != nil {
			return false, err
		}
		for _, conv := range metas {
			if s.live(conv) && conv.User == user.ID {
				return true, nil
			}
		}
		if len(ids) < eraseBatch {
			return false, nil
		}
		lo = "(" + ids[len(ids)-1]
	}
}

// setUserFactsScript records a user's facts in order: each becomes its
// key's current value and is appended to the key's history.
//
// KEYS: the user's facts, facthist. ARGV: one pair per fact, its key and
// its JSON. It replies 0.
var setUserFactsScript = newScript(setUserFactsLua)

// replaceUserFactsScript deletes a user's facts with their history, then
// records facts as setUserFactsScript does, in one atomic step.
//
// KEYS and ARGV: setUserFactsScript's. It replies 0.
var replaceUserFactsScript = newScript(`redis.call('DEL', KEYS[1], KEYS[2])
` + setUserFactsLua)

const setUserFactsLua = luaSetFactPairs + `
setFactPairs(KEYS[1], KEYS[2], 1)
return 0
`

// deleteUserConversationScript deletes a conversation, expired or not,
// if it belongs to the user, and leaves the erasure's tombstone unless it
// is another's: a conversation not created yet may be on its way from an
// append admitted before the erasure started (erasure.go).
//
// KEYS: all of the conversation's, then its tombstones. ARGV: the user,
// its erasure.Hex, the erasure's epoch, the tombstones' time to live in
// milliseconds. It replies 1 if it deleted the conversation, 0 if there
// is none or it is another's.
var deleteUserConversationScript = newScript(luaPrelude + `
local owner = redis.call('HGET', KEYS[1], 'user')
if owner and owner ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[12], ARGV[2], ARGV[3])
redis.call('PEXPIRE', KEYS[12], ARGV[4])
if not owner then return 0 end
dropTerms(KEYS[10])
redis.call('DEL', unpack(KEYS, 1, 11))
return 1
`)
