package postgres

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/storekit"
)

var _ chatmem.Redactor = (*Store)(nil)

// redactQueries are Redact's statements; but for lock and read, each takes
// named arguments: @tenant, @id (the conversation's), @seq, @num (the
// conversation's number) and @now, and update also @content,
// @tool_calls, @metadata, @tokens, @delta and @sys_delta. They run once per
// maintenance call, so they are built per call, as Rewind's are.
type redactQueries struct {
	lock, read, update, shift, conv, index string
	deletes                                []string
}

func buildRedactQueries(schema string) redactQueries {
	s := pgx.Identifier{schema}.Sanitize()
	q := func(sql string) string { return strings.ReplaceAll(sql, "{s}", s) }
	return redactQueries{
		lock: q(`
SELECT last_seq, revision, num, terms_seq, COALESCE(user_id, '') FROM {s}.conversations
WHERE tenant = $1 AND id = $2 AND (expires_at IS NULL OR expires_at > $3)
FOR NO KEY UPDATE`),
		read: q(`SELECT ` + messageColumns + ` FROM {s}.messages m WHERE m.tenant = $1 AND m.conv_id = $2 AND m.seq = $3`),
		update: q(`
UPDATE {s}.messages SET content = @content, tool_calls = NULLIF(@tool_calls, '')::jsonb, tokens = @tokens,
    metadata = NULLIF(@metadata, '')::jsonb
WHERE tenant = @tenant AND conv_id = @id AND seq = @seq`),
		// The running totals after the message: one row and one entry of
		// messages_cum rewritten per message.
		shift: q(`UPDATE {s}.messages SET cum = cum + @delta WHERE tenant = @tenant AND conv_id = @id AND seq >= @seq`),
		conv: q(`
UPDATE {s}.conversations SET tokens = tokens + @delta, system_tokens = system_tokens + @sys_delta,
    revision = revision + 1, updated_at = @now
WHERE tenant = @tenant AND id = @id AND num = @num
RETURNING tokenizer, last_seq, tokens, system_tokens, turns, created_at, updated_at, expires_at, COALESCE(user_id, ''), revision`),
		// The message's postings, conversation's and user's (the same
		// rows), from its new terms ($1 tenant, $2 user, $3 num, $4 seq,
		// $5 terms, $6 the message's date).
		index: q(`
INSERT INTO {s}.message_terms (conv, term, seq, usr, at)
SELECT $3, t, $4, ` + userHash("$1::text", "$2::text") + `, CASE WHEN $2::text <> '' THEN $6::timestamptz END
FROM unnest($5::text[]) AS t
ON CONFLICT DO NOTHING`),
		deletes: []string{
			q(`UPDATE {s}.idempotency SET fingerprint = '' WHERE tenant = @tenant AND conv_id = @id
  AND first_seq <= @seq AND first_seq + count - 1 >= @seq AND fingerprint <> ''`),
			q(`DELETE FROM {s}.summaries WHERE tenant = @tenant AND conv_id = @id AND covers_seq >= @seq`),
			// The values the message stated leave the facts' histories; of
			// a key whose current value went, the newest value left is
			// current.
			q(`DELETE FROM {s}.facts WHERE tenant = @tenant AND conv_id = @id AND source_seq = @seq`),
			q(`
UPDATE {s}.facts f SET current = true
WHERE f.tenant = @tenant AND f.conv_id = @id AND NOT f.current
  AND f.version = (SELECT max(g.version) FROM {s}.facts g WHERE g.tenant = @tenant AND g.conv_id = @id AND g.key = f.key)`),
			q(`
DELETE FROM {s}.user_facts WHERE tenant = @tenant AND conv_id = @id AND source_seq = @seq
  AND user_id = (SELECT user_id FROM {s}.conversations WHERE tenant = @tenant AND id = @id)`),
			q(`
UPDATE {s}.user_facts f SET current = true
WHERE f.tenant = @tenant AND NOT f.current
  AND f.user_id = (SELECT user_id FROM {s}.conversations WHERE tenant = @tenant AND id = @id)
  AND f.version = (SELECT max(g.version) FROM {s}.user_facts g
                   WHERE g.tenant = @tenant AND g.user_id = f.user_id AND g.key = f.key)`),
			q(`DELETE FROM {s}.message_terms WHERE conv = @num AND seq = @seq`),
			q(`DELETE FROM {s}.message_vectors WHERE conv = @num AND seq = @seq`),
		},
	}
}

// Redact writes r over one message with what was derived from it, in one
// transaction that holds the conversation's row lock (appends wait for
// it); see chatmem.Redactor. Its cost is that of the messages after r.Seq
// (their running totals move), plus a scan of the conversation's facts.
// The message's postings are written from its new text if the index had
// reached it; else IndexPending writes them (an IndexPending that read the
// old text before the redaction writes nothing: its write is conditional
// on the revision). The old row versions are dead tuples until VACUUM
// reclaims them, as for every update in PostgreSQL.
func (s *Store) Redact(ctx context.Context, key chatmem.Key, r chatmem.Redaction) (chatmem.Conversation, chatmem.Message, error) {
	op := "postgres: redact " + key.String()
	if err := storekit.CheckRedact(key, r); err != nil {
		return chatmem.Conversation{}, chatmem.Message{}, err
	}
	rq := buildRedactQueries(s.schema)
	now := s.now()
	var (
		conv chatmem.Conversation
		out  chatmem.Message
	)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var last, rev, num, mark int64
		var user string
		if err := tx.QueryRow(ctx, rq.lock, key.Tenant, key.ID, now).Scan(&last, &rev, &num, &mark, &user); err != nil {
			return err // pgx.ErrNoRows: wrap makes it ErrNotFound
		}
		if err := storekit.RedactConflict(key, last, rev, r); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, rq.read, key.Tenant, key.ID, r.Seq)
		if err != nil {
			return err
		}
		msgs, err := scanMessages(rows)
		if err != nil {
			return err
		}
		if len(msgs) != 1 {
			return pgx.ErrNoRows
		}
		old := msgs[0]
		out = r.Apply(old)
		calls := ""
		if out.ToolCalls != nil {
			j, err := json.Marshal(out.ToolCalls)
			if err != nil {
				return err
			}
			calls = string(j)
		}
		meta, err := json.Marshal(out.Metadata)
		if err != nil {
			return err
		}
		delta, sysDelta := int64(out.Tokens-old.Tokens), int64(0)
		if out.Role == chatmem.RoleSystem {
			delta, sysDelta = 0, delta
		}
		args := pgx.NamedArgs{"tenant": key.Tenant, "id": key.ID, "seq": r.Seq, "num": num, "now": now,
			"content": []byte(out.Content), "tool_calls": calls, "metadata": string(meta), "tokens": int64(out.Tokens), "delta": delta, "sys_delta": sysDelta}
		if _, err := tx.Exec(ctx, rq.update, args); err != nil {
			return err
		}
		if delta != 0 {
			if _, err := tx.Exec(ctx, rq.shift, args); err != nil {
				return err
			}
		}
		if conv, err = scanConversation(key, tx.QueryRow(ctx, rq.conv, args)); err != nil {
			return err
		}
		for _, d := range rq.deletes {
			if _, err := tx.Exec(ctx, d, args); err != nil {
				return err
			}
		}
		if r.Seq <= mark {
			var terms []string
			for _, t := range chatmem.IndexTerms(out) {
				if storableText("term", t) == nil {
					terms = append(terms, t)
				}
			}
			if len(terms) > 0 {
				if _, err := tx.Exec(ctx, rq.index, key.Tenant, user, num, r.Seq, terms, out.CreatedAt); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return chatmem.Conversation{}, chatmem.Message{}, wrap(ctx, op, err)
	}
	return conv, out, nil
}
