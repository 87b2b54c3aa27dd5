package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/chatmem/chatmem"
)

// Facts returns the current value of every fact key of the conversation,
// ordered by key (byte order), from the partial index on current values:
// its cost follows the number of keys, not their history. A conversation
// without facts has none (an empty slice). It returns chatmem.ErrNotFound
// for a conversation that does not exist or has expired, and wraps
// chatmem.ErrInvalid for a bad key.
func (s *Store) Facts(ctx context.Context, key chatmem.Key) ([]chatmem.Fact, error) {
	if err := key.Validate(); err != nil {
		return nil, err
	}
	return s.readFacts(ctx, key, selectFacts, key.Tenant, key.ID)
}

// FactHistory returns every value the named fact has had, in the order they
// were recorded. It returns chatmem.ErrNotFound for a conversation that
// does not exist or has expired, or a fact that has no value, and wraps
// chatmem.ErrInvalid for a bad key or a malformed name.
func (s *Store) FactHistory(ctx context.Context, key chatmem.Key, name string) ([]chatmem.Fact, error) {
	if err := key.Validate(); err != nil {
		return nil, err
	}
	if err := chatmem.ValidateFactKey(name); err != nil {
		return nil, err
	}
	facts, err := s.readFacts(ctx, key, selectFactHistory, key.Tenant, key.ID, name)
	if err != nil {
		return nil, err
	}
	if len(facts) == 0 {
		return nil, fmt.Errorf("conversation %s has no fact %q: %w", key, name, chatmem.ErrNotFound)
	}
	return facts, nil
}

// SetFacts records facts in order, in one IMMEDIATE transaction: for each
// key of the batch the current value becomes history, and each fact is
// stored with its key's next version, the last one per key marked current
// (its place in the batch decides, not its CreatedAt). Every fact is
// validated first, with Fact.Validate and for a CreatedAt outside
// 1678..2262 (chatmem.ErrInvalid); a zero CreatedAt is set to the store's
// clock. It returns chatmem.ErrNotFound for a conversation that does not
// exist or has expired, also for an empty batch, which writes nothing.
// Nothing is written on error, and the conversation's metadata never
// changes.
func (s *Store) SetFacts(ctx context.Context, key chatmem.Key, facts []chatmem.Fact) error {
	return s.setFacts(ctx, key, nil, facts, nil)
}

// SetFactsOf is SetFacts for the conversation created at created only (see
// chatmem.GenerationWriter): the IMMEDIATE transaction that writes the
// facts reads the conversation's created_at (Unix nanoseconds) and
// compares it with created first, so another conversation at key, or
// none, returns chatmem.ErrNotFound and nothing is written. Invalid facts
// are reported first.
func (s *Store) SetFactsOf(ctx context.Context, key chatmem.Key, created time.Time, facts []chatmem.Fact) error {
	return s.setFacts(ctx, key, &created, facts, nil)
}

// setFacts is SetFacts, and SetFactsOf when created is not nil. mark, if
// not nil, runs in the write transaction once the conversation is found
// (SetFactsThrough moves the fact mark with it).
func (s *Store) setFacts(ctx context.Context, key chatmem.Key, created *time.Time, facts []chatmem.Fact, mark func(tx, chatmem.Conversation) error) error {
	if err := key.Validate(); err != nil {
		return err
	}
	now := s.now()
	facts, last, keys, err := factBatch(facts, now)
	if err != nil {
		return err
	}
	if len(facts) == 0 && mark == nil {
		return s.read(ctx, func(t tx) error {
			_, err := liveGeneration(t, key, now, created)
			return err
		})
	}
	return s.write(ctx, func(t tx) error {
		conv, err := liveGeneration(t, key, now, created)
		if err != nil {
			return err
		}
		if mark != nil {
			if err := mark(t, conv); err != nil {
				return err
			}
		}
		version := make(map[string]int64, len(keys))
		for _, k := range keys {
			var v int64 // 0: the key has no value yet
			if err := t.row(retireFact, key.Tenant, key.ID, k).Scan(&v); err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
			version[k] = v
		}
		for i, f := range facts {
			version[f.Key]++
			current := 0
			if last[f.Key] == i {
				current = 1
			}
			if _, err := t.exec(insertFact, key.Tenant, key.ID, f.Key, version[f.Key], current, f.Value, f.SourceSeq,
				f.SetBy, f.Confidence, f.CreatedAt.UnixNano()); err != nil {
				return fmt.Errorf("insert fact %d (%s): %w", i, f.Key, err)
			}
		}
		return nil
	})
}

// DeleteFact removes the named fact and its history. It returns
// chatmem.ErrNotFound for a conversation that does not exist or has
// expired, or a fact that has no value, and wraps chatmem.ErrInvalid for a
// bad key or a malformed name.
func (s *Store) DeleteFact(ctx context.Context, key chatmem.Key, name string) error {
	if err := key.Validate(); err != nil {
		return err
	}
	if err := chatmem.ValidateFactKey(name); err != nil {
		return err
	}
	now := s.now()
	return s.write(ctx, func(t tx) error {
		if _, err := liveConversation(t, key, now); err != nil {
			return err
		}
		res, err := t.exec(deleteFact, key.Tenant, key.ID, name)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return fmt.Errorf("conversation %s has no fact %q: %w", key, name, chatmem.ErrNotFound)
		}
		return nil
	})
}

// readFacts runs query, which selects factCols, in the snapshot in which
// the conversation is live.
func (s *Store) readFacts(ctx context.Context, key chatmem.Key, query string, args ...any) ([]chatmem.Fact, error) {
	now := s.now()
	var out []chatmem.Fact
	err := s.read(ctx, func(t tx) error {
		if _, err := liveConversation(t, key, now); err != nil {
			return err
		}
		rows, err := t.query(query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		out = []chatmem.Fact{}
		for rows.Next() {
			var f chatmem.Fact
			var created int64
			if err := rows.Scan(&f.Key, &f.Value, &f.SourceSeq, &f.SetBy, &f.Confidence, &created); err != nil {
				return err
			}
			f.CreatedAt = fromNanos(created)
			out = append(out, f)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// factBatch checks a batch of facts for SetFacts and SetUserFacts: each
// valid, its CreatedAt (zero: now) storable. It returns a copy of the
// batch with the times set, the index of each key's last fact, and the
// distinct keys in batch order.
func factBatch(facts []chatmem.Fact, now time.Time) ([]chatmem.Fact, map[string]int, []string, error) {
	facts = append([]chatmem.Fact(nil), facts...)
	last := make(map[string]int, len(facts))
	var keys []string
	for i := range facts {
		f := &facts[i]
		if err := f.Validate(); err != nil {
			return nil, nil, nil, fmt.Errorf("fact %d: %w", i, err)
		}
		if f.CreatedAt.IsZero() {
			f.CreatedAt = now
		}
		if err := checkTime(fmt.Sprintf("fact %d created_at", i), f.CreatedAt); err != nil {
			return nil, nil, nil, err
		}
		if _, ok := last[f.Key]; !ok {
			keys = append(keys, f.Key)
		}
		last[f.Key] = i
	}
	return facts, last, keys, nil
}
