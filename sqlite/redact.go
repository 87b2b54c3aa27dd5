package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/storekit"
)

var _ chatmem.Redactor = (*Store)(nil)

// Redact's statements. Like Rewind's, they run once per maintenance call
// and are not prepared on the pool.
const (
	// selectRedacted reads message ?3 and what the redaction needs of the
	// conversation's indexes: its number and whether the message is in
	// the conversation's index (past unindexed_seq).
	selectRedacted = `SELECT m.seq, m.role, m.content, m.name, m.tool_calls, m.tool_call_id, m.tokens, m.created_at, m.metadata,
		c.num, m.seq > c.unindexed_seq
		FROM messages m JOIN conversations c ON c.tenant = m.tenant AND c.id = m.conv_id
		WHERE m.tenant = ?1 AND m.conv_id = ?2 AND m.seq = ?3`

	updateRedacted = `UPDATE messages SET content = ?4, tool_calls = ?5, tokens = ?6, metadata = ?7
		WHERE tenant = ?1 AND conv_id = ?2 AND seq = ?3`

	// shiftTokensBefore moves the running totals of the messages after ?3
	// by ?4: one entry of messages_seq rewritten per message.
	shiftTokensBefore = `UPDATE messages SET tokens_before = tokens_before + ?4
		WHERE tenant = ?1 AND conv_id = ?2 AND seq > ?3`

	updateRedactedConversation = `UPDATE conversations SET tokens = tokens + ?3, system_tokens = system_tokens + ?4,
		revision = revision + 1, updated_at = ?5
		WHERE tenant = ?1 AND id = ?2`

	selectUserPosted   = `SELECT uh, at FROM user_posted WHERE conv = ?1 AND seq = ?2`
	deleteUserPostings = `DELETE FROM user_postings WHERE (uh, term, at, conv, seq) IN (
		SELECT p.uh, t.value, p.at, p.conv, p.seq FROM user_posted p, json_each(p.terms) t WHERE p.conv = ?1 AND p.seq = ?2)`
	deleteUserPosted = `DELETE FROM user_posted WHERE conv = ?1 AND seq = ?2`
)

// redactStatements delete what was derived from the message, each with ?1
// tenant, ?2 conversation ID, ?3 seq and ?4 the conversation's number.
var redactStatements = []string{
	`UPDATE idempotency_keys SET fingerprint = '' WHERE tenant = ?1 AND conv_id = ?2
		AND first_seq <= ?3 AND first_seq + count - 1 >= ?3 AND fingerprint != ''`,
	`DELETE FROM summaries WHERE tenant = ?1 AND conv_id = ?2 AND covers_seq >= ?3`,
	// The values the message stated leave the facts' histories; of a key
	// whose current value went, the newest value left is current.
	`DELETE FROM facts WHERE tenant = ?1 AND conv_id = ?2 AND source_seq = ?3`,
	`UPDATE facts SET current = 1 WHERE tenant = ?1 AND conv_id = ?2 AND current = 0
		AND version = (SELECT max(version) FROM facts f WHERE f.tenant = ?1 AND f.conv_id = ?2 AND f.key = facts.key)`,
	`DELETE FROM user_facts WHERE tenant = ?1 AND conv_id = ?2 AND source_seq = ?3
		AND user_id = (SELECT user_id FROM conversations WHERE tenant = ?1 AND id = ?2)`,
	`UPDATE user_facts SET current = 1 WHERE tenant = ?1 AND current = 0
		AND user_id = (SELECT user_id FROM conversations WHERE tenant = ?1 AND id = ?2)
		AND version = (SELECT max(version) FROM user_facts f
			WHERE f.tenant = ?1 AND f.user_id = user_facts.user_id AND f.key = user_facts.key)`,
	`DELETE FROM message_vectors WHERE conv = ?4 AND seq = ?3`,
	`DELETE FROM message_terms WHERE rowid = ?4 * 4294967296 + ?3`,
}

// Redact writes r over one message with what was derived from it, in one
// IMMEDIATE transaction; see chatmem.Redactor. Its cost is that of the
// messages after r.Seq (their running totals move), a scan of the
// conversation's facts, and a merge of the whole lexical index into one
// segment (FTS5's optimize, which DeleteUser runs too), the only way to
// drop the old terms from its pages: seconds on a file of millions of
// messages, during which writers wait. Every connection runs with PRAGMA secure_delete,
// so the old text is overwritten in the pages; last, as DeleteUser does, a
// TRUNCATE checkpoint copies the pages into the database file and empties
// the WAL, which held the old page images. If readers keep the checkpoint
// from finishing, Redact returns an error wrapping chatmem.ErrUnavailable
// after the redaction committed: calling chatmem.Memory.Redact again with
// the same content finishes it.
func (s *Store) Redact(ctx context.Context, key chatmem.Key, r chatmem.Redaction) (chatmem.Conversation, chatmem.Message, error) {
	if err := storekit.CheckRedact(key, r); err != nil {
		return chatmem.Conversation{}, chatmem.Message{}, err
	}
	now := s.now()
	var (
		conv chatmem.Conversation
		out  chatmem.Message
	)
	err := s.write(ctx, func(t tx) error {
		c, err := liveConversation(t, key, now)
		if err != nil {
			return err
		}
		if err := storekit.RedactConflict(key, c.LastSeq, c.Revision, r); err != nil {
			return err
		}
		var (
			old                 chatmem.Message
			role                string
			created, num        int64
			indexed             bool
			toolCalls, metadata sql.NullString
		)
		row := t.tx.QueryRowContext(t.ctx, selectRedacted, key.Tenant, key.ID, r.Seq)
		if err := row.Scan(&old.Seq, &role, &old.Content, &old.Name, &toolCalls, &old.ToolCallID, &old.Tokens, &created, &metadata, &num, &indexed); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("sqlite: message %d of %s is missing", r.Seq, key)
			}
			return err
		}
		if err := decodeMessage(&old, role, created, toolCalls, metadata); err != nil {
			return err
		}
		out = r.Apply(old)
		enc, err := encode(out)
		if err != nil {
			return err
		}
		exec := func(q string, args ...any) error {
			_, err := t.tx.ExecContext(t.ctx, q, args...)
			return err
		}
		if err := exec(updateRedacted, key.Tenant, key.ID, r.Seq, out.Content, enc.toolCalls, out.Tokens, enc.metadata); err != nil {
			return err
		}
		delta, sysDelta := int64(out.Tokens-old.Tokens), int64(0)
		if out.Role == chatmem.RoleSystem {
			delta, sysDelta = 0, delta
		} else if delta != 0 {
			if err := exec(shiftTokensBefore, key.Tenant, key.ID, r.Seq, delta); err != nil {
				return err
			}
		}
		if err := exec(updateRedactedConversation, key.Tenant, key.ID, delta, sysDelta, clampedNanos(now)); err != nil {
			return err
		}
		for _, q := range redactStatements {
			if err := exec(q, key.Tenant, key.ID, r.Seq, num); err != nil {
				return err
			}
		}
		terms := chatmem.IndexTerms(out)
		if indexed {
			if err := indexMessages(t, num, []chatmem.Message{out}, [][]string{terms}); err != nil {
				return err
			}
		}
		// The user index: the message's postings are replaced if it was
		// posted (a message the backfill has yet to post is posted from
		// its new text).
		var uh, at int64
		switch err := t.tx.QueryRowContext(t.ctx, selectUserPosted, num, r.Seq).Scan(&uh, &at); {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return err
		default:
			if err := exec(deleteUserPostings, num, r.Seq); err != nil {
				return err
			}
			if err := exec(deleteUserPosted, num, r.Seq); err != nil {
				return err
			}
			if len(terms) > 0 {
				list, err := json.Marshal(terms)
				if err != nil {
					return err
				}
				for _, q := range []string{insertUserPosted, insertUserPostings} {
					if err := exec(q, num, r.Seq, uh, at, string(list)); err != nil {
						return err
					}
				}
			}
		}
		// The index deletes by tombstones (contentless_delete: it has no
		// text to find the entries by), which leave the old terms in
		// their segments until a merge: merge them all, as DeleteUser
		// does.
		if _, err := t.tx.ExecContext(t.ctx, optimizeTerms); err != nil {
			return err
		}
		conv, err = liveConversation(t, key, now)
		return err
	})
	if err != nil {
		return chatmem.Conversation{}, chatmem.Message{}, translate(ctx, err)
	}
	if err := s.truncateWAL(ctx); err != nil {
		return chatmem.Conversation{}, chatmem.Message{}, fmt.Errorf("redact %s: %w", key, err)
	}
	return conv, out, nil
}
