package chatmem

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"sync"
	"time"

	"github.com/chatmem/chatmem/internal/bounded"
)

// extract runs every extractor over the messages from..to and stores the
// valid facts they find; invalid ones are logged and skipped.
func (m *Memory) extract(ctx context.Context, key Key, created time.Time, from, to int64) error {
	const chunk = 1000 // messages per read and per extractor call
	for from <= to {
		msgs, rev, err := m.rangeAt(ctx, key, from-1, int(min(to-from+1, chunk)))
		if err != nil {
			return err
		}
		if len(msgs) == 0 {
			return nil // rewound meanwhile
		}
		err = m.extractFrom(ctx, key, created, rev, msgs)
		if errors.Is(err, errRewritten) {
			continue // extract them again as they are now
		}
		if err != nil {
			return err
		}
		from += chunk
	}
	return nil
}

// extractFrom runs the extractors over msgs, read at the conversation's
// Revision rev, and stores what they find. If a rewind or a redaction
// moved the Revision on meanwhile, it stores nothing and returns
// errRewritten (see lockRevision).
func (m *Memory) extractFrom(ctx context.Context, key Key, created time.Time, rev int64, msgs []Message) error {
	found, err := m.findFacts(ctx, msgs)
	if err != nil || len(found) == 0 {
		return err
	}
	conv, unlockRev, err := m.lockRevision(ctx, key, created, rev)
	if err != nil {
		return err
	}
	defer unlockRev()
	// The values compared and the writes go under the fact locks, which
	// the application's SetFacts and SetUserFacts take too: a fact the app
	// sets while the extractors ran is seen here, never overwritten by an
	// older statement of the same value (provenance stays "app").
	user := m.userIn(conv)
	defer m.lockFacts(key, user)()
	nf, err := m.newFacts(ctx, key, created, user, found)
	if err != nil {
		return err
	}
	if err := m.setUserFacts(ctx, key, created, nf); err != nil {
		return err
	}
	if len(nf.changed) > 0 {
		if err := m.setFactsOf(ctx, key, created, nf.changed); err != nil {
			m.facts.forget(key)
			return err
		}
	}
	m.facts.put(key, created, nf.now, m.now())
	return nil
}

// findFacts runs every extractor over msgs (with retries) and returns the
// valid facts they find; invalid ones are logged and skipped.
func (m *Memory) findFacts(ctx context.Context, msgs []Message) ([]Fact, error) {
	var found []Fact
	for _, x := range m.extractors {
		var facts []Fact
		err := m.retry(ctx, "extractor "+x.Name(), func(ctx context.Context) (err error) {
			facts, err = x.Extract(ctx, msgs)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("extractor %s: %w", x.Name(), err)
		}
		for _, f := range facts {
			if f.SetBy == "" {
				f.SetBy = x.Name()
			}
			if f.CreatedAt.IsZero() {
				f.CreatedAt = m.now()
			}
			if err := f.Validate(); err != nil {
				m.log.Warn("extractor returned an invalid fact; skipped", "extractor", x.Name(), "err", err)
				continue
			}
			found = append(found, f)
		}
	}
	return found, nil
}

// newFound is what newFacts makes of an extraction: the conversation's
// facts to write (changed), the user's (theirs, for user), and the values
// the conversation sees once they are stored (now).
type newFound struct {
	changed, theirs []Fact
	user            string
	now             map[string]string
}

// newFacts returns the facts of found whose value is not the one the
// conversation sees, split by scope: facts of ScopeUser go to the
// conversation's user, if it has one. A fact restated with the value it
// already has keeps its first provenance: skipping it saves a write on
// most turns, and the values this Memory last saw save the read that
// tells.
func (m *Memory) newFacts(ctx context.Context, key Key, created time.Time, user string, found []Fact) (newFound, error) {
	now, ok := m.facts.get(key, created, m.now())
	if !ok {
		current, err := m.visibleFacts(ctx, key, user)
		if err != nil {
			return newFound{}, err
		}
		now = make(map[string]string, len(current))
		for _, f := range current {
			now[f.Key] = f.Value
		}
	}
	nf := newFound{user: user, now: now}
	for _, f := range found {
		if v, ok := now[f.Key]; !ok || v != f.Value {
			now[f.Key] = f.Value
			if user != "" && ScopeOf(f.Key) == ScopeUser {
				f.Conversation = key.ID
				nf.theirs = append(nf.theirs, f)
			} else {
				nf.changed = append(nf.changed, f)
			}
		}
	}
	return nf, nil
}

// setUserFacts stores the user's share of an extraction. It comes before
// the conversation's facts (and, with a FactMarker, the mark that moves
// with them): a crash between the two extracts those messages again, and
// the values already stored are then seen and not written twice. The
// write is conditional on the conversation created at created, still
// bound to the user (UserStore.SetDerivedUserFacts): a conversation
// deleted, or erased with its user, while the extractors ran gives the
// user nothing, and ErrNotFound.
func (m *Memory) setUserFacts(ctx context.Context, key Key, created time.Time, nf newFound) error {
	if len(nf.theirs) == 0 {
		return nil
	}
	err := m.caps.users.SetDerivedUserFacts(ctx, DerivedUserFacts{
		User: Key{Tenant: key.Tenant, ID: nf.user}, Conversation: key.ID, Created: created, Facts: nf.theirs,
	})
	if err != nil {
		m.facts.forget(key)
		return err
	}
	return nil
}

// userIn returns the user conv is bound to, whose facts an extraction
// from it sets: empty for none, or when the store keeps no users.
func (m *Memory) userIn(conv Conversation) string {
	if m.caps.users == nil {
		return ""
	}
	return conv.User
}

// setFactsOf records facts in the conversation created at created, and
// wraps ErrNotFound if it was deleted (and perhaps created again) while
// the extractors ran: facts of the old conversation must not reach the
// new one. A GenerationWriter checks and writes atomically; with another
// store a delete and re-create can still slip between the check and the
// write.
func (m *Memory) setFactsOf(ctx context.Context, key Key, created time.Time, facts []Fact) error {
	if gw := m.caps.generations; gw != nil {
		return gw.SetFactsOf(ctx, key, created, facts)
	}
	if err := m.sameGeneration(ctx, key, created); err != nil {
		return err
	}
	return m.caps.facts.SetFacts(ctx, key, facts)
}

// factLocks serializes the application's fact writes with an
// extraction's compare-and-write, in this process: conv for a
// conversation's facts, user for a user's. Striped: a fixed array of
// mutexes, a key hashed to one. An extraction takes its conversation's
// then its user's (holding the conversation's rewrite lock, see
// lockRevision, which no one takes holding a fact lock); the application
// takes one: no cycle.
type factLocks struct{ conv, user lockStripes }

type lockStripes [64]sync.Mutex

// lockFacts takes the fact locks of the conversation and of its user, if
// it has one (userIn), and returns the unlock.
func (m *Memory) lockFacts(key Key, user string) func() {
	unlockConv := m.factLocks.conv.lock(key)
	if user == "" {
		return unlockConv
	}
	unlockUser := m.factLocks.user.lock(Key{Tenant: key.Tenant, ID: user})
	return func() { unlockUser(); unlockConv() }
}

// lock locks key's stripe and returns its unlock.
func (l *lockStripes) lock(key Key) func() {
	h := fnv.New32a()
	h.Write([]byte(key.Tenant))
	h.Write([]byte{0})
	h.Write([]byte(key.ID))
	mu := &l[h.Sum32()%uint32(len(l))]
	mu.Lock()
	return mu.Unlock
}

// factCacheTTL is how long the fact values an extraction saw are trusted
// before the next extraction reads them again (to see values others set).
const factCacheTTL = 2 * time.Second

// factCache keeps, per conversation, the current fact values this Memory
// last read or wrote, so an extraction that finds only known values
// neither reads nor writes. It is tied to the conversation's CreatedAt and
// dropped when this Memory sets or deletes facts itself.
type factCache struct {
	bounded.Map[Key, cachedFacts] // sized by the keys and values, roughly
}

type cachedFacts struct {
	created time.Time
	values  map[string]string
	fetched time.Time
}

func (c *factCache) get(key Key, created, now time.Time) (map[string]string, bool) {
	e, ok := c.Get(key)
	if !ok || created.IsZero() || !e.created.Equal(created) || now.Sub(e.fetched) > factCacheTTL {
		return nil, false
	}
	return maps.Clone(e.values), true // put's values are never changed after
}

func (c *factCache) put(key Key, created time.Time, values map[string]string, now time.Time) {
	if created.IsZero() {
		return
	}
	size := 128 + len(key.Tenant) + len(key.ID)
	for k, v := range values {
		size += 64 + len(k) + len(v)
	}
	c.Put(key, cachedFacts{created: created, values: values, fetched: now}, size)
}

func (c *factCache) forget(key Key) { c.Delete(key) }

// forgetAll drops every entry: a user's facts changed, and the entries of
// the user's conversations hold them (it is only a shortcut).
func (c *factCache) forgetAll() { c.Clear() }
