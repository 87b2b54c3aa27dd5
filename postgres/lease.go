package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/chatmem/chatmem"
)

var _ chatmem.Leaser = (*Store)(nil)

// Leases expire on the server's clock (clock_timestamp()), which every
// replica over the database shares, whatever their own clocks say.
const (
	// upsertLease takes the lease ($4 holder, $5 microseconds) if it is
	// free, expired or $4's, and otherwise only marks it wanted; it
	// returns the holder after the statement. The row lock ON CONFLICT
	// takes makes concurrent calls for one lease run one after the other.
	upsertLease = `INSERT INTO {s}.leases AS l (tenant, conversation, kind, holder, expires, wanted)
VALUES ($1, $2, $3, $4, clock_timestamp() + $5 * interval '1 microsecond', false)
ON CONFLICT (tenant, conversation, kind) DO UPDATE SET
	wanted  = CASE WHEN l.expires <= clock_timestamp() THEN false WHEN l.holder = EXCLUDED.holder THEN l.wanted ELSE true END,
	holder  = CASE WHEN l.expires <= clock_timestamp() OR l.holder = EXCLUDED.holder THEN EXCLUDED.holder ELSE l.holder END,
	expires = CASE WHEN l.expires <= clock_timestamp() OR l.holder = EXCLUDED.holder THEN EXCLUDED.expires ELSE l.expires END
RETURNING holder`

	// deleteLease releases $4's lease and returns whether it was wanted.
	deleteLease = `DELETE FROM {s}.leases WHERE tenant = $1 AND conversation = $2 AND kind = $3 AND holder = $4 RETURNING wanted`
)

// Lease grants holder the lease named kind on the conversation at key; see
// chatmem.Leaser.
func (s *Store) Lease(ctx context.Context, key chatmem.Key, kind, holder string, ttl time.Duration) (bool, error) {
	op := fmt.Sprintf("postgres: lease %s of %s", kind, key)
	if err := chatmem.ValidateLease(key, kind, holder); err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	if err := chatmem.ValidateLeaseTTL(ttl); err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	var got string
	err := s.pool.QueryRow(ctx, s.factQuery(upsertLease), key.Tenant, key.ID, kind, holder, ttl.Microseconds()).Scan(&got)
	if err != nil {
		return false, wrap(ctx, op, err)
	}
	return got == holder, nil
}

// Release ends holder's lease named kind on the conversation at key; see
// chatmem.Leaser.
func (s *Store) Release(ctx context.Context, key chatmem.Key, kind, holder string) (bool, error) {
	op := fmt.Sprintf("postgres: release lease %s of %s", kind, key)
	if err := chatmem.ValidateLease(key, kind, holder); err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	var wanted bool
	err := s.pool.QueryRow(ctx, s.factQuery(deleteLease), key.Tenant, key.ID, kind, holder).Scan(&wanted)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil // not its lease (any more)
	}
	if err != nil {
		return false, wrap(ctx, op, err)
	}
	return wanted, nil
}
