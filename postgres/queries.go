package postgres

import (
	"strings"

	"github.com/jackc/pgx/v5"
)

// queries holds the store's SQL with the schema filled in. Values are always
// parameters; only the schema name, validated and quoted, is spliced in.
type queries struct {
	lockConversation, updateConversation, conversation, conversationSince, list string

	insertMessages, appendExisting, replayMessages string
	indexRead, indexWrite                          string
	tail, rangeAfter, system, receipts             string
	postings, messagesAt                           string

	idempotencyKey, insertIdempotency string

	lockLive, summary, insertSummary, updateSummary string

	facts, factHistory, retireFacts, insertFacts, deleteFact string

	deleteConversation, deleteContents, deleteContentsOf, sweep, purge string
}

func buildQueries(schema string) queries {
	s := pgx.Identifier{schema}.Sanitize()
	q := func(sql string) string { return strings.ReplaceAll(sql, "{s}", s) }
	return queries{
		// The upsert creates the conversation or locks its row: either way
		// the row is this transaction's until it ends, which is what
		// serializes appends. The no-op SET is what takes the lock.
		lockConversation: q(`
INSERT INTO {s}.conversations AS c (tenant, id, tokenizer, created_at, updated_at, user_id)
VALUES ($1, $2, $3, $4, $4, NULLIF($5, ''))
ON CONFLICT (tenant, id) DO UPDATE SET last_seq = c.last_seq
RETURNING c.tokenizer, c.last_seq, c.tokens, c.system_tokens, c.turns, c.created_at, c.updated_at, c.expires_at, c.num,
          COALESCE(c.user_id, ''), c.revision`),

		// updateConversation writes the row's totals after an append in
		// Append's transaction; $12 is the last seq before the append (0
		// when it started the conversation, or started it afresh after it
		// expired: the index's watermark, terms_seq, then goes back to 0
		// with the postings deleteContents deleted).
		updateConversation: q(`
UPDATE {s}.conversations
SET tokenizer = $3, last_seq = $4, tokens = $5, system_tokens = $6, turns = $7,
    created_at = $8, updated_at = $9, expires_at = $10, user_id = NULLIF($11, ''),
    terms_seq = LEAST(terms_seq, $12)
WHERE tenant = $1 AND id = $2`),

		conversation: q(`
SELECT tokenizer, last_seq, tokens, system_tokens, turns, created_at, updated_at, expires_at, COALESCE(user_id, ''), revision
FROM {s}.conversations
WHERE tenant = $1 AND id = $2 AND (expires_at IS NULL OR expires_at > $3)`),

		// conversationSince reads the conversation's row and up to $5 of
		// its messages after seq $4 in one statement, so in one snapshot:
		// a probe of conversations' primary key, then one range of
		// messages' primary key. It returns a row per message, each with
		// the conversation's columns; one row with NULL message columns
		// when there is no message after $4; none when the conversation
		// is missing or expired. The rows come in seq order without an
		// outer ORDER BY (which would add a Sort): the lateral join is a
		// nested loop over the one conversation row, so they come as the
		// range returns them. ConversationSince checks the order anyway.
		conversationSince: q(`
SELECT c.tokenizer, c.last_seq, c.tokens, c.system_tokens, c.turns, c.created_at, c.updated_at, c.expires_at,
       COALESCE(c.user_id, ''), c.revision, ` + messageColumns + `
FROM {s}.conversations c
LEFT JOIN LATERAL (SELECT ` + messageColumns + `
                   FROM {s}.messages m
                   WHERE m.tenant = c.tenant AND m.conv_id = c.id AND m.seq > $4
                   ORDER BY m.seq
                   LIMIT $5) m ON true
WHERE c.tenant = $1 AND c.id = $2 AND (c.expires_at IS NULL OR c.expires_at > $3)`),

		list: q(`
SELECT id, tokenizer, last_seq, tokens, system_tokens, turns, created_at, updated_at, expires_at, COALESCE(user_id, ''), revision
FROM {s}.conversations
WHERE tenant = $1 AND id > $2 AND (expires_at IS NULL OR expires_at > $3)
ORDER BY id
LIMIT $4`),

		// One statement for the whole batch: the arrays are unnested into
		// rows. Empty strings stand for NULL JSON (JSON text is never
		// empty). The postings are not written here: see indexWrite.
		insertMessages: q(`
INSERT INTO {s}.messages
    (tenant, conv_id, seq, role, content, name, tool_calls, tool_call_id, tokens, cum, turn, created_at, metadata, receipt)
SELECT $1, $2, u.seq, u.role, u.content, u.name, NULLIF(u.tool_calls, '')::jsonb, u.tool_call_id,
       u.tokens, u.cum, u.turn, u.created_at, NULLIF(u.metadata, '')::jsonb,
       CASE WHEN u.seq = $3[cardinality($3)] THEN $14::bytea END
FROM unnest($3::bigint[], $4::text[], $5::bytea[], $6::text[], $7::text[], $8::text[],
            $9::bigint[], $10::bigint[], $11::bigint[], $12::timestamptz[], $13::text[])
     AS u (seq, role, content, name, tool_calls, tool_call_id, tokens, cum, turn, created_at, metadata)`),

		// appendExisting appends to a live conversation in one statement,
		// so in one round trip and one implicit transaction: the common
		// append (no idempotency key, the conversation exists), and
		// Memory.Turn's, conditional on the last seq ($3, NULL: any). It
		// moves the conversation's row on if the row is live at $4, at
		// last seq $3, under tokenizer $6 (empty: any) and of user $7
		// (empty: any), and stores the batch as insertMessages does (the
		// postings are written later: see indexWrite). The batch is
		// numbered from 0 (seq, cum and turn, $12, $16, $17): the row's
		// values before the append are added here. The UPDATE takes the
		// row's lock, which serializes it with every other append; a row
		// changed meanwhile is checked again when the lock is granted, and
		// if the checks fail nothing is written and nothing returned
		// (Append's transaction then tells why, or creates the
		// conversation). $5 is the new expires_at (NULL: keep), $8..$11
		// what the batch adds to tokens, system_tokens, turns and
		// last_seq.
		appendExisting: q(`
WITH c AS (
    UPDATE {s}.conversations c
    SET last_seq = c.last_seq + $11, tokens = c.tokens + $8, system_tokens = c.system_tokens + $9,
        turns = c.turns + $10, updated_at = $4, expires_at = COALESCE($5, c.expires_at),
        terms_seq = LEAST(c.terms_seq, c.last_seq)
    WHERE c.tenant = $1 AND c.id = $2 AND ($3::bigint IS NULL OR c.last_seq = $3)
      AND (c.expires_at IS NULL OR c.expires_at > $4)
      AND ($6 = '' OR c.tokenizer = $6) AND ($7 = '' OR c.user_id = $7)
      AND ($24::bigint IS NULL OR c.revision = $24)
    RETURNING c.tokenizer, c.last_seq, c.tokens, c.system_tokens, c.turns, c.created_at, c.updated_at, c.expires_at,
              COALESCE(c.user_id, '') AS user_id, c.revision
), m AS (
    INSERT INTO {s}.messages
        (tenant, conv_id, seq, role, content, name, tool_calls, tool_call_id, tokens, cum, turn, created_at, metadata, receipt)
    SELECT $1, $2, c.last_seq - $11 + u.seq, u.role, u.content, u.name, NULLIF(u.tool_calls, '')::jsonb, u.tool_call_id,
           u.tokens, c.tokens - $8 + u.cum, c.turns - $10 + u.turn, u.created_at, NULLIF(u.metadata, '')::jsonb,
           CASE WHEN u.seq = $12[cardinality($12)] THEN $23::bytea END
    FROM c, unnest($12::bigint[], $13::text[], $14::bytea[], $15::text[], $18::text[], $19::text[],
                   $20::bigint[], $16::bigint[], $17::bigint[], $21::timestamptz[], $22::text[])
         AS u (seq, role, content, name, tool_calls, tool_call_id, tokens, cum, turn, created_at, metadata)
)
SELECT tokenizer, last_seq, tokens, system_tokens, turns, created_at, updated_at, expires_at, user_id, revision FROM c`),

		// indexRead reads what IndexPending indexes next, in one snapshot:
		// the live conversation's row (its generation, num and created_at; its
		// index's watermark, terms_seq; its last seq) and up to
		// $4 of its messages past the watermark, as conversationSince
		// does (one row with NULL message columns when there are none).
		indexRead: q(`
SELECT c.num, c.created_at, c.terms_seq, c.last_seq, c.revision, ` + messageColumns + `
FROM {s}.conversations c
LEFT JOIN LATERAL (SELECT ` + messageColumns + `
                   FROM {s}.messages m
                   WHERE m.tenant = c.tenant AND m.conv_id = c.id AND m.seq > c.terms_seq
                   ORDER BY m.seq
                   LIMIT $4) m ON true
WHERE c.tenant = $1 AND c.id = $2 AND (c.expires_at IS NULL OR c.expires_at > $3)`),

		// indexWrite stores the postings ($5[i], $6[i]; the messages'
		// dates $7[i] for the user index, usersearch.go) of the messages
		// up to seq $4 of the conversation numbered $8 and created at $3,
		// and moves its watermark there, in one statement under the row's
		// lock: if the conversation was deleted or started afresh since
		// indexRead (its messages are others; a conversation deleted and
		// imported again keeps its created_at but gets a new number), it
		// writes nothing and returns no row; nor if a rewind or a
		// redaction changed its messages since (its revision, $9).
		// Postings written twice (two processes indexing at once) are
		// written once.
		indexWrite: q(`
WITH c AS (
    UPDATE {s}.conversations c SET terms_seq = GREATEST(c.terms_seq, $4)
    WHERE c.tenant = $1 AND c.id = $2 AND c.created_at = $3 AND c.num = $8 AND c.revision = $9
    RETURNING c.num, COALESCE(c.user_id, '') AS user_id
), p AS (
    INSERT INTO {s}.message_terms (conv, term, seq, usr, at)
    SELECT c.num, u.term, u.seq, ` + userHash("$1", "c.user_id") + `, CASE WHEN c.user_id <> '' THEN u.at END
    FROM c, unnest($5::text[], $6::bigint[], $7::timestamptz[]) AS u (term, seq, at)
    ON CONFLICT DO NOTHING
)
SELECT num FROM c`),

		replayMessages: q(`
SELECT ` + messageColumns + `
FROM {s}.messages m
WHERE m.tenant = $1 AND m.conv_id = $2 AND m.seq >= $3 AND m.seq < $3 + $4
ORDER BY m.seq`),

		// tail reads the window as one primary-key range, seq > start. start
		// comes from the conversation row and at most two index probes:
		//   - tokens ($4 > 0): the window is every message after q, the
		//     first message whose cum reaches total - $4 (the messages
		//     after it sum to at most $4; from q on, they would not);
		//   - turns ($5 > 0): every message from the user message that
		//     starts turn (turns - $5 + 1), all of them if there are fewer
		//     turns.
		// With both, the later start (the shorter window) wins. If the
		// conversation is missing or expired, start is NULL and nothing is
		// returned; the caller then tells "missing" from "empty window".
		tail: q(`
SELECT ` + messageColumns + `
FROM {s}.messages m
WHERE m.tenant = $1 AND m.conv_id = $2 AND m.seq > (
    SELECT GREATEST(
        CASE WHEN $4::bigint <= 0 OR c.tokens <= $4::bigint THEN 0
             ELSE COALESCE((SELECT q.seq FROM {s}.messages q
                            WHERE q.tenant = $1 AND q.conv_id = $2 AND q.cum >= c.tokens - $4::bigint
                            ORDER BY q.cum, q.seq LIMIT 1), c.last_seq) END,
        CASE WHEN $5::bigint <= 0 OR c.turns < $5::bigint THEN 0
             ELSE COALESCE((SELECT u.seq - 1 FROM {s}.messages u
                            WHERE u.tenant = $1 AND u.conv_id = $2 AND u.role = 'user'
                              AND u.turn = c.turns - $5::bigint + 1), 0) END)
    FROM {s}.conversations c
    WHERE c.tenant = $1 AND c.id = $2 AND (c.expires_at IS NULL OR c.expires_at > $3))
ORDER BY m.seq`),

		// receipts reads up to $5 receipts of messages with seq > $4,
		// along the primary key, as rangeAfter reads messages.
		receipts: q(`
SELECT m.seq, m.receipt
FROM {s}.messages m
WHERE m.tenant = $1 AND m.conv_id = $2 AND m.seq > $4 AND m.receipt IS NOT NULL
  AND EXISTS (SELECT 1 FROM {s}.conversations c
              WHERE c.tenant = $1 AND c.id = $2 AND (c.expires_at IS NULL OR c.expires_at > $3))
ORDER BY m.seq
LIMIT $5`),

		rangeAfter: q(`
SELECT ` + messageColumns + `
FROM {s}.messages m
WHERE m.tenant = $1 AND m.conv_id = $2 AND m.seq > $4
  AND EXISTS (SELECT 1 FROM {s}.conversations c
              WHERE c.tenant = $1 AND c.id = $2 AND (c.expires_at IS NULL OR c.expires_at > $3))
ORDER BY m.seq
LIMIT $5`),

		system: q(`
SELECT ` + messageColumns + `
FROM {s}.messages m
WHERE m.tenant = $1 AND m.conv_id = $2 AND m.role = 'system'
  AND EXISTS (SELECT 1 FROM {s}.conversations c
              WHERE c.tenant = $1 AND c.id = $2 AND (c.expires_at IS NULL OR c.expires_at > $3))
ORDER BY m.seq`),

		// postings reads, for each term $4[i], the newest $6 postings
		// before seq $5: per term, one backward range scan of
		// message_terms_pkey that stops after $6 entries. The rows are
		// (i, seq, the index's watermark, the last seq), with one (i,
		// NULL, ...) for a term with none; a missing or expired
		// conversation returns no row at all.
		postings: q(`
SELECT t.ord, p.seq, c.terms_seq, c.last_seq
FROM {s}.conversations c
CROSS JOIN unnest($4::text[]) WITH ORDINALITY AS t (term, ord)
LEFT JOIN LATERAL (SELECT x.seq FROM {s}.message_terms x
                   WHERE x.conv = c.num AND x.term = t.term AND x.seq < $5
                   ORDER BY x.seq DESC
                   LIMIT $6) p ON true
WHERE c.tenant = $1 AND c.id = $2 AND (c.expires_at IS NULL OR c.expires_at > $3)`),

		// messagesAt reads the messages $4, probing the primary key once
		// per number.
		messagesAt: q(`
SELECT ` + messageColumns + `
FROM {s}.messages m
WHERE m.tenant = $1 AND m.conv_id = $2 AND m.seq = ANY($4::bigint[])
  AND EXISTS (SELECT 1 FROM {s}.conversations c
              WHERE c.tenant = $1 AND c.id = $2 AND (c.expires_at IS NULL OR c.expires_at > $3))
ORDER BY m.seq`),

		idempotencyKey: q(`
SELECT first_seq, count, fingerprint FROM {s}.idempotency
WHERE tenant = $1 AND conv_id = $2 AND key_hash = $3`),
		insertIdempotency: q(`
INSERT INTO {s}.idempotency (tenant, conv_id, key_hash, first_seq, count, created_at, fingerprint)
VALUES ($1, $2, $3, $4, $5, $6, $7)`),
		// lockLive locks a live conversation's row against appends,
		// Delete and the sweeps until the transaction ends, so that a
		// summary or fact written under it cannot outlive the
		// conversation: whatever deletes the conversation next waits, and
		// then sees what was written. With $4 (not NULL) it finds only
		// the conversation created at $4, so that a write for one deleted
		// since cannot reach the one that replaced it.
		lockLive: q(`
SELECT last_seq FROM {s}.conversations
WHERE tenant = $1 AND id = $2 AND (expires_at IS NULL OR expires_at > $3)
  AND ($4::timestamptz IS NULL OR created_at = $4::timestamptz)
FOR NO KEY UPDATE`),

		summary: q(`
SELECT s.text, s.covers_seq, s.tokens, s.summarizer, s.created_at
FROM {s}.summaries s
WHERE s.tenant = $1 AND s.conv_id = $2
  AND EXISTS (SELECT 1 FROM {s}.conversations c
              WHERE c.tenant = $1 AND c.id = $2 AND (c.expires_at IS NULL OR c.expires_at > $3))`),
		// PutSummary's compare-and-set is one of these two, by whether
		// prev is 0: each writes one row exactly when the stored summary
		// covers prev (none stored, or covers_seq = prev), and none
		// otherwise, atomically.
		insertSummary: q(`
INSERT INTO {s}.summaries (tenant, conv_id, text, covers_seq, tokens, summarizer, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (tenant, conv_id) DO NOTHING`),
		updateSummary: q(`
UPDATE {s}.summaries
SET text = $3, covers_seq = $4, tokens = $5, summarizer = $6, created_at = $7
WHERE tenant = $1 AND conv_id = $2 AND covers_seq = $8`),

		facts: q(`
SELECT ` + factColumns + `
FROM {s}.facts f
WHERE f.tenant = $1 AND f.conv_id = $2 AND f.current
  AND EXISTS (SELECT 1 FROM {s}.conversations c
              WHERE c.tenant = $1 AND c.id = $2 AND (c.expires_at IS NULL OR c.expires_at > $3))
ORDER BY f.key`),
		factHistory: q(`
SELECT ` + factColumns + `
FROM {s}.facts f
WHERE f.tenant = $1 AND f.conv_id = $2 AND f.key = $4
  AND EXISTS (SELECT 1 FROM {s}.conversations c
              WHERE c.tenant = $1 AND c.id = $2 AND (c.expires_at IS NULL OR c.expires_at > $3))
ORDER BY f.version`),
		// retireFacts makes the current values of the keys $3 history,
		// returning the version each had, before insertFacts writes the new
		// ones: facts_current allows one current value per key.
		retireFacts: q(`
UPDATE {s}.facts SET current = false
WHERE tenant = $1 AND conv_id = $2 AND key = ANY($3::text[]) AND current
RETURNING key, version`),
		insertFacts: q(`
INSERT INTO {s}.facts
    (tenant, conv_id, key, version, current, value, source_seq, set_by, confidence, created_at)
SELECT $1, $2, u.key, u.version, u.current, u.value, u.source_seq, u.set_by, u.confidence, u.created_at
FROM unnest($3::text[], $4::bigint[], $5::boolean[], $6::text[], $7::bigint[], $8::text[],
            $9::float8[], $10::timestamptz[])
     AS u (key, version, current, value, source_seq, set_by, confidence, created_at)`),
		// deleteFact runs under lockLive, which checked the conversation.
		deleteFact: q(`DELETE FROM {s}.facts WHERE tenant = $1 AND conv_id = $2 AND key = $3`),

		deleteConversation: q(`
DELETE FROM {s}.conversations
WHERE tenant = $1 AND id = $2 AND (expires_at IS NULL OR expires_at > $3)
RETURNING num`),

		// deleteContents deletes every row of one conversation (number $3)
		// but its conversations row, and deleteContentsOf those of the
		// conversations ($1[i], $2[i], number $3[i]): messages, postings,
		// vectors, idempotency keys, the summary and the facts, in one
		// statement. deleteContents also sets the row's revision back to 0,
		// as a conversation started afresh after it expired has.
		deleteContents: q(`
WITH m AS (DELETE FROM {s}.messages WHERE tenant = $1 AND conv_id = $2),
     p AS (DELETE FROM {s}.message_terms WHERE conv = $3),
     v AS (DELETE FROM {s}.message_vectors WHERE conv = $3),
     k AS (DELETE FROM {s}.idempotency WHERE tenant = $1 AND conv_id = $2),
     s AS (DELETE FROM {s}.summaries WHERE tenant = $1 AND conv_id = $2),
     r AS (UPDATE {s}.conversations SET revision = 0 WHERE tenant = $1 AND id = $2)
DELETE FROM {s}.facts WHERE tenant = $1 AND conv_id = $2`),
		deleteContentsOf: q(`
WITH g AS (SELECT * FROM unnest($1::text[], $2::text[]) AS g (tenant, id)),
     m AS (DELETE FROM {s}.messages x USING g WHERE x.tenant = g.tenant AND x.conv_id = g.id),
     p AS (DELETE FROM {s}.message_terms WHERE conv = ANY($3::bigint[])),
     v AS (DELETE FROM {s}.message_vectors WHERE conv = ANY($3::bigint[])),
     k AS (DELETE FROM {s}.idempotency x USING g WHERE x.tenant = g.tenant AND x.conv_id = g.id),
     s AS (DELETE FROM {s}.summaries x USING g WHERE x.tenant = g.tenant AND x.conv_id = g.id)
DELETE FROM {s}.facts x USING g WHERE x.tenant = g.tenant AND x.conv_id = g.id`),

		// sweep and purge delete up to $2 (or $3) conversation rows per
		// call, skipping rows an append holds: such a conversation is in
		// use, and if it is still due the next call takes it.
		sweep: q(`
DELETE FROM {s}.conversations c
WHERE (c.tenant, c.id) IN (SELECT tenant, id FROM {s}.conversations
                           WHERE expires_at <= $1
                           ORDER BY expires_at LIMIT $2
                           FOR UPDATE SKIP LOCKED)
  AND c.expires_at <= $1
RETURNING c.tenant, c.id, c.num`),
		purge: q(`
DELETE FROM {s}.conversations c
WHERE (c.tenant, c.id) IN (SELECT tenant, id FROM {s}.conversations
                           WHERE updated_at < $1 AND ($2 = '' OR tenant = $2)
                           ORDER BY updated_at LIMIT $3
                           FOR UPDATE SKIP LOCKED)
  AND c.updated_at < $1
RETURNING c.tenant, c.id, c.num`),
	}
}

// factColumns are the columns scanFacts reads, in its order.
const factColumns = `f.key, f.value, f.source_seq, f.set_by, f.confidence, f.created_at`

// messageColumns are the columns scanMessages reads, in its order.
const messageColumns = `m.seq, m.role, m.content, m.name, m.tool_calls, m.tool_call_id, m.tokens, m.created_at, m.metadata`
