package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/erasure"
	"github.com/chatmem/chatmem/storekit"
)

var (
	_ chatmem.UserStore        = (*Store)(nil)
	_ chatmem.UserLister       = (*Store)(nil)
	_ chatmem.UserFactReplacer = (*Store)(nil)
)

// Users (migrations/0005_users.sql): conversations.user_id binds a
// conversation to a user, user_facts holds the users' facts.
const (
	// selectUserPage lists the user's (?5) live conversations with IDs
	// after ?2, along conversations_user; ?3 is now, ?4 the limit.
	// Without INDEXED BY the planner may take the primary key, which
	// walks every conversation of the tenant after ?2.
	selectUserPage = `SELECT ` + conversationCols + ` FROM conversations INDEXED BY conversations_user
		WHERE tenant = ?1 AND user_id = ?5 AND id > ?2 AND ` + liveCond + ` ORDER BY id LIMIT ?4`

	// selectUserConversationIDs reads up to ?3 IDs of the user's (?2)
	// conversations, expired ones included, for DeleteUser.
	selectUserConversationIDs = `SELECT id FROM conversations
		WHERE tenant = ?1 AND user_id = ?2 ORDER BY id LIMIT ?3`

	// userFactCols are the columns readUserFacts reads, in its order.
	userFactCols = `key, value, source_seq, set_by, confidence, created_at, conv_id`

	// selectUserFacts reads the current value of every key, in key
	// order, along user_facts_current (see selectFacts for INDEXED BY).
	selectUserFacts = `SELECT ` + userFactCols + ` FROM user_facts INDEXED BY user_facts_current
		WHERE tenant = ?1 AND user_id = ?2 AND current = 1 ORDER BY key`

	// selectUserFactHistory reads every value of key ?3, oldest first.
	selectUserFactHistory = `SELECT ` + userFactCols + ` FROM user_facts
		WHERE tenant = ?1 AND user_id = ?2 AND key = ?3 ORDER BY version`

	// retireUserFact makes key ?3's current value history and returns its
	// version (no row: the key has no value).
	retireUserFact = `UPDATE user_facts SET current = 0
		WHERE tenant = ?1 AND user_id = ?2 AND key = ?3 AND current = 1 RETURNING version`

	insertUserFact = `INSERT INTO user_facts (tenant, user_id, key, version, current, value, source_seq, set_by,
		confidence, created_at, conv_id)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)`

	// deleteUserFact deletes key ?3 with its history.
	deleteUserFact = `DELETE FROM user_facts WHERE tenant = ?1 AND user_id = ?2 AND key = ?3`

	// optimizeTerms merges the lexical index into one segment, dropping
	// the entries of deleted rows.
	optimizeTerms = `INSERT INTO message_terms (message_terms) VALUES ('optimize')`

	// selectUsers lists the tenant's (?1) users after ?2 that have a fact
	// or a conversation live at ?3, ?4 of them: UNION merges the two
	// ordered index walks and stops at the limit.
	selectUsers = `SELECT user_id FROM user_facts WHERE tenant = ?1 AND user_id > ?2
		UNION
		SELECT user_id FROM conversations INDEXED BY conversations_user
		WHERE tenant = ?1 AND user_id > ?2 AND ` + liveCond + `
		ORDER BY 1 LIMIT ?4`

	// deleteUserFacts deletes every fact of the user, history included.
	deleteUserFacts = `DELETE FROM user_facts WHERE tenant = ?1 AND user_id = ?2`

	// startErasure records that the user (hash ?1) is being erased, by
	// the DeleteUser that started at ?2.
	startErasure = `INSERT INTO user_erasures (uh, started, finished) VALUES (?1, ?2, NULL)
		ON CONFLICT (uh) DO UPDATE SET started = excluded.started, finished = NULL`

	// finishErasure records that the erasure started at ?2 completed at
	// ?3, unless another one started since (which completes it).
	finishErasure = `UPDATE user_erasures SET finished = ?3 WHERE uh = ?1 AND started = ?2`

	// selectErasure reads the user's erasure record.
	selectErasure = `SELECT finished FROM user_erasures WHERE uh = ?1`
)

// userConflict is the error of an append naming another user than the
// conversation's.
func userConflict(key chatmem.Key, have, want string) error {
	if have == "" {
		return fmt.Errorf("%w: conversation %s belongs to no user, not to %q", chatmem.ErrConflict, key, want)
	}
	return fmt.Errorf("%w: conversation %s belongs to another user than %q", chatmem.ErrConflict, key, want)
}

// UserConversations returns one page of the user's live conversations in
// ID order, along the partial index conversations_user; see
// chatmem.UserStore.
func (s *Store) UserConversations(ctx context.Context, user chatmem.Key, page chatmem.PageRequest) (chatmem.Page, error) {
	if err := storekit.CheckUser(user); err != nil {
		return chatmem.Page{}, err
	}
	limit, err := storekit.PageLimit(page.Limit)
	if err != nil {
		return chatmem.Page{}, err
	}
	rows, err := s.r.query(ctx, selectUserPage, user.Tenant, page.After, clampedNanos(s.now()), limit+1, user.ID)
	if err != nil {
		return chatmem.Page{}, translate(ctx, err)
	}
	defer rows.Close()
	p := chatmem.Page{Conversations: []chatmem.Conversation{}}
	for rows.Next() {
		c, err := scanConversation(rows)
		if err != nil {
			return chatmem.Page{}, translate(ctx, err)
		}
		p.Conversations = append(p.Conversations, c)
	}
	if err := rows.Err(); err != nil {
		return chatmem.Page{}, translate(ctx, err)
	}
	if len(p.Conversations) > limit {
		p.Conversations = p.Conversations[:limit]
		p.Next = p.Conversations[limit-1].Key.ID
	}
	return p, nil
}

// UserFacts returns the current value of every user fact, ordered by key
// (byte order); see chatmem.UserStore.
func (s *Store) UserFacts(ctx context.Context, user chatmem.Key) ([]chatmem.Fact, error) {
	if err := storekit.CheckUser(user); err != nil {
		return nil, err
	}
	return s.readUserFacts(ctx, selectUserFacts, user.Tenant, user.ID)
}

// UserFactHistory returns every value the named user fact has had, in the
// order they were recorded; see chatmem.UserStore.
func (s *Store) UserFactHistory(ctx context.Context, user chatmem.Key, name string) ([]chatmem.Fact, error) {
	if err := storekit.CheckUser(user); err != nil {
		return nil, err
	}
	if err := chatmem.ValidateFactKey(name); err != nil {
		return nil, err
	}
	facts, err := s.readUserFacts(ctx, selectUserFactHistory, user.Tenant, user.ID, name)
	if err != nil {
		return nil, err
	}
	if len(facts) == 0 {
		return nil, fmt.Errorf("user %s has no fact %q: %w", user, name, chatmem.ErrNotFound)
	}
	return facts, nil
}

// readUserFacts runs query, which selects userFactCols.
func (s *Store) readUserFacts(ctx context.Context, query string, args ...any) ([]chatmem.Fact, error) {
	rows, err := s.r.query(ctx, query, args...)
	if err != nil {
		return nil, translate(ctx, err)
	}
	defer rows.Close()
	out := []chatmem.Fact{}
	for rows.Next() {
		var f chatmem.Fact
		var created int64
		if err := rows.Scan(&f.Key, &f.Value, &f.SourceSeq, &f.SetBy, &f.Confidence, &created, &f.Conversation); err != nil {
			return nil, translate(ctx, err)
		}
		f.CreatedAt = fromNanos(created)
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, translate(ctx, err)
	}
	return out, nil
}

// SetUserFacts records facts as the user's in one IMMEDIATE transaction,
// as SetFacts does for a conversation; see chatmem.UserStore.
func (s *Store) SetUserFacts(ctx context.Context, user chatmem.Key, facts []chatmem.Fact) error {
	if err := storekit.CheckUser(user); err != nil {
		return err
	}
	b, err := newFactBatch(facts, s.now())
	if err != nil {
		return err
	}
	if len(facts) == 0 {
		return nil
	}
	return s.write(ctx, func(t tx) error {
		return b.write(t, userFacts, user, false)
	})
}

// ReplaceUserFacts deletes every fact of the user with its history and
// records facts, in one IMMEDIATE transaction; see
// chatmem.UserFactReplacer.
func (s *Store) ReplaceUserFacts(ctx context.Context, user chatmem.Key, facts []chatmem.Fact) error {
	if err := storekit.CheckReplaceFacts(user, facts); err != nil {
		return err
	}
	b, err := newFactBatch(facts, s.now())
	if err != nil {
		return err
	}
	return s.write(ctx, func(t tx) error {
		if _, err := t.exec(deleteUserFacts, user.Tenant, user.ID); err != nil {
			return err
		}
		return b.write(t, userFacts, user, true)
	})
}

// Users returns one page of the tenant's users with a fact or a live
// conversation, in ID order: a merge of user_facts' primary key and the
// index conversations_user, which stops at the page's end; see
// chatmem.UserLister.
func (s *Store) Users(ctx context.Context, tenant string, page chatmem.PageRequest) (chatmem.UserPage, error) {
	if err := storekit.CheckTenant(tenant); err != nil {
		return chatmem.UserPage{}, err
	}
	limit, err := storekit.PageLimit(page.Limit)
	if err != nil {
		return chatmem.UserPage{}, err
	}
	rows, err := s.r.query(ctx, selectUsers, tenant, page.After, clampedNanos(s.now()), limit+1)
	if err != nil {
		return chatmem.UserPage{}, translate(ctx, err)
	}
	defer rows.Close()
	p := chatmem.UserPage{Users: []string{}}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return chatmem.UserPage{}, translate(ctx, err)
		}
		p.Users = append(p.Users, id)
	}
	if err := rows.Err(); err != nil {
		return chatmem.UserPage{}, translate(ctx, err)
	}
	if len(p.Users) > limit {
		p.Users = p.Users[:limit]
		p.Next = p.Users[limit-1]
	}
	return p, nil
}

// SetDerivedUserFacts records p.Facts as p.User's in the IMMEDIATE
// transaction that first finds p.Conversation live, created at p.Created
// and bound to p.User (chatmem.ErrNotFound if not), or (p.Started) reads
// the user's erasure record as a creating append does (fence); see
// chatmem.UserStore.
func (s *Store) SetDerivedUserFacts(ctx context.Context, p chatmem.DerivedUserFacts) error {
	user := p.User
	if err := storekit.CheckUser(user); err != nil {
		return err
	}
	if err := p.Check(); err != nil {
		return err
	}
	now := s.now()
	b, err := newFactBatch(p.Facts, now)
	if err != nil {
		return err
	}
	check := func(t tx) error {
		if p.Conversation == "" {
			return fence(t, user, p.Started.UnixNano())
		}
		key := chatmem.Key{Tenant: user.Tenant, ID: p.Conversation}
		conv, err := liveGeneration(t, key, now, &p.Created)
		if err == nil && conv.User != user.ID {
			err = fmt.Errorf("conversation %s is not bound to user %s: %w", key, user.ID, chatmem.ErrNotFound)
		}
		return err
	}
	if len(p.Facts) == 0 {
		return s.read(ctx, check)
	}
	return s.write(ctx, func(t tx) error {
		if err := check(t); err != nil {
			return err
		}
		if p.Replace {
			if _, err := t.exec(deleteUserFacts, user.Tenant, user.ID); err != nil {
				return err
			}
		}
		return b.write(t, userFacts, user, p.Replace)
	})
}

// fence refuses (chatmem.ErrErased), inside the write transaction that
// is about to create a conversation bound to user or write its facts
// (SetDerivedUserFacts), an erasure of the user that runs, or that
// completed at or after started (Unix nanoseconds).
func fence(t tx, user chatmem.Key, started int64) error {
	var finished sql.NullInt64
	err := t.row(selectErasure, erasure.ID(user)).Scan(&finished)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return err
	case !finished.Valid:
		return fmt.Errorf("%w: user %s is being erased", chatmem.ErrErased, user.ID)
	case finished.Int64 >= started:
		return fmt.Errorf("%w: user %s was erased at %s, after the work started (%s)", chatmem.ErrErased, user.ID,
			fromNanos(finished.Int64).Format(time.RFC3339Nano), fromNanos(started).Format(time.RFC3339Nano))
	}
	return nil
}

// DeleteUserFact removes the named user fact and its history; see
// chatmem.UserStore.
func (s *Store) DeleteUserFact(ctx context.Context, user chatmem.Key, name string) error {
	if err := storekit.CheckUser(user); err != nil {
		return err
	}
	if err := chatmem.ValidateFactKey(name); err != nil {
		return err
	}
	return s.write(ctx, func(t tx) error {
		res, err := t.exec(deleteUserFact, user.Tenant, user.ID, name)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return fmt.Errorf("user %s has no fact %q: %w", user, name, chatmem.ErrNotFound)
		}
		return nil
	})
}

// eraseBatch is how many conversations one transaction of DeleteUser
// deletes, so that erasing a large user does not hold the write lock for
// long.
const eraseBatch = 64

// DeleteUser erases the user; see chatmem.UserStore. It deletes the
// user's conversations (expired ones too) a batch per IMMEDIATE
// transaction, their messages, keys, summaries, facts, vectors and index
// entries going with them (ON DELETE CASCADE and the index triggers),
// then the user's facts. Every connection runs with PRAGMA secure_delete
// and the conversations' index with FTS5's secure-delete, so the deleted
// content is overwritten in the pages; last, a TRUNCATE checkpoint copies
// the pages into the database file and empties the WAL, which held the old
// page images. If readers keep the checkpoint from finishing, it returns
// an error wrapping chatmem.ErrUnavailable after the data is deleted:
// calling it again finishes the checkpoint.
func (s *Store) DeleteUser(ctx context.Context, user chatmem.Key) (int, error) {
	if err := storekit.CheckUser(user); err != nil {
		return 0, err
	}
	// The record goes first, in its own transaction: from its commit on
	// no append creates a conversation of the user (fence), and every
	// one committed before it is among the IDs read below.
	started := s.now().UnixNano()
	uh := erasure.ID(user)
	if err := s.write(ctx, func(t tx) error {
		_, err := t.exec(startErasure, uh, started)
		return err
	}); err != nil {
		return 0, fmt.Errorf("erase user %s: %w", user, err)
	}
	s.stepErasure()
	deleted := 0
	for {
		var n int
		err := s.write(ctx, func(t tx) error {
			rows, err := t.query(selectUserConversationIDs, user.Tenant, user.ID, eraseBatch)
			if err != nil {
				return err
			}
			var ids []string
			for rows.Next() {
				var id string
				if err := rows.Scan(&id); err != nil {
					rows.Close()
					return err
				}
				ids = append(ids, id)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
			for _, id := range ids {
				if _, err := t.exec(deleteConversation, user.Tenant, id); err != nil {
					return fmt.Errorf("delete conversation %s: %w", id, err)
				}
			}
			n = len(ids)
			return nil
		})
		if err != nil {
			return deleted, fmt.Errorf("erase user %s: %w", user, err)
		}
		deleted += n
		s.stepErasure()
		if n < eraseBatch {
			break
		}
	}
	err := s.write(ctx, func(t tx) error {
		if _, err := t.exec(deleteUserFacts, user.Tenant, user.ID); err != nil {
			return err
		}
		if _, err := t.exec(finishErasure, uh, started, s.now().UnixNano()); err != nil {
			return err
		}
		// The index deletes by tombstones (contentless_delete: it has no
		// text to find the entries by), which leave the terms in their
		// segments until a merge: merge them all.
		_, err := t.tx.ExecContext(ctx, optimizeTerms)
		return err
	})
	if err != nil {
		return deleted, fmt.Errorf("erase user %s: %w", user, err)
	}
	s.stepErasure()
	if err := s.truncateWAL(ctx); err != nil {
		return deleted, fmt.Errorf("erase user %s: %w", user, err)
	}
	return deleted, nil
}

// stepErasure calls the test hook between DeleteUser's transactions.
func (s *Store) stepErasure() {
	if s.eraseStep != nil {
		s.eraseStep()
	}
}

// truncateWAL checkpoints the WAL into the database file and truncates it
// to nothing, retrying for a while if readers hold old snapshots.
func (s *Store) truncateWAL(ctx context.Context) error {
	const attempts = 50
	for i := 0; ; i++ {
		s.ckpt.mu.Lock() // after the checkpointer's, if one runs
		busy, _, err := checkpoint(ctx, s.w.db, "TRUNCATE")
		s.ckpt.mu.Unlock()
		if err == nil && !busy {
			return nil
		}
		if i == attempts {
			if err == nil {
				err = errors.New("readers kept it busy")
			}
			return fmt.Errorf("%w: checkpoint the WAL: %v", chatmem.ErrUnavailable, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
