package sqlite

import (
	"context"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/storekit"
)

var _ chatmem.RevisionRewinder = (*Store)(nil)

// rewindStatements delete what a rewind removes and recompute the totals,
// in order, each with ?1 tenant, ?2 conversation ID, ?3 toSeq, ?4 the
// conversation's number and ?5 now (Unix nanoseconds). Like Recount's,
// they run once per maintenance call and are not prepared on the pool.
var rewindStatements = []string{
	// The totals first, from the rows of the messages kept: the last
	// one's tokens_before and turn, the system messages' tokens.
	`UPDATE conversations SET last_seq = ?3, updated_at = ?5, revision = revision + 1,
		tokens = ifnull((SELECT tokens_before + CASE role WHEN 'system' THEN 0 ELSE tokens END
			FROM messages WHERE tenant = ?1 AND conv_id = ?2 AND seq = ?3), 0),
		turns = ifnull((SELECT turn FROM messages WHERE tenant = ?1 AND conv_id = ?2 AND seq = ?3), 0),
		system_tokens = system_tokens - ifnull((SELECT sum(tokens) FROM messages
			WHERE tenant = ?1 AND conv_id = ?2 AND role = 'system' AND seq > ?3), 0),
		fact_seq = min(fact_seq, ?3), unindexed_seq = min(unindexed_seq, ?3),
		user_unindexed_seq = min(user_unindexed_seq, ?3)
		WHERE tenant = ?1 AND id = ?2`,
	`DELETE FROM messages WHERE tenant = ?1 AND conv_id = ?2 AND seq > ?3`,
	// An append's key goes if the append stored any rewound message.
	`DELETE FROM idempotency_keys WHERE tenant = ?1 AND conv_id = ?2 AND first_seq + count - 1 > ?3`,
	`DELETE FROM summaries WHERE tenant = ?1 AND conv_id = ?2 AND covers_seq > ?3`,
	// The values stated by rewound messages leave the facts' histories;
	// of a key whose current value went, the newest value left is current.
	`DELETE FROM facts WHERE tenant = ?1 AND conv_id = ?2 AND source_seq > ?3`,
	`UPDATE facts SET current = 1 WHERE tenant = ?1 AND conv_id = ?2 AND current = 0
		AND version = (SELECT max(version) FROM facts f WHERE f.tenant = ?1 AND f.conv_id = ?2 AND f.key = facts.key)`,
	// So do the values of the user's facts taken from them.
	`DELETE FROM user_facts WHERE tenant = ?1 AND conv_id = ?2 AND source_seq > ?3
		AND user_id = (SELECT user_id FROM conversations WHERE tenant = ?1 AND id = ?2)`,
	`UPDATE user_facts SET current = 1 WHERE tenant = ?1 AND current = 0
		AND user_id = (SELECT user_id FROM conversations WHERE tenant = ?1 AND id = ?2)
		AND version = (SELECT max(version) FROM user_facts f
			WHERE f.tenant = ?1 AND f.user_id = user_facts.user_id AND f.key = user_facts.key)`,
	`DELETE FROM message_terms WHERE rowid > ?4 * 4294967296 + ?3 AND rowid < (?4 + 1) * 4294967296`,
	`DELETE FROM message_vectors WHERE conv = ?4 AND seq > ?3`,
	`DELETE FROM user_postings WHERE (uh, term, at, conv, seq) IN (
		SELECT p.uh, t.value, p.at, p.conv, p.seq FROM user_posted p, json_each(p.terms) t WHERE p.conv = ?4 AND p.seq > ?3)`,
	`DELETE FROM user_posted WHERE conv = ?4 AND seq > ?3`,
}

// Rewind deletes the conversation's messages after toSeq with what was
// derived from them, in one IMMEDIATE transaction; see chatmem.Rewinder.
// Its cost is that of the rows it deletes, plus a scan of the
// conversation's facts and of its system messages.
func (s *Store) Rewind(ctx context.Context, key chatmem.Key, toSeq, expectedLastSeq int64) (chatmem.Conversation, error) {
	return s.rewind(ctx, key, toSeq, expectedLastSeq, nil)
}

// RewindRevision is Rewind that also checks the conversation's Revision;
// see chatmem.RevisionRewinder.
func (s *Store) RewindRevision(ctx context.Context, key chatmem.Key, toSeq, expectedLastSeq, expectedRevision int64) (chatmem.Conversation, error) {
	if err := storekit.CheckRewindRevision(expectedRevision); err != nil {
		return chatmem.Conversation{}, err
	}
	return s.rewind(ctx, key, toSeq, expectedLastSeq, &expectedRevision)
}

func (s *Store) rewind(ctx context.Context, key chatmem.Key, toSeq, expectedLastSeq int64, expectedRevision *int64) (chatmem.Conversation, error) {
	if err := storekit.CheckRewind(key, toSeq, expectedLastSeq); err != nil {
		return chatmem.Conversation{}, err
	}
	now := s.now()
	var conv chatmem.Conversation
	err := s.write(ctx, func(t tx) error {
		c, err := liveConversation(t, key, now)
		if err != nil {
			return err
		}
		if err := storekit.RewindConflict(key, c.LastSeq, expectedLastSeq); err != nil {
			return err
		}
		if expectedRevision != nil && c.Revision != *expectedRevision {
			return storekit.RevisionConflict(key, c.Revision, *expectedRevision)
		}
		if toSeq == c.LastSeq {
			conv = c
			return nil
		}
		var num int64
		if err := t.tx.QueryRowContext(t.ctx, selectLiveConversationNum, key.Tenant, key.ID, clampedNanos(now)).Scan(&num); err != nil {
			return err
		}
		for _, q := range rewindStatements {
			if _, err := t.tx.ExecContext(t.ctx, q, key.Tenant, key.ID, toSeq, num, clampedNanos(now)); err != nil {
				return err
			}
		}
		conv, err = liveConversation(t, key, now)
		return err
	})
	if err != nil {
		return chatmem.Conversation{}, translate(ctx, err)
	}
	return conv, nil
}
