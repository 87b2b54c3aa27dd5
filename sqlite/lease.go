package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/chatmem/chatmem"
)

var _ chatmem.Leaser = (*Store)(nil)

// The lease statements run rarely (around a model call), so they are not
// prepared with the hot ones. Times are Unix nanoseconds on this
// machine's clock, which every process over the file shares.
const (
	// upsertLease takes the lease (?4 holder, ?5 expiry) if it is free,
	// expired or ?4's, and otherwise only marks it wanted; it returns the
	// holder after the statement (?6 is now).
	upsertLease = `INSERT INTO leases (tenant, conversation, kind, holder, expires, wanted)
		VALUES (?1, ?2, ?3, ?4, ?5, 0)
		ON CONFLICT (tenant, conversation, kind) DO UPDATE SET
			wanted  = CASE WHEN leases.expires <= ?6 THEN 0 WHEN leases.holder = excluded.holder THEN leases.wanted ELSE 1 END,
			holder  = CASE WHEN leases.expires <= ?6 OR leases.holder = excluded.holder THEN excluded.holder ELSE leases.holder END,
			expires = CASE WHEN leases.expires <= ?6 OR leases.holder = excluded.holder THEN excluded.expires ELSE leases.expires END
		RETURNING holder`

	// deleteLease releases ?4's lease and returns whether it was wanted.
	deleteLease = `DELETE FROM leases WHERE tenant = ?1 AND conversation = ?2 AND kind = ?3 AND holder = ?4 RETURNING wanted`
)

// Lease grants holder the lease named kind on the conversation at key, in
// a write of its own; see chatmem.Leaser.
func (s *Store) Lease(ctx context.Context, key chatmem.Key, kind, holder string, ttl time.Duration) (bool, error) {
	if err := chatmem.ValidateLease(key, kind, holder); err != nil {
		return false, err
	}
	if err := chatmem.ValidateLeaseTTL(ttl); err != nil {
		return false, err
	}
	var got string
	err := s.write(ctx, func(t tx) error {
		now := s.now()
		return t.tx.QueryRowContext(t.ctx, upsertLease, key.Tenant, key.ID, kind, holder, now.Add(ttl).UnixNano(), now.UnixNano()).Scan(&got)
	})
	if err != nil {
		return false, translate(ctx, err)
	}
	return got == holder, nil
}

// Release ends holder's lease named kind on the conversation at key; see
// chatmem.Leaser.
func (s *Store) Release(ctx context.Context, key chatmem.Key, kind, holder string) (bool, error) {
	if err := chatmem.ValidateLease(key, kind, holder); err != nil {
		return false, err
	}
	var wanted bool
	err := s.write(ctx, func(t tx) error {
		err := t.tx.QueryRowContext(t.ctx, deleteLease, key.Tenant, key.ID, kind, holder).Scan(&wanted)
		if errors.Is(err, sql.ErrNoRows) {
			return nil // not its lease (any more)
		}
		return err
	})
	if err != nil {
		return false, translate(ctx, err)
	}
	return wanted, nil
}

// clearLeases deletes every lease, at Open. A SQLite file has one process
// (the supported setup), so the leases in it are those of a process that
// died: a restart after a crash would otherwise wait for them to expire
// before it summarizes or extracts on their conversations. Where several
// processes share the file after all, a live one's lease lost this way
// costs at most a second model call: what the work stores is written by
// compare-and-set.
func (s *Store) clearLeases(ctx context.Context) error {
	return s.write(ctx, func(t tx) error {
		_, err := t.tx.ExecContext(t.ctx, `DELETE FROM leases`)
		return err
	})
}
