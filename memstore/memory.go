// Package memstore is an in-process chatmem.Store: conversations live in a map
// guarded by one mutex and vanish with the process. It suits tests, demos and
// single-process bots that need no persistence.
//
// Each conversation keeps a running total of its non-system tokens and a
// running count of its user messages beside the messages, so Tail is a binary
// search plus a copy of the result: its cost follows the window, not the
// history. The messages are kept in columns of numbers and bytes (see
// messageLog), so that the garbage collector has next to nothing to walk
// however long the conversations grow, and an append writes the messages
// and the totals only: the recall index catches up when it is read (see
// catchUpIndex).
package memstore

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/storekit"
)

var (
	_ chatmem.Store        = (*Store)(nil)
	_ chatmem.Sweeper      = (*Store)(nil)
	_ chatmem.Purger       = (*Store)(nil)
	_ chatmem.SummaryStore = (*Store)(nil)
	_ chatmem.FactStore    = (*Store)(nil)
	_ chatmem.Searcher     = (*Store)(nil)
	_ chatmem.UserStore    = (*Store)(nil)
	_ chatmem.TailAppender = (*Store)(nil)
)

// Store is an in-process chatmem.Store. It is safe for concurrent use; every
// message goes in and comes out as a deep copy, so callers never share memory
// with it. The zero value is not usable; call New.
type Store struct {
	mu      sync.RWMutex
	tenants map[string]*tenant
	leases  leases // under their own mutex
	// erased holds, per user (tenant and ID), when DeleteUser last
	// erased it: an append that creates a conversation of the user for
	// work started before then is refused. It outlives the tenant.
	erased map[chatmem.Key]time.Time
	// usage is the cost ledger (chatmem.UsageStore), under usageMu.
	usageMu sync.Mutex
	usage   usageBuckets
}

// tenant holds one tenant's conversations, with their IDs kept sorted for
// List.
type tenant struct {
	convs map[string]*conversation
	ids   []string // sorted
	// users holds the tenant's users: the IDs of their conversations and
	// their facts. Nil until the first one.
	users map[string]*userRecord
}

// conversation is one conversation's metadata, messages and indexes, with
// its summary, facts and vectors: they live and die with it, so Delete,
// expiry and the sweeps need nothing more to remove them.
type conversation struct {
	meta chatmem.Conversation
	msgs messageLog // message i has Seq i+1
	// cum[i] is the sum of the non-system tokens of msgs[:i], so it has one
	// entry more than msgs and cum[len(msgs)] == meta.Tokens.
	cum []int64
	// users[i] is the number of user messages in msgs[:i+1].
	users []int64
	// system holds the indexes into msgs of the system messages.
	system []int
	// index is the recall index, brought up to date when it is read.
	index searchIndex
	// idem maps an idempotency key to the messages its append stored.
	idem map[string]applied
	// summary is the rolling summary; its CoversSeq is 0 while there is
	// none.
	summary chatmem.Summary
	// facts holds every value each fact key has had, oldest first; the
	// last is the current one. Nil until the first SetFacts.
	facts map[string][]chatmem.Fact
	// vectors maps a model to the vector of each message embedded under
	// it, by seq. Nil until the first PutVectors.
	vectors map[string]map[int64][]float32
	// factSeq is the fact extraction watermark (chatmem.FactMarker).
	factSeq int64
	// receipts are the receipts stored with messages, by seq; nil until
	// the first.
	receipts map[int64][]byte
}

// applied records which messages one idempotent append stored.
type applied struct {
	first       int64 // Seq of the first message
	count       int
	fingerprint string // the append's AppendOptions.Fingerprint
}

// New returns an empty store.
func New() *Store {
	return &Store{tenants: make(map[string]*tenant)}
}

// expired reports whether c has expired at now.
func (c *conversation) expired(now time.Time) bool {
	return !c.meta.ExpiresAt.IsZero() && !now.Before(c.meta.ExpiresAt)
}

// lookup returns the live conversation at key, or nil. The caller holds
// s.mu.
func (s *Store) lookup(key chatmem.Key, now time.Time) *conversation {
	tn := s.tenants[key.Tenant]
	if tn == nil {
		return nil
	}
	c := tn.convs[key.ID]
	if c == nil || c.expired(now) {
		return nil
	}
	return c
}

// live is lookup at the present time, which it reads only for a
// conversation that expires.
func (s *Store) live(key chatmem.Key) *conversation {
	tn := s.tenants[key.Tenant]
	if tn == nil {
		return nil
	}
	c := tn.convs[key.ID]
	if c == nil || (!c.meta.ExpiresAt.IsZero() && c.expired(time.Now())) {
		return nil
	}
	return c
}

// get validates key and ctx and returns the live conversation at key under
// the read lock, which the caller releases with s.mu.RUnlock when err is
// nil.
func (s *Store) get(ctx context.Context, key chatmem.Key) (*conversation, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := key.Validate(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	c := s.live(key)
	if c == nil {
		s.mu.RUnlock()
		return nil, notFound(key)
	}
	return c, nil
}

// getForWrite is get under the write lock, which the caller releases with
// s.mu.Unlock when err is nil.
func (s *Store) getForWrite(ctx context.Context, key chatmem.Key) (*conversation, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := key.Validate(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	c := s.live(key)
	if c == nil {
		s.mu.Unlock()
		return nil, notFound(key)
	}
	return c, nil
}

// getOfForWrite is getForWrite for the conversation created at *created,
// or for any when created is nil: another one at key is not found.
func (s *Store) getOfForWrite(ctx context.Context, key chatmem.Key, created *time.Time) (*conversation, error) {
	c, err := s.getForWrite(ctx, key)
	if err != nil || created == nil || c.meta.CreatedAt.Equal(*created) {
		return c, err
	}
	s.mu.Unlock()
	return nil, fmt.Errorf("%w: conversation %s was created at %v, not %v", chatmem.ErrNotFound, key, c.meta.CreatedAt, *created)
}

func notFound(key chatmem.Key) error {
	return fmt.Errorf("%w: conversation %s", chatmem.ErrNotFound, key)
}

// Append stores msgs at the end of the conversation; see chatmem.Store. An
// idempotency key that matched is answered before ExpectedLastSeq,
// ExpectedRevision and ExpectedTokenizer are checked, so the retry of an append that succeeded
// is a replay, not a conflict.
func (s *Store) Append(ctx context.Context, key chatmem.Key, msgs []chatmem.Message, opts chatmem.AppendOptions) (chatmem.AppendResult, error) {
	return s.append(ctx, key, msgs, opts, nil)
}

// AppendTail is Append, then System and Tail(q) of the conversation as it
// left it, under the same lock (not for a replay); see
// chatmem.TailAppender.
func (s *Store) AppendTail(ctx context.Context, key chatmem.Key, msgs []chatmem.Message, opts chatmem.AppendOptions, q chatmem.TailQuery) (chatmem.AppendResult, chatmem.TailRead, error) {
	if err := q.CheckSelects(); err != nil {
		return chatmem.AppendResult{}, chatmem.TailRead{}, err
	}
	var read chatmem.TailRead
	res, err := s.append(ctx, key, msgs, opts, func(c *conversation) {
		read = chatmem.TailRead{System: c.systemMessages(), Recent: c.tail(q)}
	})
	return res, read, err
}

// append is Append's work; then, if not nil, is called with the
// conversation after the append landed, under the write lock.
func (s *Store) append(ctx context.Context, key chatmem.Key, msgs []chatmem.Message, opts chatmem.AppendOptions, then func(*conversation)) (chatmem.AppendResult, error) {
	if err := ctx.Err(); err != nil {
		return chatmem.AppendResult{}, err
	}
	if err := storekit.CheckAppend(key, msgs, opts); err != nil {
		return chatmem.AppendResult{}, err
	}
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	for i, m := range msgs {
		if len(m.Content) > maxContent {
			return chatmem.AppendResult{}, fmt.Errorf("%w: message %d: content of %d bytes", chatmem.ErrTooLarge, i, len(m.Content))
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.lookup(key, now) // at the append's time, as the other stores
	if c != nil && opts.IdempotencyKey != "" {
		if a, ok := c.idem[opts.IdempotencyKey]; ok {
			if err := chatmem.CheckFingerprint(key, opts, a.fingerprint); err != nil {
				return chatmem.AppendResult{}, err
			}
			return chatmem.AppendResult{
				Messages:     c.msgs.slice(int(a.first-1), int(a.first-1)+a.count),
				Conversation: c.meta,
				Replayed:     true,
			}, nil
		}
	}
	var last int64
	if c != nil {
		last = c.meta.LastSeq
	}
	if opts.ExpectedLastSeq != nil && *opts.ExpectedLastSeq != last {
		return chatmem.AppendResult{}, fmt.Errorf("%w: conversation %s is at seq %d, not %d", chatmem.ErrConflict, key, last, *opts.ExpectedLastSeq)
	}
	if e := opts.ExpectedRevision; e != nil {
		var rev int64
		if c != nil {
			rev = c.meta.Revision
		}
		if rev != *e {
			return chatmem.AppendResult{}, storekit.RevisionConflict(key, rev, *e)
		}
	}
	if e := opts.ExpectedTokenizer; c != nil && e != "" && c.meta.Tokenizer != e {
		return chatmem.AppendResult{}, fmt.Errorf("%w: conversation %s is kept under tokenizer %q, not the expected %q", chatmem.ErrConflict, key, c.meta.Tokenizer, e)
	}
	if u := opts.User; c != nil && u != "" && c.meta.User != u {
		return chatmem.AppendResult{}, userConflict(key, c.meta.User, u)
	}
	if c == nil && opts.User != "" {
		if err := s.fence(chatmem.Key{Tenant: key.Tenant, ID: opts.User}, opts.Started); err != nil {
			return chatmem.AppendResult{}, fmt.Errorf("append to %s: %w", key, err)
		}
	}
	if c == nil {
		c = s.create(key, opts.Tokenizer, now)
		if opts.User != "" {
			c.meta.User = opts.User
			s.bind(key, opts.User)
		}
	}
	first := c.meta.LastSeq + 1
	for _, m := range msgs {
		if m.CreatedAt.IsZero() {
			m.CreatedAt = now
		}
		c.add(m)
	}
	added := c.msgs.slice(int(first-1), c.msgs.len())
	if c.meta.User != "" { // the user's index across conversations: usersearch.go
		terms := make([][]string, len(added))
		for i, m := range added {
			terms[i] = chatmem.IndexTerms(m)
		}
		s.tenants[key.Tenant].indexForUser(c.meta.User, key.ID, added, terms)
	}
	c.meta.UpdatedAt = now
	if opts.TTL > 0 {
		c.meta.ExpiresAt = now.Add(opts.TTL)
	}
	if opts.IdempotencyKey != "" {
		c.idem[opts.IdempotencyKey] = applied{first: first, count: len(msgs), fingerprint: opts.Fingerprint}
	}
	if opts.Receipt != nil {
		if c.receipts == nil {
			c.receipts = make(map[int64][]byte)
		}
		c.receipts[c.meta.LastSeq] = slices.Clone(opts.Receipt)
	}
	if then != nil {
		then(c)
	}
	return chatmem.AppendResult{Messages: added, Conversation: c.meta}, nil
}

// create makes an empty conversation at key, replacing an expired one. The
// caller holds the write lock.
func (s *Store) create(key chatmem.Key, tokenizer string, now time.Time) *conversation {
	tn := s.tenants[key.Tenant]
	if tn == nil {
		tn = &tenant{convs: make(map[string]*conversation)}
		s.tenants[key.Tenant] = tn
	}
	if i, found := slices.BinarySearch(tn.ids, key.ID); !found {
		tn.ids = slices.Insert(tn.ids, i, key.ID)
	}
	if old := tn.convs[key.ID]; old != nil && old.meta.User != "" {
		tn.unbind(key.ID, old.meta.User) // expired, and replaced
	}
	c := &conversation{
		meta: chatmem.Conversation{Key: key, Tokenizer: tokenizer, CreatedAt: now},
		msgs: newMessageLog(),
		cum:  []int64{0},
		idem: make(map[string]applied),
	}
	tn.convs[key.ID] = c
	return c
}

// add appends a copy of m and updates the totals. It indexes nothing: the
// recall index catches up when it is read (catchUpIndex).
func (c *conversation) add(m chatmem.Message) {
	c.meta.LastSeq++
	total := c.cum[len(c.cum)-1]
	switch m.Role {
	case chatmem.RoleSystem:
		c.system = append(c.system, c.msgs.len())
		c.meta.SystemTokens += int64(m.Tokens)
	default:
		total += int64(m.Tokens)
		c.meta.Tokens += int64(m.Tokens)
	}
	turns := c.meta.Turns
	if m.Role == chatmem.RoleUser {
		turns++
		c.meta.Turns = turns
	}
	c.msgs.add(m)
	c.cum = append(c.cum, total)
	c.users = append(c.users, turns)
}

// remove deletes the conversation at key. The caller holds the write lock.
func (s *Store) remove(key chatmem.Key) {
	tn := s.tenants[key.Tenant]
	if tn == nil {
		return
	}
	if c := tn.convs[key.ID]; c != nil && c.meta.User != "" {
		tn.unbind(key.ID, c.meta.User)
	}
	delete(tn.convs, key.ID)
	s.leases.drop(key)
	if i, found := slices.BinarySearch(tn.ids, key.ID); found {
		tn.ids = slices.Delete(tn.ids, i, i+1)
	}
	if len(tn.convs) == 0 && len(tn.users) == 0 {
		delete(s.tenants, key.Tenant)
	}
}

// Conversation returns the conversation's metadata; see chatmem.Store.
func (s *Store) Conversation(ctx context.Context, key chatmem.Key) (chatmem.Conversation, error) {
	c, err := s.get(ctx, key)
	if err != nil {
		return chatmem.Conversation{}, err
	}
	defer s.mu.RUnlock()
	return c.meta, nil
}

// List returns one page of the tenant's live conversations in ID order; see
// chatmem.Store. Finding the page start is a binary search over the
// tenant's sorted IDs.
func (s *Store) List(ctx context.Context, tenantName string, page chatmem.PageRequest) (chatmem.Page, error) {
	if err := ctx.Err(); err != nil {
		return chatmem.Page{}, err
	}
	if err := storekit.CheckTenant(tenantName); err != nil {
		return chatmem.Page{}, err
	}
	limit, err := storekit.PageLimit(page.Limit)
	if err != nil {
		return chatmem.Page{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	tn := s.tenants[tenantName]
	if tn == nil {
		return chatmem.Page{}, nil
	}
	now := time.Now()
	i := sort.SearchStrings(tn.ids, page.After)
	if i < len(tn.ids) && tn.ids[i] == page.After {
		i++
	}
	var out chatmem.Page
	for ; i < len(tn.ids); i++ {
		c := tn.convs[tn.ids[i]]
		if c.expired(now) {
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

// Delete removes the conversation with its messages and idempotency keys;
// see chatmem.Store.
func (s *Store) Delete(ctx context.Context, key chatmem.Key) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := key.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lookup(key, time.Now()) == nil {
		return notFound(key)
	}
	s.remove(key)
	return nil
}

// Tail returns the newest messages selected by q, oldest first; see
// chatmem.Store. Both limits are binary searches over the running totals, so
// the cost is O(log n) plus copying the result.
func (s *Store) Tail(ctx context.Context, key chatmem.Key, q chatmem.TailQuery) ([]chatmem.Message, error) {
	c, err := s.get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	return c.tail(q), nil
}

// tail is Tail's selection. The caller holds the lock.
func (c *conversation) tail(q chatmem.TailQuery) []chatmem.Message {
	if q.Tokens <= 0 && q.Turns <= 0 {
		return nil
	}
	n := c.msgs.len()
	start := 0
	if q.Tokens > 0 {
		// The run msgs[j:] costs cum[n]-cum[j]; the longest that fits starts
		// at the first j with cum[j] >= cum[n]-Tokens.
		need := c.cum[n] - int64(q.Tokens)
		start = max(start, sort.Search(n+1, func(j int) bool { return c.cum[j] >= need }))
	}
	if q.Turns > 0 && int64(q.Turns) <= c.meta.Turns {
		// The Turns-th newest user message is user number Turns-from-the-end;
		// users[] steps up exactly at each user message.
		nth := c.meta.Turns - int64(q.Turns) + 1
		start = max(start, sort.Search(n, func(i int) bool { return c.users[i] >= nth }))
	}
	return c.msgs.slice(start, n)
}

// Range returns up to limit messages with Seq > after, oldest first; see
// chatmem.Store.
func (s *Store) Range(ctx context.Context, key chatmem.Key, after int64, limit int) ([]chatmem.Message, error) {
	c, err := s.get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	return c.after(after, limit), nil
}

// after returns copies of up to limit of the conversation's messages with
// Seq > seq (limit <= 0: all of them). The caller holds the lock.
func (c *conversation) after(seq int64, limit int) []chatmem.Message {
	start := int(min(max(seq, 0), int64(c.msgs.len())))
	end := c.msgs.len()
	if limit > 0 {
		end = start + min(limit, end-start) // start+limit may overflow
	}
	return c.msgs.slice(start, end)
}

// ConversationSince returns the conversation's metadata and up to limit of
// its messages after seq after, under one read lock; see
// chatmem.SinceReader.
func (s *Store) ConversationSince(ctx context.Context, key chatmem.Key, after int64, limit int) (chatmem.Conversation, []chatmem.Message, error) {
	if err := key.Validate(); err != nil {
		return chatmem.Conversation{}, nil, err
	}
	if err := storekit.CheckLimit(limit); err != nil {
		return chatmem.Conversation{}, nil, err
	}
	c, err := s.get(ctx, key)
	if err != nil {
		return chatmem.Conversation{}, nil, err
	}
	defer s.mu.RUnlock()
	return c.meta, c.after(after, limit), nil
}

// System returns the conversation's system messages, oldest first; see
// chatmem.Store.
func (s *Store) System(ctx context.Context, key chatmem.Key) ([]chatmem.Message, error) {
	c, err := s.get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	return c.systemMessages(), nil
}

// systemMessages is System's answer. The caller holds the lock.
func (c *conversation) systemMessages() []chatmem.Message {
	out := make([]chatmem.Message, len(c.system))
	for i, j := range c.system {
		out[i] = c.msgs.at(j)
	}
	return out
}

// Sweep deletes the conversations that expired by now and returns how many
// it deleted. Expired conversations are not found whether swept or not;
// sweeping frees their memory.
func (s *Store) Sweep(ctx context.Context, now time.Time) (int, error) {
	return s.deleteWhere(ctx, "", func(c *conversation) bool { return c.expired(now) })
}

// PurgeInactive deletes the conversations of tenant (every tenant if empty)
// not updated since before, and returns how many it deleted.
func (s *Store) PurgeInactive(ctx context.Context, tenantName string, before time.Time) (int, error) {
	if tenantName != "" {
		if err := chatmem.ValidateID(tenantName); err != nil {
			return 0, fmt.Errorf("tenant: %w", err)
		}
	}
	return s.deleteWhere(ctx, tenantName, func(c *conversation) bool { return c.meta.UpdatedAt.Before(before) })
}

// deleteWhere deletes the conversations of tenant (every tenant if empty)
// for which drop is true, and returns how many it deleted.
func (s *Store) deleteWhere(ctx context.Context, tenantName string, drop func(*conversation) bool) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var doomed []chatmem.Key
	for name, tn := range s.tenants {
		if tenantName != "" && name != tenantName {
			continue
		}
		for _, c := range tn.convs {
			if drop(c) {
				doomed = append(doomed, c.meta.Key)
			}
		}
	}
	for _, key := range doomed {
		s.remove(key)
	}
	return len(doomed), nil
}

// Ping reports nil: an in-process store is always reachable.
func (s *Store) Ping(ctx context.Context) error { return ctx.Err() }

// Close does nothing; the store's memory is freed when it is no longer
// referenced.
func (s *Store) Close() error { return nil }
