package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/storekit"
)

// Facts returns the current value of every fact key of the conversation,
// ordered by key (byte order), from the partial index on current values:
// its cost follows the number of keys, not their history. A conversation
// without facts has none; a missing or expired one wraps
// chatmem.ErrNotFound.
func (s *Store) Facts(ctx context.Context, key chatmem.Key) ([]chatmem.Fact, error) {
	op := "postgres: facts of " + key.String()
	if err := key.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	rows, err := s.pool.Query(ctx, s.q.facts, key.Tenant, key.ID, s.now())
	if err != nil {
		return nil, wrap(ctx, op, err)
	}
	facts, err := scanFacts(rows)
	if err != nil {
		return nil, wrap(ctx, op, err)
	}
	if len(facts) == 0 {
		if err := s.live(ctx, op, key); err != nil {
			return nil, err
		}
		return []chatmem.Fact{}, nil
	}
	return facts, nil
}

// FactHistory returns every value the named fact has had, in the order
// they were set. It wraps chatmem.ErrNotFound if the conversation is
// missing or expired or the fact never had a value.
func (s *Store) FactHistory(ctx context.Context, key chatmem.Key, name string) ([]chatmem.Fact, error) {
	op := fmt.Sprintf("postgres: history of fact %q of %s", name, key)
	if err := key.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if err := chatmem.ValidateFactKey(name); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	rows, err := s.pool.Query(ctx, s.q.factHistory, key.Tenant, key.ID, s.now(), name)
	if err != nil {
		return nil, wrap(ctx, op, err)
	}
	facts, err := scanFacts(rows)
	if err != nil {
		return nil, wrap(ctx, op, err)
	}
	if len(facts) == 0 {
		if err := s.live(ctx, op, key); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%s: %w: no such fact", op, chatmem.ErrNotFound)
	}
	return facts, nil
}

// SetFacts records facts in order, in one transaction under the lock on
// the live conversation's row (chatmem.ErrNotFound if there is none): the
// current values of the batch's keys become history, and each fact is
// inserted with the next version of its key, the last one per key marked
// current. Every fact is validated first (chatmem.ErrInvalid, also for a
// SetBy that PostgreSQL's text cannot hold); a zero CreatedAt is set to the
// store's clock, and times are kept to the microsecond. An empty batch
// writes nothing but still wraps chatmem.ErrNotFound for a missing
// conversation.
func (s *Store) SetFacts(ctx context.Context, key chatmem.Key, facts []chatmem.Fact) error {
	return s.setFacts(ctx, key, nil, facts, nil)
}

// SetFactsOf is SetFacts for the conversation created at created only (see
// chatmem.GenerationWriter): the statement that locks the conversation's
// row also matches its created_at, so another conversation at key, or
// none, wraps chatmem.ErrNotFound and nothing is written. Invalid facts
// are reported first. An empty batch takes the lock too.
func (s *Store) SetFactsOf(ctx context.Context, key chatmem.Key, created time.Time, facts []chatmem.Fact) error {
	return s.setFacts(ctx, key, &created, facts, nil)
}

// setFacts is SetFacts, and SetFactsOf when created is not nil.
//
// mark, if not nil, runs in the transaction once the conversation's row is
// locked, with its last seq (SetFactsThrough moves the fact mark with it).
func (s *Store) setFacts(ctx context.Context, key chatmem.Key, created *time.Time, facts []chatmem.Fact, mark func(tx pgx.Tx, lastSeq int64) error) error {
	op := "postgres: set facts of " + key.String()
	if err := key.Validate(); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	now := s.now()
	b, err := newFactBatch(facts, now)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	gen, err := generation(op, created)
	if err != nil {
		return err
	}
	if len(facts) == 0 && created == nil {
		return s.live(ctx, op, key)
	}

	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var lastSeq int64
		if err := tx.QueryRow(ctx, s.q.lockLive, key.Tenant, key.ID, now, gen).Scan(&lastSeq); err != nil {
			return err // pgx.ErrNoRows: wrap makes it ErrNotFound
		}
		if mark != nil {
			if err := mark(tx, lastSeq); err != nil {
				return err
			}
		}
		return b.write(ctx, tx, key, s.q.retireFacts, s.q.insertFacts, false)
	})
	if err != nil {
		return wrap(ctx, op, err)
	}
	return nil
}

// DeleteFact removes the named fact and its history, under the lock on the
// live conversation's row as SetFacts takes it. It wraps
// chatmem.ErrNotFound if the conversation is missing or expired or has no
// such fact.
func (s *Store) DeleteFact(ctx context.Context, key chatmem.Key, name string) error {
	op := fmt.Sprintf("postgres: delete fact %q of %s", name, key)
	if err := key.Validate(); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := chatmem.ValidateFactKey(name); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var lastSeq int64
		if err := tx.QueryRow(ctx, s.q.lockLive, key.Tenant, key.ID, s.now(), nil).Scan(&lastSeq); err != nil {
			return err // pgx.ErrNoRows: wrap makes it ErrNotFound
		}
		tag, err := tx.Exec(ctx, s.q.deleteFact, key.Tenant, key.ID, name)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("%w: no such fact", chatmem.ErrNotFound)
		}
		return nil
	})
	if err != nil {
		return wrap(ctx, op, err)
	}
	return nil
}

// scanFacts reads rows of factColumns.
func scanFacts(rows pgx.Rows) ([]chatmem.Fact, error) {
	defer rows.Close()
	var facts []chatmem.Fact
	for rows.Next() {
		var f chatmem.Fact
		if err := rows.Scan(&f.Key, &f.Value, &f.SourceSeq, &f.SetBy, &f.Confidence, &f.CreatedAt); err != nil {
			return nil, err
		}
		f.CreatedAt = f.CreatedAt.UTC()
		facts = append(facts, f)
	}
	return facts, rows.Err()
}

// factBatch is a batch of facts as the statements that write them take
// it, one array per column, for a conversation's facts and a user's alike.
type factBatch struct {
	keys, values, setBy, convs []string
	sourceSeq                  []int64
	confidence                 []float64
	createdAt                  []time.Time
	last                       map[string]int // index of each key's last fact
}

// newFactBatch checks facts (chatmem.ErrInvalid, also for a SetBy that
// PostgreSQL's text cannot hold) and returns them as a batch, a zero
// CreatedAt set to now and every time kept to the microsecond.
func newFactBatch(facts []chatmem.Fact, now time.Time) (*factBatch, error) {
	if err := storekit.CheckFacts(facts); err != nil {
		return nil, err
	}
	n := len(facts)
	b := &factBatch{
		keys: make([]string, n), values: make([]string, n), setBy: make([]string, n), convs: make([]string, n),
		sourceSeq: make([]int64, n), confidence: make([]float64, n), createdAt: make([]time.Time, n),
		last: make(map[string]int, n),
	}
	for i, f := range facts {
		if err := storableText("set_by", f.SetBy); err != nil {
			return nil, fmt.Errorf("fact %d: %w", i, err)
		}
		b.keys[i], b.values[i], b.setBy[i], b.convs[i] = f.Key, f.Value, f.SetBy, f.Conversation
		b.sourceSeq[i], b.confidence[i] = f.SourceSeq, f.Confidence
		if f.CreatedAt.IsZero() {
			f.CreatedAt = now
		}
		b.createdAt[i] = dbTime(f.CreatedAt)
		b.last[f.Key] = i
	}
	return b, nil
}

// write inserts the batch, in tx, as the facts of owner (a conversation's
// key or a user's), with the statements of their scope: retire makes the
// current values of the batch's keys history and returns each key's newest
// version, and insert adds the batch's facts after them, the last one per
// key current. A user's facts name their conversation; a conversation's
// do not (insert takes the column only for a user's).
func (b *factBatch) write(ctx context.Context, tx pgx.Tx, owner chatmem.Key, retire, insert string, user bool) error {
	if len(b.keys) == 0 {
		return nil
	}
	distinct := make([]string, 0, len(b.last))
	for k := range b.last {
		distinct = append(distinct, k)
	}
	rows, err := tx.Query(ctx, retire, owner.Tenant, owner.ID, distinct)
	if err != nil {
		return err
	}
	versions, current, err := nextVersions(rows, b.keys, b.last)
	if err != nil {
		return err
	}
	args := []any{owner.Tenant, owner.ID, b.keys, versions, current, b.values, b.sourceSeq, b.setBy, b.confidence, b.createdAt}
	if user {
		args = append(args, b.convs)
	}
	_, err = tx.Exec(ctx, insert, args...)
	return err
}

// nextVersions numbers a batch of facts after the versions rows returns
// (each retired key and its newest version): keys[i] is the key of fact i,
// last the index of each key's last fact, which becomes current.
func nextVersions(rows pgx.Rows, keys []string, last map[string]int) ([]int64, []bool, error) {
	version := make(map[string]int64, len(last))
	var k string
	var v int64
	if _, err := pgx.ForEachRow(rows, []any{&k, &v}, func() error {
		version[k] = v
		return nil
	}); err != nil {
		return nil, nil, err
	}
	versions := make([]int64, len(keys))
	current := make([]bool, len(keys))
	for i, k := range keys {
		version[k]++
		versions[i] = version[k]
		current[i] = last[k] == i
	}
	return versions, current, nil
}
