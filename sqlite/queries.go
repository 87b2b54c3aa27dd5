package sqlite

// The store's statements, all parameterised. Messages, idempotency keys,
// summaries and facts are always selected by tenant (?1) and conversation
// ID (?2) first, so no statement reaches past one conversation of one
// tenant; TestQueryPlans checks that every statement below is an index
// search, never a scan of a table.

// conversationCols are the columns scanConversation reads, in its order.
const conversationCols = `tenant, id, tokenizer, last_seq, tokens, system_tokens, turns, created_at, updated_at, expires_at, user_id, revision`

// insertCols are the columns insertConversation writes: a new
// conversation's revision is 0.
const insertCols = `tenant, id, tokenizer, last_seq, tokens, system_tokens, turns, created_at, updated_at, expires_at, user_id`

// liveCond holds for the conversations not expired at the time bound to ?3.
const liveCond = `(expires_at IS NULL OR expires_at > ?3)`

// messageCols are the columns scanMessages reads, in its order.
const messageCols = `seq, role, content, name, tool_calls, tool_call_id, tokens, created_at, metadata`

// Conversations.
const (
	// selectConversation reads a conversation whether or not it expired.
	selectConversation = `SELECT ` + conversationCols + ` FROM conversations WHERE tenant = ?1 AND id = ?2`

	// selectLiveConversation reads a conversation not expired at ?3.
	selectLiveConversation = selectConversation + ` AND ` + liveCond

	// selectPage lists the tenant's live conversations with IDs after ?2.
	selectPage = `SELECT ` + conversationCols + ` FROM conversations
		WHERE tenant = ?1 AND id > ?2 AND ` + liveCond + ` ORDER BY id LIMIT ?4`

	// selectAppendConversation reads what an append needs of a
	// conversation, expired or not: conversationCols but the key, then its
	// number. The committer runs it once per append: each column is an
	// expression (unary +, a no-op) named with one letter, for which the
	// driver copies neither a declared type (an expression has none) nor
	// a name (Go keeps one-byte strings without allocating), where it
	// would copy both for a plain column at every run.
	selectAppendConversation = `SELECT +tokenizer a, +last_seq b, +tokens c, +system_tokens d, +turns e,
		+created_at f, +updated_at g, +expires_at h, +user_id i, +revision j, +num k
		FROM conversations WHERE tenant = ? AND id = ?`

	// advanceConversation is the conversation's part of an append without
	// an idempotency key, in one statement where another append reads the
	// row (selectAppendConversation) then writes it (updateConversation):
	// it adds the append's messages (count, tokens, system tokens, turns)
	// to the totals of a live conversation (not expired at the time bound
	// 9th) that keeps its seqs within the 10th bound and passes the
	// append's conditions (the expected last seq, revision, tokenizer and
	// user, each NULL when there is none), sets its update time and,
	// unless NULL, its expiry, and returns the new row as
	// selectAppendConversation reads it. It matches no row otherwise, and
	// the append then takes the way that reads first (and refuses).
	advanceConversation = `UPDATE conversations SET last_seq = last_seq + ?, tokens = tokens + ?,
		system_tokens = system_tokens + ?, turns = turns + ?, updated_at = ?, expires_at = coalesce(?, expires_at)
		WHERE tenant = ? AND id = ? AND (expires_at IS NULL OR expires_at > ?) AND last_seq <= ? AND num IS NOT NULL
		AND last_seq IS coalesce(?, last_seq) AND revision IS coalesce(?, revision)
		AND tokenizer IS coalesce(?, tokenizer) AND user_id IS coalesce(?, user_id)
		RETURNING +tokenizer a, +last_seq b, +tokens c, +system_tokens d, +turns e,
		+created_at f, +updated_at g, +expires_at h, +user_id i, +revision j, +num k`

	// insertConversation creates a conversation with number ?12.
	insertConversation = `INSERT INTO conversations (` + insertCols + `, num)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)`

	// updateConversation stores an existing conversation's new totals; its
	// tokenizer, creation time, user and number stay those of its first
	// append. A plain UPDATE, not an upsert returning the number: the
	// append read the row (and the number) already, and the committer runs
	// this once per append, one after the other.
	updateConversation = `UPDATE conversations SET last_seq = ?, tokens = ?, system_tokens = ?, turns = ?,
		updated_at = ?, expires_at = ?
		WHERE tenant = ? AND id = ?`

	// nextConversationNum hands out the number of a new conversation.
	nextConversationNum = `UPDATE counters SET value = value + 1 WHERE name = 'conversation' RETURNING value`

	// deleteConversation deletes a conversation; its messages, keys,
	// summary and facts go with it by ON DELETE CASCADE.
	deleteConversation = `DELETE FROM conversations WHERE tenant = ?1 AND id = ?2`

	// deleteLiveConversation deletes a conversation not expired at ?3.
	deleteLiveConversation = deleteConversation + ` AND ` + liveCond

	// sweepExpired deletes up to ?2 conversations expired at ?1.
	sweepExpired = `DELETE FROM conversations WHERE (tenant, id) IN (
		SELECT tenant, id FROM conversations WHERE expires_at <= ?1 LIMIT ?2)`

	// purgeInactive deletes up to ?2 conversations of any tenant last
	// updated before ?1.
	purgeInactive = `DELETE FROM conversations WHERE (tenant, id) IN (
		SELECT tenant, id FROM conversations WHERE updated_at < ?1 LIMIT ?2)`

	// purgeInactiveTenant deletes up to ?2 conversations of tenant ?3 last
	// updated before ?1.
	purgeInactiveTenant = `DELETE FROM conversations WHERE (tenant, id) IN (
		SELECT tenant, id FROM conversations WHERE tenant = ?3 AND updated_at < ?1 LIMIT ?2)`
)

// Messages and idempotency keys.
const (
	insertMessage = `INSERT INTO messages (tenant, conv_id, seq, role, content, name, tool_calls, tool_call_id,
		tokens, tokens_before, turn, created_at, metadata, receipt)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

	// selectReceipts reads up to ?4 receipts of messages with seq > ?3,
	// along the messages_seq index.
	selectReceipts = `SELECT seq, receipt FROM messages INDEXED BY messages_seq
		WHERE tenant = ?1 AND conv_id = ?2 AND seq > ?3 AND receipt IS NOT NULL ORDER BY seq LIMIT ?4`

	// selectRange reads the messages with seq > ?3, at most ?4 of them
	// (a negative limit is none), along the messages_seq index.
	selectRange = `SELECT ` + messageCols + ` FROM messages
		WHERE tenant = ?1 AND conv_id = ?2 AND seq > ?3 ORDER BY seq LIMIT ?4`

	// selectConversationSince reads a live conversation (?3) and up to ?5
	// of its messages after seq ?4 in one statement, so in one implicit
	// read transaction: a row per message, or one row with NULL message
	// columns when there is none. Its first columns are conversationCols
	// (of c), then messageCols (of m); the subquery is the range of
	// selectRange.
	selectConversationSince = `SELECT c.tenant, c.id, c.tokenizer, c.last_seq, c.tokens, c.system_tokens, c.turns,
		c.created_at, c.updated_at, c.expires_at, c.user_id, c.revision,
		m.seq, m.role, m.content, m.name, m.tool_calls, m.tool_call_id, m.tokens, m.created_at, m.metadata
		FROM conversations c LEFT JOIN (SELECT ` + messageCols + ` FROM messages
			WHERE tenant = ?1 AND conv_id = ?2 AND seq > ?4 ORDER BY seq LIMIT ?5) m ON 1
		WHERE c.tenant = ?1 AND c.id = ?2 AND (c.expires_at IS NULL OR c.expires_at > ?3)`

	// selectTailStart finds the newest message before the run a tail
	// query selects; the run starts at the message after it (no row: at
	// message 1). ?3 and ?4 are the run's bounds, 0 for a bound not asked
	// for (no message has tokens_before or turn below 0):
	//
	//   - a budget B: with T the conversation's total, the run from message
	//     s on sums to T - tokens_before(s), so it starts at the oldest
	//     message with tokens_before >= T - B, right after the newest with
	//     tokens_before < T - B (?3); ties (system messages, zero-token
	//     ones) go to the oldest, which the longest run includes;
	//   - N turns: turn K = turns - N + 1 starts at its user message, right
	//     after the newest message with turn < K (?4), turn stepping up by
	//     one at each user message.
	//
	// Both columns never decrease with seq, so the newest message below
	// either bound is the one before the shorter run. The covering index
	// messages_seq is walked back from the newest message over that run
	// alone, which the tail reads next.
	selectTailStart = `SELECT seq FROM messages
		WHERE tenant = ?1 AND conv_id = ?2 AND (tokens_before < ?3 OR turn < ?4)
		ORDER BY seq DESC LIMIT 1`

	// selectSystem reads the system messages along the partial index
	// messages_system.
	selectSystem = `SELECT ` + messageCols + ` FROM messages
		WHERE tenant = ?1 AND conv_id = ?2 AND role = 'system' ORDER BY seq`

	selectIdempotencyKey = `SELECT first_seq, count, fingerprint FROM idempotency_keys
		WHERE tenant = ?1 AND conv_id = ?2 AND key = ?3`

	insertIdempotencyKey = `INSERT INTO idempotency_keys (tenant, conv_id, key, first_seq, count, fingerprint)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6)`
)

// Summaries: one row per conversation, found through summaries_conv.
const (
	// summaryCols are the columns scanSummary reads, in its order.
	summaryCols = `text, covers_seq, tokens, summarizer, created_at`

	selectSummary = `SELECT ` + summaryCols + ` FROM summaries WHERE tenant = ?1 AND conv_id = ?2`

	// selectSummaryCovers reads what PutSummary compares prev with.
	selectSummaryCovers = `SELECT covers_seq FROM summaries WHERE tenant = ?1 AND conv_id = ?2`

	// upsertSummary stores the conversation's summary, replacing the one
	// there was.
	upsertSummary = `INSERT INTO summaries (tenant, conv_id, ` + summaryCols + `)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
		ON CONFLICT (tenant, conv_id) DO UPDATE SET
			text = excluded.text, covers_seq = excluded.covers_seq, tokens = excluded.tokens,
			summarizer = excluded.summarizer, created_at = excluded.created_at`
)

// Facts: the current values through the partial index facts_current, a
// key's history along the primary key (tenant, conv_id, key, version).
const (
	// factCols are the columns queryFacts reads, in its order.
	factCols = `key, value, source_seq, set_by, confidence, created_at`

	// selectFacts reads the current value of every key, in byte order of
	// key, from facts_current: its cost follows the number of keys, not
	// their history. Without INDEXED BY the planner, knowing nothing of how
	// much history there is, takes the primary key, which yields the same
	// order but walks every old value too.
	selectFacts = `SELECT ` + factCols + ` FROM facts INDEXED BY facts_current
		WHERE tenant = ?1 AND conv_id = ?2 AND current = 1 ORDER BY key`

	// selectFactHistory reads every value of key ?3, oldest first.
	selectFactHistory = `SELECT ` + factCols + ` FROM facts
		WHERE tenant = ?1 AND conv_id = ?2 AND key = ?3 ORDER BY version`

	// retireFact makes key ?3's current value history and returns its
	// version, the key's newest (no row: the key has no value).
	retireFact = `UPDATE facts SET current = 0
		WHERE tenant = ?1 AND conv_id = ?2 AND key = ?3 AND current = 1 RETURNING version`

	insertFact = `INSERT INTO facts (tenant, conv_id, key, version, current, value, source_seq, set_by,
		confidence, created_at)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)`

	// deleteFact deletes key ?3 with its history.
	deleteFact = `DELETE FROM facts WHERE tenant = ?1 AND conv_id = ?2 AND key = ?3`
)

// The lexical index (migrations/0003_search.sql). A conversation's rows in
// message_terms have rowids num<<32 | seq, and each of its terms carries
// the prefix termPrefix(num).
const (
	// selectLiveConversationNum reads the number of a conversation not
	// expired at ?3.
	selectLiveConversationNum = `SELECT num FROM conversations WHERE tenant = ?1 AND id = ?2 AND ` + liveCond

	insertTerms = `INSERT INTO message_terms (rowid, terms) VALUES (?, ?)`

	// selectPostings reads the newest rowids, at most ?4, in [?2, ?3) of
	// the rows holding the token ?1 (an FTS5 string, "..."). FTS5 takes
	// the MATCH, the rowid range and the descending order itself (plan:
	// INDEX n:M<>, no sort), so it seeks to the end of the range in the
	// token's doclist and stops after ?4 rows.
	selectPostings = `SELECT rowid FROM message_terms
		WHERE message_terms MATCH ?1 AND rowid >= ?2 AND rowid < ?3 ORDER BY rowid DESC LIMIT ?4`

	// selectMessagesAt reads the messages whose seqs are in the JSON array
	// ?3, oldest first: one seek in messages_seq per seq.
	selectMessagesAt = `SELECT ` + messageCols + ` FROM messages
		WHERE tenant = ?1 AND conv_id = ?2 AND seq IN (SELECT value FROM json_each(?3)) ORDER BY seq`

	// selectUnindexed finds a conversation with messages stored before the
	// index existed and not indexed yet.
	selectUnindexed = `SELECT tenant, id, num, unindexed_seq FROM conversations INDEXED BY conversations_unindexed
		WHERE unindexed_seq > 0 ORDER BY num LIMIT 1`

	// setUnindexed records that the conversation's messages after ?3 are
	// indexed.
	setUnindexed = `UPDATE conversations SET unindexed_seq = ?3 WHERE tenant = ?1 AND id = ?2`
)

// writeStatements are prepared on the write pool, readStatements on the
// read pool.
var (
	writeStatements = []string{
		selectAppendConversation, advanceConversation, selectLiveConversation, insertConversation, updateConversation, deleteConversation, deleteLiveConversation,
		sweepExpired, purgeInactive, purgeInactiveTenant,
		insertMessage, selectRange, selectIdempotencyKey, insertIdempotencyKey,
		selectSystem, selectTailStart, // AppendTail's reads
		selectSummaryCovers, upsertSummary,
		retireFact, insertFact, deleteFact,
		nextConversationNum, insertTerms, selectUnindexed, setUnindexed,
		selectFactMark, setFactMark,
		selectUserConversationIDs, retireUserFact, insertUserFact, deleteUserFact, deleteUserFacts,
		startErasure, finishErasure, selectErasure,
		insertUserPosted, insertUserPostings, selectUserUnindexed, setUserUnindexed, // usersearch.go
	}
	readStatements = []string{
		selectLiveConversation, selectPage,
		selectRange, selectConversationSince, selectTailStart, selectSystem, selectReceipts,
		selectSummary, selectFacts, selectFactHistory,
		selectLiveConversationNum, selectPostings, selectMessagesAt,
		selectFactMark, selectFactLaggards,
		selectUserPage, selectUserFacts, selectUserFactHistory, selectUsers, selectErasure,
		selectUserPostings, selectUserPostingsBelow, selectUserPostingsTied, selectUserPostingsRest, selectUserIdents, selectExpiredNums, selectUserConversations, selectUserMessagesAt, // usersearch.go
	}
)
