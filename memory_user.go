package chatmem

import (
	"context"
	"fmt"
	"maps"
	"slices"
)

// UserConversations lists the user's live conversations ordered by ID, one
// page at a time; see UserStore.
func (m *Memory) UserConversations(ctx context.Context, user Key, page PageRequest) (Page, error) {
	us, err := m.userStore()
	if err != nil {
		return Page{}, err
	}
	return us.UserConversations(ctx, user, page)
}

// UserFacts returns the user's current facts, ordered by key, each with
// Scope ScopeUser and ValidFrom set.
func (m *Memory) UserFacts(ctx context.Context, user Key) ([]Fact, error) {
	us, err := m.userStore()
	if err != nil {
		return nil, err
	}
	facts, err := us.UserFacts(ctx, user)
	if err != nil {
		return nil, err
	}
	return withScope(facts, ScopeUser, ""), nil
}

// SetUserFacts records facts as the user's, in order (see UserStore), as
// SetFacts does for a conversation: SetBy defaults to "app", Confidence to
// 1 and CreatedAt to now. Invalid facts wrap ErrInvalid and nothing is
// written.
func (m *Memory) SetUserFacts(ctx context.Context, user Key, facts []Fact) error {
	us, err := m.userStore()
	if err != nil {
		return err
	}
	out := make([]Fact, len(facts))
	now := m.now() // one time for the batch: its facts are stated together
	for i, f := range facts {
		if f.SetBy == "" {
			f.SetBy = "app"
		}
		if f.Confidence == 0 {
			f.Confidence = 1
		}
		if f.CreatedAt.IsZero() {
			f.CreatedAt = now
		}
		out[i] = f
	}
	defer m.factLocks.user.lock(user)()
	m.facts.forgetAll()
	return us.SetUserFacts(ctx, user, out)
}

// DeleteUserFact removes the named user fact and its history; see
// UserStore.
func (m *Memory) DeleteUserFact(ctx context.Context, user Key, name string) error {
	us, err := m.userStore()
	if err != nil {
		return err
	}
	defer m.factLocks.user.lock(user)()
	m.facts.forgetAll()
	return us.DeleteUserFact(ctx, user, name)
}

// DeleteUser erases the user and everything held about them; see
// UserStore.DeleteUser. It returns how many conversations it deleted.
//
// Work on the user that is in flight cannot bring anything back once it
// returns: the store refuses to create a conversation of the user for
// work that started before (AppendOptions.Started, which the proxy, the
// MCP tools and import set), and the worker writes what it derives (user
// facts with UserStore.SetDerivedUserFacts, a conversation's facts and
// summary with its generation) only while the conversation it read is
// there. It also drops what this Memory keeps of the user's
// conversations between turns (the tail cache's messages, summaries, the
// extraction's fact values), before and after the store's erasure (a turn
// in flight may put an entry back meanwhile), so that nothing of them
// stays in this process either.
func (m *Memory) DeleteUser(ctx context.Context, user Key) (int, error) {
	us, err := m.userStore()
	if err != nil {
		return 0, err
	}
	var keys []Key
	for page := (PageRequest{Limit: 1000}); ; {
		p, err := us.UserConversations(ctx, user, page)
		if err != nil {
			return 0, err
		}
		for _, c := range p.Conversations {
			m.forget(c.Key)
			keys = append(keys, c.Key)
		}
		if p.Next == "" {
			break
		}
		page.After = p.Next
	}
	defer func() {
		for _, k := range keys {
			m.forget(k)
		}
	}()
	n, err := us.DeleteUser(ctx, user)
	if err != nil {
		return n, err
	}
	// The cost ledger keeps the tenant's counts, without the user's name
	// or their conversations'.
	switch {
	case m.ledger != nil:
		err = m.ledger.ForgetUser(ctx, user)
	case m.caps.usage != nil:
		err = m.caps.usage.AnonymizeUsage(ctx, user)
	}
	if err != nil {
		return n, fmt.Errorf("erase user %s: anonymize usage: %w", user, err)
	}
	return n, nil
}

// UserFactHistory returns every value the user's facts have had, oldest
// first, each with Scope, ValidFrom and (once superseded) ValidTo and
// SupersededBy set. With name empty it covers every key that has a value
// now; otherwise the named one (ErrNotFound if it never had one).
func (m *Memory) UserFactHistory(ctx context.Context, user Key, name string) ([]Fact, error) {
	us, err := m.userStore()
	if err != nil {
		return nil, err
	}
	return history(ctx, name, ScopeUser, "", us.UserFacts, func(ctx context.Context, name string) ([]Fact, error) {
		return us.UserFactHistory(ctx, user, name)
	}, user)
}

// FactHistory returns every value the conversation's facts have had,
// oldest first, each with Scope ScopeConversation, Conversation,
// ValidFrom and (once superseded) ValidTo and SupersededBy set. With name
// empty it covers every key that has a value now; otherwise the named one
// (ErrNotFound if it never had one).
func (m *Memory) FactHistory(ctx context.Context, key Key, name string) ([]Fact, error) {
	fs, err := m.factStore()
	if err != nil {
		return nil, err
	}
	return history(ctx, name, ScopeConversation, key.ID, fs.Facts, func(ctx context.Context, name string) ([]Fact, error) {
		return fs.FactHistory(ctx, key, name)
	}, key)
}

// history reads the history of one key (name) or of every current key.
func history(ctx context.Context, name, scope, conv string, current func(context.Context, Key) ([]Fact, error),
	of func(context.Context, string) ([]Fact, error), key Key) ([]Fact, error) {
	names := []string{name}
	if name == "" {
		facts, err := current(ctx, key)
		if err != nil {
			return nil, err
		}
		names = names[:0]
		for _, f := range facts {
			names = append(names, f.Key)
		}
	}
	histories := make([][]Fact, 0, len(names))
	for _, n := range names {
		h, err := of(ctx, n)
		if err != nil {
			return nil, err
		}
		factTimeline(h, conv)
		histories = append(histories, withScope(h, scope, conv))
	}
	return mergeHistories(histories), nil
}

// VisibleFacts returns the facts a turn of the conversation sees: the
// current facts of its user (if it has one and the store keeps users) and
// its own, ordered by key, each with its Scope; on the same key the
// conversation's wins.
func (m *Memory) VisibleFacts(ctx context.Context, key Key) ([]Fact, error) {
	conv, err := m.store.Conversation(ctx, key)
	if err != nil {
		return nil, err
	}
	return m.visibleFacts(ctx, key, conv.User)
}

// visibleFacts is VisibleFacts for a conversation of user (empty: none).
func (m *Memory) visibleFacts(ctx context.Context, key Key, user string) ([]Fact, error) {
	fs, err := m.factStore()
	if err != nil {
		return nil, err
	}
	own, err := fs.Facts(ctx, key)
	if err != nil {
		return nil, err
	}
	if user == "" || m.caps.users == nil {
		return own, nil
	}
	theirs, err := m.caps.users.UserFacts(ctx, Key{Tenant: key.Tenant, ID: user})
	if err != nil {
		return nil, err
	}
	byKey := make(map[string]Fact, len(own)+len(theirs))
	for _, f := range withScope(theirs, ScopeUser, "") {
		byKey[f.Key] = f
	}
	for _, f := range withScope(own, ScopeConversation, key.ID) {
		byKey[f.Key] = f
	}
	out := make([]Fact, 0, len(byKey))
	for _, k := range slices.Sorted(maps.Keys(byKey)) {
		out = append(out, byKey[k])
	}
	return out, nil
}

// Users returns one page of the tenant's users, in byte order of ID; see
// UserLister. It wraps ErrInvalid when the store lists no users.
func (m *Memory) Users(ctx context.Context, tenant string, page PageRequest) (UserPage, error) {
	if m.caps.userLister == nil {
		return UserPage{}, fmt.Errorf("%w: this store does not list users", ErrInvalid)
	}
	return m.caps.userLister.Users(ctx, tenant, page)
}
