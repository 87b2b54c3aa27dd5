package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/storekit"
)

// Facts returns the current value of every fact key of the conversation,
// ordered by key (byte order), from the partial index on current values:
// its cost follows the number of keys, not their history. A conversation
// without facts has none (an empty slice). It returns chatmem.ErrNotFound
// for a conversation that does not exist or has expired.
func (s *Store) Facts(ctx context.Context, key chatmem.Key) ([]chatmem.Fact, error) {
	if err := key.Validate(); err != nil {
		return nil, err
	}
	return s.readFacts(ctx, key, selectFacts, key.Tenant, key.ID)
}

// FactHistory returns every value the named fact has had, in the order they
// were recorded. It returns chatmem.ErrNotFound for a conversation that
// does not exist or has expired, or a fact that has no value.
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
	b, err := newFactBatch(facts, now)
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
		return b.write(t, conversationFacts, key, false)
	})
}

// DeleteFact removes the named fact and its history. It returns
// chatmem.ErrNotFound for a conversation that does not exist or has
// expired, or a fact that has no value.
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

// factBatch is a batch of facts checked for writing, for a conversation's
// facts and a user's alike: facts with their times set, last the index of
// each key's last fact, keys the distinct keys in batch order.
type factBatch struct {
	facts []chatmem.Fact
	last  map[string]int
	keys  []string
}

// newFactBatch checks a batch of facts for SetFacts and SetUserFacts: each
// valid, its CreatedAt (zero: now) storable. The batch holds a copy of
// facts with the times set.
func newFactBatch(facts []chatmem.Fact, now time.Time) (*factBatch, error) {
	if err := storekit.CheckFacts(facts); err != nil {
		return nil, err
	}
	b := &factBatch{facts: append([]chatmem.Fact(nil), facts...), last: make(map[string]int, len(facts))}
	for i := range b.facts {
		f := &b.facts[i]
		if f.CreatedAt.IsZero() {
			f.CreatedAt = now
		}
		if err := checkTime(fmt.Sprintf("fact %d created_at", i), f.CreatedAt); err != nil {
			return nil, err
		}
		if _, ok := b.last[f.Key]; !ok {
			b.keys = append(b.keys, f.Key)
		}
		b.last[f.Key] = i
	}
	return b, nil
}

// factScope is where a batch of facts is written: a conversation's facts
// or a user's, each with its statements. retire makes a key's current
// value history and returns its version; insert adds one version of a
// key, and for a user's facts (user) names the fact's conversation too.
type factScope struct {
	retire, insert string
	user           bool
}

var (
	conversationFacts = factScope{retire: retireFact, insert: insertFact}
	userFacts         = factScope{retire: retireUserFact, insert: insertUserFact, user: true}
)

// write inserts the batch in t as the facts of owner (a conversation's key
// or a user's) in scope sc: the current value of each of its keys becomes
// history, and each fact is stored with its key's next version, the last
// one per key current. fresh says owner has no facts (they were just
// deleted), so there is nothing to retire.
func (b *factBatch) write(t tx, sc factScope, owner chatmem.Key, fresh bool) error {
	version := make(map[string]int64, len(b.keys)) // absent: the key has no value yet
	for _, k := range b.keys {
		if fresh {
			break // nothing to retire
		}
		var v int64
		if err := t.row(sc.retire, owner.Tenant, owner.ID, k).Scan(&v); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		version[k] = v
	}
	for i, f := range b.facts {
		version[f.Key]++
		current := 0
		if b.last[f.Key] == i {
			current = 1
		}
		args := []any{owner.Tenant, owner.ID, f.Key, version[f.Key], current, f.Value, f.SourceSeq,
			f.SetBy, f.Confidence, f.CreatedAt.UnixNano()}
		if sc.user {
			args = append(args, f.Conversation)
		}
		if _, err := t.exec(sc.insert, args...); err != nil {
			return fmt.Errorf("insert fact %d (%s): %w", i, f.Key, err)
		}
	}
	return nil
}
