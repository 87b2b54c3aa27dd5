package redis

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/storekit"
)

var _ chatmem.FactStore = (*Store)(nil)

// A conversation's facts live in two hashes keyed by fact key: facts holds
// each key's current value as chatmem.Fact JSON, facthist every value it
// has had, as a JSON array in the order they were set.

// Facts returns the current value of every fact key, ordered by key (byte
// order), with one script run.
func (s *Store) Facts(ctx context.Context, key chatmem.Key) ([]chatmem.Fact, error) {
	if err := key.Validate(); err != nil {
		return nil, err
	}
	v, err := s.readHash(ctx, key, kFacts, "")
	if err != nil {
		return nil, fmt.Errorf("redis: facts of %s: %w", key, err)
	}
	fields := hashFields(v)
	out := make([]chatmem.Fact, 0, len(fields))
	for name, raw := range fields {
		var f chatmem.Fact
		if err := json.Unmarshal([]byte(raw), &f); err != nil {
			return nil, fmt.Errorf("redis: facts of %s: decode %s: %w", key, name, err)
		}
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b chatmem.Fact) int { return cmp.Compare(a.Key, b.Key) })
	return out, nil
}

// FactHistory returns every value the named fact has had, oldest first.
func (s *Store) FactHistory(ctx context.Context, key chatmem.Key, name string) ([]chatmem.Fact, error) {
	if err := key.Validate(); err != nil {
		return nil, err
	}
	if err := chatmem.ValidateFactKey(name); err != nil {
		return nil, err
	}
	v, err := s.readHash(ctx, key, kFactHist, name)
	if err != nil {
		return nil, fmt.Errorf("redis: history of fact %s of %s: %w", name, key, err)
	}
	raw, ok := v.(string)
	if !ok {
		return nil, fmt.Errorf("%w: conversation %s has no fact %q", chatmem.ErrNotFound, key, name)
	}
	var out []chatmem.Fact
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		return nil, fmt.Errorf("redis: history of fact %s of %s: %w", name, key, err)
	}
	return out, nil
}

// SetFacts records facts in order with one script, after validating every
// one of them; a zero CreatedAt means the store's clock. An empty batch
// writes nothing but still wraps chatmem.ErrNotFound for a missing
// conversation.
func (s *Store) SetFacts(ctx context.Context, key chatmem.Key, facts []chatmem.Fact) error {
	return s.setFacts(ctx, key, nil, facts)
}

// SetFactsOf is SetFacts for the conversation created at created only (see
// chatmem.GenerationWriter): the script compares created, in Unix
// nanoseconds as meta keeps it, with meta's created_at before it writes,
// so another conversation at key, or none, wraps chatmem.ErrNotFound and
// nothing is written. Invalid facts are reported first.
func (s *Store) SetFactsOf(ctx context.Context, key chatmem.Key, created time.Time, facts []chatmem.Fact) error {
	return s.setFacts(ctx, key, &created, facts)
}

// setFacts is SetFacts, and SetFactsOf when created is not nil.
func (s *Store) setFacts(ctx context.Context, key chatmem.Key, created *time.Time, facts []chatmem.Fact) error {
	if err := key.Validate(); err != nil {
		return err
	}
	now := s.now()
	gen, ok := generation(created)
	args, err := appendFactArgs(make([]any, 0, 2+2*len(facts)), facts, now, false, nanos(now), gen)
	if err != nil {
		return err
	}
	if !ok {
		return notFound(key)
	}
	n, err := s.run(ctx, setFactsScript, s.keysAt(key, kMeta, kFacts, kFactHist), args...)
	if err != nil {
		return fmt.Errorf("redis: set facts of %s: %w", key, err)
	}
	if n, _ := n.(int64); n < 0 {
		return notFound(key)
	}
	return nil
}

// appendFactArgs checks facts and appends to args first head, then the
// fact scripts' arguments for facts: one pair per fact, its key and its
// JSON, with a zero CreatedAt set to now. It serves a conversation's facts
// and (user) a user's, which keep no scope nor timeline of their own.
func appendFactArgs(args []any, facts []chatmem.Fact, now time.Time, user bool, head ...any) ([]any, error) {
	if err := storekit.CheckFacts(facts); err != nil {
		return nil, err
	}
	args = append(args, head...)
	for i, f := range facts {
		if f.CreatedAt.IsZero() {
			f.CreatedAt = now
		}
		if user {
			f.Scope, f.ValidFrom, f.ValidTo, f.SupersededBy = "", time.Time{}, time.Time{}, nil
		}
		b, err := json.Marshal(f)
		if err != nil {
			return nil, fmt.Errorf("fact %d: %w: %v", i, chatmem.ErrInvalid, err)
		}
		args = append(args, f.Key, b)
	}
	return args, nil
}

// DeleteFact removes the named fact and its history with one script.
func (s *Store) DeleteFact(ctx context.Context, key chatmem.Key, name string) error {
	if err := key.Validate(); err != nil {
		return err
	}
	if err := chatmem.ValidateFactKey(name); err != nil {
		return err
	}
	n, err := s.run(ctx, deleteFactScript, s.keysAt(key, kMeta, kFacts, kFactHist), nanos(s.now()), name)
	if err != nil {
		return fmt.Errorf("redis: delete fact %s of %s: %w", name, key, err)
	}
	switch n, _ := n.(int64); {
	case n < 0:
		return notFound(key)
	case n == 0:
		return fmt.Errorf("%w: conversation %s has no fact %q", chatmem.ErrNotFound, key, name)
	}
	return nil
}
