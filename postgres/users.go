package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/erasure"
	"github.com/chatmem/chatmem/storekit"
)

var (
	_ chatmem.UserStore        = (*Store)(nil)
	_ chatmem.UserLister       = (*Store)(nil)
	_ chatmem.UserFactReplacer = (*Store)(nil)
)

// userQueries are the statements of users (migrations/0005_users.sql).
type userQueries struct {
	page, lock, facts, history, retire, insert, deleteFact, eraseConversations, deleteFacts, users string
	lockShared, startErasure, finishErasure, erasure, generation                                   string
}

func buildUserQueries(schema string) userQueries {
	s := pgx.Identifier{schema}.Sanitize()
	q := func(sql string) string { return strings.ReplaceAll(sql, "{s}", s) }
	return userQueries{
		// page lists the user's ($5) live conversations with IDs after
		// $2, along conversations_user.
		page: q(`
SELECT id, tokenizer, last_seq, tokens, system_tokens, turns, created_at, updated_at, expires_at, user_id, revision
FROM {s}.conversations
WHERE tenant = $1 AND user_id = $5 AND id > $2 AND (expires_at IS NULL OR expires_at > $3)
ORDER BY id
LIMIT $4`),
		// lock serializes the writes of one user's facts (a user has no
		// row to lock): a transaction-scoped advisory lock on the user.
		lock: `SELECT pg_advisory_xact_lock(hashtextextended($1 || '/' || $2, 0))`,
		// lockShared is lock, shared: the appends that create a
		// conversation of the user take it, so that DeleteUser's
		// startErasure (under lock) waits for those in flight to commit,
		// and those after it see its record.
		lockShared: `SELECT pg_advisory_xact_lock_shared(hashtextextended($1 || '/' || $2, 0))`,
		startErasure: q(`
INSERT INTO {s}.user_erasures (uh, started, finished) VALUES ($1, $2, NULL)
ON CONFLICT (uh) DO UPDATE SET started = excluded.started, finished = NULL`),
		// finishErasure records that the erasure started at $2 completed
		// at $3, unless another one started since (which completes it).
		finishErasure: q(`UPDATE {s}.user_erasures SET finished = $3 WHERE uh = $1 AND started = $2`),
		erasure:       q(`SELECT finished FROM {s}.user_erasures WHERE uh = $1`),
		// generation reads whether conversation $2 is live at $3, created
		// at $4 and bound to user $5: SetDerivedUserFacts's check, made
		// under the user's lock (no row lock: appends take the row, then
		// the user's lock).
		generation: q(`
SELECT count(*) FROM {s}.conversations
WHERE tenant = $1 AND id = $2 AND (expires_at IS NULL OR expires_at > $3) AND created_at = $4 AND user_id = $5`),
		facts: q(`
SELECT ` + userFactColumns + `
FROM {s}.user_facts f
WHERE f.tenant = $1 AND f.user_id = $2 AND f.current
ORDER BY f.key`),
		history: q(`
SELECT ` + userFactColumns + `
FROM {s}.user_facts f
WHERE f.tenant = $1 AND f.user_id = $2 AND f.key = $3
ORDER BY f.version`),
		retire: q(`
UPDATE {s}.user_facts SET current = false
WHERE tenant = $1 AND user_id = $2 AND key = ANY($3::text[]) AND current
RETURNING key, version`),
		insert: q(`
INSERT INTO {s}.user_facts
    (tenant, user_id, key, version, current, value, source_seq, set_by, confidence, created_at, conv_id)
SELECT $1, $2, u.key, u.version, u.current, u.value, u.source_seq, u.set_by, u.confidence, u.created_at, u.conv_id
FROM unnest($3::text[], $4::bigint[], $5::boolean[], $6::text[], $7::bigint[], $8::text[],
            $9::float8[], $10::timestamptz[], $11::text[])
     AS u (key, version, current, value, source_seq, set_by, confidence, created_at, conv_id)`),
		deleteFact: q(`DELETE FROM {s}.user_facts WHERE tenant = $1 AND user_id = $2 AND key = $3`),
		// eraseConversations deletes up to $3 of the user's conversation
		// rows, expired ones too, waiting for appends that hold them.
		eraseConversations: q(`
DELETE FROM {s}.conversations c
WHERE (c.tenant, c.id) IN (SELECT tenant, id FROM {s}.conversations
                           WHERE tenant = $1 AND user_id = $2
                           ORDER BY id LIMIT $3
                           FOR UPDATE)
RETURNING c.tenant, c.id, c.num`),
		deleteFacts: q(`DELETE FROM {s}.user_facts WHERE tenant = $1 AND user_id = $2`),
		// users lists the tenant's users after $2 with a fact or a
		// conversation live at $3, $4 of them: the two ordered index
		// walks (user_facts' primary key, conversations_user) merge
		// (Merge Append, then Unique), so a page stops at its limit.
		users: q(`
SELECT DISTINCT u.user_id FROM (
    (SELECT user_id FROM {s}.user_facts WHERE tenant = $1 AND user_id > $2 ORDER BY user_id)
    UNION ALL
    (SELECT user_id FROM {s}.conversations
     WHERE tenant = $1 AND user_id > $2 AND (expires_at IS NULL OR expires_at > $3) ORDER BY user_id)
) u
ORDER BY u.user_id
LIMIT $4`),
	}
}

// userFactColumns are the columns scanUserFacts reads, in its order.
const userFactColumns = `f.key, f.value, f.source_seq, f.set_by, f.confidence, f.created_at, f.conv_id`

// userConflict is the error of an append naming another user than the
// conversation's.
func userConflict(have, want string) error {
	if have == "" {
		return fmt.Errorf("%w: the conversation belongs to no user, not to %q", chatmem.ErrConflict, want)
	}
	return fmt.Errorf("%w: the conversation belongs to another user than %q", chatmem.ErrConflict, want)
}

// UserConversations returns one page of the user's live conversations in
// ID order; see chatmem.UserStore.
func (s *Store) UserConversations(ctx context.Context, user chatmem.Key, page chatmem.PageRequest) (chatmem.Page, error) {
	op := "postgres: conversations of user " + user.String()
	if err := storekit.CheckUser(user); err != nil {
		return chatmem.Page{}, fmt.Errorf("%s: %w", op, err)
	}
	out, err := s.page(ctx, op, user.Tenant, page, s.uq.page, user.ID)
	if err == nil && out.Conversations == nil {
		out.Conversations = []chatmem.Conversation{}
	}
	return out, err
}

// UserFacts returns the current value of every user fact, ordered by key
// (byte order); see chatmem.UserStore.
func (s *Store) UserFacts(ctx context.Context, user chatmem.Key) ([]chatmem.Fact, error) {
	op := "postgres: facts of user " + user.String()
	if err := storekit.CheckUser(user); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	facts, err := s.queryUserFacts(ctx, s.uq.facts, user.Tenant, user.ID)
	if err != nil {
		return nil, wrap(ctx, op, err)
	}
	return facts, nil
}

// UserFactHistory returns every value the named user fact has had, in the
// order they were set; see chatmem.UserStore.
func (s *Store) UserFactHistory(ctx context.Context, user chatmem.Key, name string) ([]chatmem.Fact, error) {
	op := fmt.Sprintf("postgres: history of fact %q of user %s", name, user)
	if err := storekit.CheckUser(user); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if err := chatmem.ValidateFactKey(name); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	facts, err := s.queryUserFacts(ctx, s.uq.history, user.Tenant, user.ID, name)
	if err != nil {
		return nil, wrap(ctx, op, err)
	}
	if len(facts) == 0 {
		return nil, fmt.Errorf("%s: %w: no such fact", op, chatmem.ErrNotFound)
	}
	return facts, nil
}

// queryUserFacts runs sql, which selects userFactColumns.
func (s *Store) queryUserFacts(ctx context.Context, sql string, args ...any) ([]chatmem.Fact, error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	facts := []chatmem.Fact{}
	for rows.Next() {
		var f chatmem.Fact
		if err := rows.Scan(&f.Key, &f.Value, &f.SourceSeq, &f.SetBy, &f.Confidence, &f.CreatedAt, &f.Conversation); err != nil {
			return nil, err
		}
		f.CreatedAt = f.CreatedAt.UTC()
		facts = append(facts, f)
	}
	return facts, rows.Err()
}

// SetUserFacts records facts as the user's in one transaction, as SetFacts
// does for a conversation, under an advisory lock on the user; see
// chatmem.UserStore.
func (s *Store) SetUserFacts(ctx context.Context, user chatmem.Key, facts []chatmem.Fact) error {
	return s.setUserFacts(ctx, "postgres: set facts of user "+user.String(), user, facts, false, nil)
}

// SetDerivedUserFacts records p.Facts as p.User's in the transaction that,
// under the user's advisory lock, first finds p.Conversation live, created
// at p.Created and bound to p.User (chatmem.ErrNotFound if not), or
// (p.Started) reads the user's erasure record as a creating append does
// (checkErasure); see chatmem.UserStore. DeleteUser deletes the
// conversation before it takes that lock to delete the user's facts, so
// these facts either precede the erasure's last step (which deletes them)
// or find the conversation gone; and it records that it runs under the
// same lock, so a write of p.Started either precedes the erasure or sees
// its record.
func (s *Store) SetDerivedUserFacts(ctx context.Context, p chatmem.DerivedUserFacts) error {
	op := fmt.Sprintf("postgres: set facts of user %s from conversation %s", p.User, p.Conversation)
	if p.Conversation == "" {
		op = fmt.Sprintf("postgres: set facts of user %s for work started at %s", p.User, p.Started.UTC().Format(time.RFC3339Nano))
	}
	if err := p.Check(); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return s.setUserFacts(ctx, op, p.User, p.Facts, p.Replace, &p) // with no facts, the check alone
}

// ReplaceUserFacts deletes every fact of the user with its history and
// records facts, in one transaction under the user's advisory lock; see
// chatmem.UserFactReplacer.
func (s *Store) ReplaceUserFacts(ctx context.Context, user chatmem.Key, facts []chatmem.Fact) error {
	op := "postgres: replace facts of user " + user.String()
	if err := storekit.CheckReplaceFacts(user, facts); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return s.setUserFacts(ctx, op, user, facts, true, nil)
}

// setUserFacts records facts as the user's; with replace it first deletes
// every fact the user has, in the same transaction; with from set, only if
// its conversation (or the user's erasure record, for from.Started) passes
// the check of SetDerivedUserFacts.
func (s *Store) setUserFacts(ctx context.Context, op string, user chatmem.Key, facts []chatmem.Fact, replace bool, from *chatmem.DerivedUserFacts) error {
	if err := storekit.CheckUser(user); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	now := s.now()
	b, err := newFactBatch(facts, now)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	n := len(facts)
	if n == 0 && from == nil {
		return nil
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, s.uq.lock, user.Tenant, user.ID); err != nil {
			return err
		}
		if from != nil && from.Conversation == "" {
			if err := s.checkErasure(ctx, tx, user, from.Started); err != nil {
				return err
			}
			if n == 0 {
				return nil
			}
		} else if from != nil {
			var live int
			if err := tx.QueryRow(ctx, s.uq.generation, user.Tenant, from.Conversation, now, dbTime(from.Created), user.ID).Scan(&live); err != nil {
				return err
			}
			if live == 0 {
				return fmt.Errorf("%w: conversation %s of user %s, created at %s, is gone", chatmem.ErrNotFound, from.Conversation, user.ID, from.Created)
			}
			if n == 0 {
				return nil
			}
		}
		if replace {
			if _, err := tx.Exec(ctx, s.uq.deleteFacts, user.Tenant, user.ID); err != nil {
				return err
			}
		}
		return b.write(ctx, tx, user, s.uq.retire, s.uq.insert, true)
	})
	if err != nil {
		return wrap(ctx, op, err)
	}
	return nil
}

// DeleteUserFact removes the named user fact and its history; see
// chatmem.UserStore.
func (s *Store) DeleteUserFact(ctx context.Context, user chatmem.Key, name string) error {
	op := fmt.Sprintf("postgres: delete fact %q of user %s", name, user)
	if err := storekit.CheckUser(user); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := chatmem.ValidateFactKey(name); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, s.uq.lock, user.Tenant, user.ID); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, s.uq.deleteFact, user.Tenant, user.ID, name)
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

// DeleteUser erases the user; see chatmem.UserStore. It deletes the
// user's conversations (expired ones too) sweepBatch per transaction,
// each batch's messages, postings, vectors, keys, summaries and facts in
// the same transaction, then the user's facts. Each transaction leaves
// the store consistent, so calling it again after a failure finishes the
// job. The deleted rows are dead tuples until VACUUM reclaims them, as
// for every delete in PostgreSQL.
func (s *Store) DeleteUser(ctx context.Context, user chatmem.Key) (int, error) {
	op := "postgres: delete user " + user.String()
	if err := storekit.CheckUser(user); err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	// The record goes first, under the user's lock, which the appends
	// that create a conversation of the user take shared: once it
	// commits, those in flight have committed (and are among the rows
	// deleted below) and later ones are refused (fence).
	uh, started := erasure.ID(user), dbTime(s.now())
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, s.uq.lock, user.Tenant, user.ID); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, s.uq.startErasure, uh, started)
		return err
	})
	if err != nil {
		return 0, wrap(ctx, op, err)
	}
	s.stepErasure()
	n, err := s.deleteWhere(ctx, s.uq.eraseConversations, user.Tenant, user.ID, sweepBatch)
	if err != nil {
		return n, wrap(ctx, op, err)
	}
	s.stepErasure()
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, s.uq.lock, user.Tenant, user.ID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, s.uq.deleteFacts, user.Tenant, user.ID); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, s.uq.finishErasure, uh, started, dbTime(s.now()))
		return err
	})
	if err != nil {
		return n, wrap(ctx, op, err)
	}
	return n, nil
}

// stepErasure calls the test hook between DeleteUser's transactions.
func (s *Store) stepErasure() {
	if s.eraseStep != nil {
		s.eraseStep()
	}
}

// fence refuses (chatmem.ErrErased), in the transaction of an append about
// to create a conversation bound to user, an erasure of the user that
// runs or that completed at or after started. It takes the user's lock
// shared first (see DeleteUser).
func (s *Store) fence(ctx context.Context, tx pgx.Tx, user chatmem.Key, started time.Time) error {
	if _, err := tx.Exec(ctx, s.uq.lockShared, user.Tenant, user.ID); err != nil {
		return err
	}
	return s.checkErasure(ctx, tx, user, started)
}

// checkErasure refuses (chatmem.ErrErased) work started at started if an
// erasure of user runs or completed at or after it. The caller holds the
// user's lock, shared (fence) or not (SetDerivedUserFacts).
func (s *Store) checkErasure(ctx context.Context, tx pgx.Tx, user chatmem.Key, started time.Time) error {
	var finished *time.Time
	err := tx.QueryRow(ctx, s.uq.erasure, erasure.ID(user)).Scan(&finished)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil
	case err != nil:
		return err
	case finished == nil:
		return fmt.Errorf("%w: user %s is being erased", chatmem.ErrErased, user.ID)
	case !started.After(*finished):
		return fmt.Errorf("%w: user %s was erased at %s, after the work started (%s)", chatmem.ErrErased, user.ID,
			finished.UTC().Format(time.RFC3339Nano), started.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// Users returns one page of the tenant's users with a fact or a live
// conversation, in ID order (byte order: the columns are COLLATE "C");
// see chatmem.UserLister.
func (s *Store) Users(ctx context.Context, tenant string, page chatmem.PageRequest) (chatmem.UserPage, error) {
	op := "postgres: users of " + tenant
	if err := storekit.CheckTenant(tenant); err != nil {
		return chatmem.UserPage{}, fmt.Errorf("%s: %w", op, err)
	}
	limit, err := storekit.PageLimit(page.Limit)
	if err != nil {
		return chatmem.UserPage{}, fmt.Errorf("%s: %w", op, err)
	}
	rows, err := s.pool.Query(ctx, s.uq.users, tenant, page.After, s.now(), limit+1)
	if err != nil {
		return chatmem.UserPage{}, wrap(ctx, op, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return chatmem.UserPage{}, wrap(ctx, op, err)
	}
	out := chatmem.UserPage{Users: ids}
	if out.Users == nil {
		out.Users = []string{}
	}
	if len(out.Users) > limit {
		out.Users = out.Users[:limit]
		out.Next = out.Users[limit-1]
	}
	return out, nil
}
