package memstore

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/storekit"
)

// userRecord is one user of a tenant: the IDs of the conversations bound to it,
// sorted, and its facts, every value of each key oldest first.
type userRecord struct {
	convs []string
	facts map[string][]chatmem.Fact
	// index holds the messages of convs by term (usersearch.go).
	index userIndex
}

// userConflict is the error of an append naming another user than the
// conversation's.
func userConflict(key chatmem.Key, have, want string) error {
	if have == "" {
		return fmt.Errorf("%w: conversation %s belongs to no user, not to %q", chatmem.ErrConflict, key, want)
	}
	return fmt.Errorf("%w: conversation %s belongs to another user than %q", chatmem.ErrConflict, key, want)
}

// bind records that the conversation at key belongs to id. The caller
// holds the write lock and has created key's tenant.
func (s *Store) bind(key chatmem.Key, id string) {
	tn := s.tenants[key.Tenant]
	u := tn.user(id)
	if i, found := slices.BinarySearch(u.convs, key.ID); !found {
		u.convs = slices.Insert(u.convs, i, key.ID)
	}
}

// user returns the tenant's user id, creating it.
func (tn *tenant) user(id string) *userRecord {
	if tn.users == nil {
		tn.users = make(map[string]*userRecord)
	}
	u := tn.users[id]
	if u == nil {
		u = &userRecord{}
		tn.users[id] = u
	}
	return u
}

// unbind forgets that conversation conv belongs to id, with its entries in
// the user's index, and the user once nothing is left of it.
func (tn *tenant) unbind(conv, id string) {
	u := tn.users[id]
	if u == nil {
		return
	}
	if i, found := slices.BinarySearch(u.convs, conv); found {
		u.convs = slices.Delete(u.convs, i, i+1)
	}
	u.unindexForUser(conv)
	tn.dropIfEmpty(id)
}

// dropIfEmpty forgets the user id when it has no conversation and no fact.
func (tn *tenant) dropIfEmpty(id string) {
	if u := tn.users[id]; u != nil && len(u.convs) == 0 && len(u.facts) == 0 {
		delete(tn.users, id)
	}
}

// readUser validates user and returns its record (nil for none) under the
// read lock, which the caller releases with s.mu.RUnlock when err is nil.
func (s *Store) readUser(ctx context.Context, user chatmem.Key) (*userRecord, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := storekit.CheckUser(user); err != nil {
		return nil, err
	}
	s.mu.RLock()
	if tn := s.tenants[user.Tenant]; tn != nil {
		return tn.users[user.ID], nil
	}
	return nil, nil
}

// UserConversations returns one page of the user's live conversations in
// ID order; see chatmem.UserStore.
func (s *Store) UserConversations(ctx context.Context, user chatmem.Key, page chatmem.PageRequest) (chatmem.Page, error) {
	limit, err := storekit.PageLimit(page.Limit)
	if err != nil {
		return chatmem.Page{}, err
	}
	u, err := s.readUser(ctx, user)
	if err != nil {
		return chatmem.Page{}, err
	}
	defer s.mu.RUnlock()
	var out chatmem.Page
	if u == nil {
		return out, nil
	}
	tn, now := s.tenants[user.Tenant], time.Now()
	i := sort.SearchStrings(u.convs, page.After)
	if i < len(u.convs) && u.convs[i] == page.After {
		i++
	}
	for ; i < len(u.convs); i++ {
		c := tn.convs[u.convs[i]]
		if c == nil || c.expired(now) || c.meta.User != user.ID {
			continue
		}
		if len(out.Conversations) == limit {
			out.Next = out.Conversations[limit-1].Key.ID
			break
		}
		out.Conversations = append(out.Conversations, c.meta)
	}
	return out, nil
}

// UserFacts returns the current value of every user fact, ordered by key;
// see chatmem.UserStore.
func (s *Store) UserFacts(ctx context.Context, user chatmem.Key) ([]chatmem.Fact, error) {
	u, err := s.readUser(ctx, user)
	if err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	out := []chatmem.Fact{}
	if u == nil {
		return out, nil
	}
	for _, name := range slices.Sorted(maps.Keys(u.facts)) {
		h := u.facts[name]
		out = append(out, h[len(h)-1])
	}
	return out, nil
}

// UserFactHistory returns every value the named user fact has had, oldest
// first; see chatmem.UserStore.
func (s *Store) UserFactHistory(ctx context.Context, user chatmem.Key, name string) ([]chatmem.Fact, error) {
	if err := chatmem.ValidateFactKey(name); err != nil {
		return nil, err
	}
	u, err := s.readUser(ctx, user)
	if err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	if u == nil || len(u.facts[name]) == 0 {
		return nil, fmt.Errorf("%w: user %s has no fact %q", chatmem.ErrNotFound, user, name)
	}
	return slices.Clone(u.facts[name]), nil
}

// SetUserFacts records facts as the user's, in order; see
// chatmem.UserStore. A zero CreatedAt is set to the time of the call.
func (s *Store) SetUserFacts(ctx context.Context, user chatmem.Key, facts []chatmem.Fact) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := storekit.CheckUser(user); err != nil {
		return err
	}
	if err := storekit.CheckFacts(facts); err != nil || len(facts) == 0 {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.putUserFacts(user, facts, false)
	return nil
}

// SetDerivedUserFacts records p.Facts as p.User's if p.Conversation is
// live, created at p.Created and bound to p.User, or (p.Started) if the
// user's erasure record lets work started then write, under the write
// lock that deletes, erasures and appends take too; see chatmem.UserStore.
func (s *Store) SetDerivedUserFacts(ctx context.Context, p chatmem.DerivedUserFacts) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := storekit.CheckUser(p.User); err != nil {
		return err
	}
	if err := p.Check(); err != nil {
		return err
	}
	if err := storekit.CheckFacts(p.Facts); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.Conversation == "" {
		if err := s.fence(p.User, p.Started); err != nil {
			return err
		}
	} else {
		key := chatmem.Key{Tenant: p.User.Tenant, ID: p.Conversation}
		c := s.lookup(key, time.Now())
		if c == nil || !c.meta.CreatedAt.Equal(p.Created) || c.meta.User != p.User.ID {
			return fmt.Errorf("%w: conversation %s of user %s, created at %s, is gone", chatmem.ErrNotFound, key, p.User.ID, p.Created)
		}
	}
	if len(p.Facts) > 0 {
		s.putUserFacts(p.User, p.Facts, p.Replace)
	}
	return nil
}

// fence refuses (chatmem.ErrErased) the creation of a conversation bound
// to user, or a write of its facts (SetDerivedUserFacts), for work started
// at started (zero: now) if the user was erased at or after it. The caller holds the write lock, under which DeleteUser
// runs whole: no erasure is ever seen running.
func (s *Store) fence(user chatmem.Key, started time.Time) error {
	at, ok := s.erased[user]
	if started.IsZero() {
		started = time.Now()
	}
	if ok && !started.After(at) {
		return fmt.Errorf("%w: user %s was erased at %s, after the work started (%s)",
			chatmem.ErrErased, user.ID, at.UTC().Format(time.RFC3339Nano), started.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// putUserFacts records facts, valid, as the user's, after the facts it has
// or (replace) instead of them. A zero CreatedAt is set to now. The caller
// holds s.mu for writing.
func (s *Store) putUserFacts(user chatmem.Key, facts []chatmem.Fact, replace bool) {
	now := time.Now()
	tn := s.tenants[user.Tenant]
	if tn == nil {
		tn = &tenant{convs: make(map[string]*conversation)}
		s.tenants[user.Tenant] = tn
	}
	u := tn.user(user.ID)
	if replace {
		u.facts = nil
	}
	u.facts = recordFacts(u.facts, facts, now, true)
}

// DeleteUserFact removes the named user fact and its history; see
// chatmem.UserStore.
func (s *Store) DeleteUserFact(ctx context.Context, user chatmem.Key, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := storekit.CheckUser(user); err != nil {
		return err
	}
	if err := chatmem.ValidateFactKey(name); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	tn := s.tenants[user.Tenant]
	var u *userRecord
	if tn != nil {
		u = tn.users[user.ID]
	}
	if u == nil || len(u.facts[name]) == 0 {
		return fmt.Errorf("%w: user %s has no fact %q", chatmem.ErrNotFound, user, name)
	}
	delete(u.facts, name)
	tn.dropIfEmpty(user.ID)
	s.dropTenantIfEmpty(user.Tenant)
	return nil
}

// DeleteUser erases the user with every conversation bound to it, expired
// ones included; see chatmem.UserStore. It holds the write lock
// throughout, so it is done at once, and records when it was (fence).
func (s *Store) DeleteUser(ctx context.Context, user chatmem.Key) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := storekit.CheckUser(user); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.erased == nil {
		s.erased = make(map[chatmem.Key]time.Time)
	}
	s.erased[user] = time.Now()
	tn := s.tenants[user.Tenant]
	if tn == nil || tn.users[user.ID] == nil {
		return 0, nil
	}
	u := tn.users[user.ID]
	// The whole index goes with the user: dropping it here, before the
	// conversations, spares each removal its pass over the index's lists,
	// which hold every conversation's entries (quadratic in the user's
	// conversations otherwise).
	u.index = userIndex{}
	n := 0
	for _, id := range slices.Clone(u.convs) {
		if c := tn.convs[id]; c != nil && c.meta.User == user.ID {
			s.remove(chatmem.Key{Tenant: user.Tenant, ID: id})
			n++
		}
	}
	delete(tn.users, user.ID)
	s.dropTenantIfEmpty(user.Tenant)
	return n, nil
}

// dropTenantIfEmpty forgets a tenant with no conversation and no user.
// The caller holds the write lock.
func (s *Store) dropTenantIfEmpty(name string) {
	if tn := s.tenants[name]; tn != nil && len(tn.convs) == 0 && len(tn.users) == 0 {
		delete(s.tenants, name)
	}
}

var (
	_ chatmem.UserLister       = (*Store)(nil)
	_ chatmem.UserFactReplacer = (*Store)(nil)
)

// Users returns one page of the IDs of the tenant's users with a fact or a
// live conversation, in byte order; see chatmem.UserLister. It sorts the
// tenant's user IDs, so its cost follows the tenant's users.
func (s *Store) Users(ctx context.Context, tenant string, page chatmem.PageRequest) (chatmem.UserPage, error) {
	if err := ctx.Err(); err != nil {
		return chatmem.UserPage{}, err
	}
	if err := storekit.CheckTenant(tenant); err != nil {
		return chatmem.UserPage{}, err
	}
	limit, err := storekit.PageLimit(page.Limit)
	if err != nil {
		return chatmem.UserPage{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := chatmem.UserPage{Users: []string{}}
	tn := s.tenants[tenant]
	if tn == nil {
		return out, nil
	}
	now := time.Now()
	for _, id := range slices.Sorted(maps.Keys(tn.users)) {
		if id <= page.After || !tn.hasUser(id, now) {
			continue
		}
		if len(out.Users) == limit {
			out.Next = out.Users[limit-1]
			break
		}
		out.Users = append(out.Users, id)
	}
	return out, nil
}

// hasUser reports whether user id has a fact or a live conversation.
func (tn *tenant) hasUser(id string, now time.Time) bool {
	u := tn.users[id]
	if u == nil {
		return false
	}
	if len(u.facts) > 0 {
		return true
	}
	for _, conv := range u.convs {
		if c := tn.convs[conv]; c != nil && !c.expired(now) && c.meta.User == id {
			return true
		}
	}
	return false
}

// ReplaceUserFacts replaces every fact of the user with facts, under the
// write lock; see chatmem.UserFactReplacer.
func (s *Store) ReplaceUserFacts(ctx context.Context, user chatmem.Key, facts []chatmem.Fact) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := storekit.CheckReplaceFacts(user, facts); err != nil {
		return err
	}
	if err := storekit.CheckFacts(facts); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.putUserFacts(user, facts, true)
	return nil
}
