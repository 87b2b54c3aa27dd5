package memstore

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/storekit"
)

// Facts returns the current value of every fact key of the conversation,
// ordered by key; see chatmem.FactStore.
func (s *Store) Facts(ctx context.Context, key chatmem.Key) ([]chatmem.Fact, error) {
	c, err := s.get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	out := make([]chatmem.Fact, 0, len(c.facts))
	for _, name := range slices.Sorted(maps.Keys(c.facts)) {
		h := c.facts[name]
		out = append(out, h[len(h)-1])
	}
	return out, nil
}

// FactHistory returns every value the named fact has had, in the order
// they were recorded; see chatmem.FactStore.
func (s *Store) FactHistory(ctx context.Context, key chatmem.Key, name string) ([]chatmem.Fact, error) {
	if err := chatmem.ValidateFactKey(name); err != nil {
		return nil, err
	}
	c, err := s.get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	h := c.facts[name]
	if len(h) == 0 {
		return nil, fmt.Errorf("%w: conversation %s has no fact %q", chatmem.ErrNotFound, key, name)
	}
	return slices.Clone(h), nil
}

// SetFacts records facts in order; see chatmem.FactStore. Every fact is
// validated before anything is written; a zero CreatedAt is set to the time
// of the call. An empty batch writes nothing, but still wraps
// chatmem.ErrNotFound for a missing conversation.
func (s *Store) SetFacts(ctx context.Context, key chatmem.Key, facts []chatmem.Fact) error {
	return s.setFacts(ctx, key, nil, facts)
}

// SetFactsOf is SetFacts if the conversation was created at created,
// checked under the same lock as the write; see chatmem.GenerationWriter.
// Another conversation at key (or none) wraps chatmem.ErrNotFound, after
// the errors of invalid facts.
func (s *Store) SetFactsOf(ctx context.Context, key chatmem.Key, created time.Time, facts []chatmem.Fact) error {
	return s.setFacts(ctx, key, &created, facts)
}

// setFacts is SetFacts, and SetFactsOf when created is not nil.
func (s *Store) setFacts(ctx context.Context, key chatmem.Key, created *time.Time, facts []chatmem.Fact) error {
	if err := key.Validate(); err != nil {
		return err
	}
	if err := storekit.CheckFacts(facts); err != nil {
		return err
	}
	now := time.Now()
	c, err := s.getOfForWrite(ctx, key, created)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	c.facts = recordFacts(c.facts, facts, now, false)
	return nil
}

// recordFacts appends facts, valid, to the histories of their keys in
// the owner's map m, which it makes if there is none, and returns m: a
// conversation's facts and (user) a user's alike, a user's keeping no
// scope nor timeline of its own. A zero CreatedAt is set to now.
func recordFacts(m map[string][]chatmem.Fact, facts []chatmem.Fact, now time.Time, user bool) map[string][]chatmem.Fact {
	if len(facts) == 0 {
		return m
	}
	if m == nil {
		m = make(map[string][]chatmem.Fact, len(facts))
	}
	for _, f := range facts {
		if f.CreatedAt.IsZero() {
			f.CreatedAt = now
		}
		if user {
			f.Scope, f.ValidFrom, f.ValidTo, f.SupersededBy = "", time.Time{}, time.Time{}, nil
		}
		m[f.Key] = append(m[f.Key], f)
	}
	return m
}

// DeleteFact removes the named fact and its history; see chatmem.FactStore.
func (s *Store) DeleteFact(ctx context.Context, key chatmem.Key, name string) error {
	if err := chatmem.ValidateFactKey(name); err != nil {
		return err
	}
	c, err := s.getForWrite(ctx, key)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if len(c.facts[name]) == 0 {
		return fmt.Errorf("%w: conversation %s has no fact %q", chatmem.ErrNotFound, key, name)
	}
	delete(c.facts, name)
	return nil
}
