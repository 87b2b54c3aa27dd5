-- 0003: the lexical index PolicyRecall searches (chatmem.Searcher).
--
-- Every conversation gets a number, num, unique in the file and never
-- reused (counters hands them out), so that index entries can name their
-- conversation in a few bytes. Each non-system message is one row of the
-- FTS5 table message_terms:
--
--   rowid = num << 32 | seq
--   terms = its chatmem.IndexTerms, each prefixed with "<num in base 36>_",
--           separated by spaces
--
-- The prefix gives each (conversation, term) pair a doclist of its own, so
-- that reading a term's newest postings in one conversation never walks
-- past the postings of other conversations (FTS5 keeps one doclist per
-- token, in rowid order, and moves through it page by page). The terms are
-- lower-cased and stemmed in Go already; the ascii tokenizer with ' and _ as
-- token characters splits them at the spaces and changes nothing else
-- (non-ASCII bytes are token characters to it, ASCII letters are already
-- lower case). The table stores no text (content=''), only the postings
-- (detail=none), and contentless_delete=1 lets the trigger below delete a
-- conversation's rows by rowid range.
--
-- Messages stored before this migration are indexed by Open, in batches:
-- unindexed_seq is the newest message of the conversation not indexed yet
-- (0: none), and the backfill indexes them newest first, lowering it batch
-- by batch. Appends index their own messages from the start.

ALTER TABLE conversations ADD COLUMN num INTEGER;
ALTER TABLE conversations ADD COLUMN unindexed_seq INTEGER NOT NULL DEFAULT 0;

WITH numbered AS (SELECT tenant, id, row_number() OVER (ORDER BY tenant, id) AS num FROM conversations)
UPDATE conversations SET num = numbered.num, unindexed_seq = last_seq
FROM numbered WHERE conversations.tenant = numbered.tenant AND conversations.id = numbered.id;

CREATE UNIQUE INDEX conversations_num ON conversations (num);
-- The backfill finds the conversations it has still to index here.
CREATE INDEX conversations_unindexed ON conversations (num) WHERE unindexed_seq > 0;

-- counters holds the last number handed out of each sequence: 'conversation'
-- for conversations.num.
CREATE TABLE counters (
    name  TEXT    NOT NULL PRIMARY KEY,
    value INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

INSERT INTO counters (name, value) SELECT 'conversation', coalesce(max(num), 0) FROM conversations;

CREATE VIRTUAL TABLE message_terms USING fts5 (
    terms,
    content = '',
    contentless_delete = 1,
    detail = none,
    tokenize = "ascii tokenchars '''_'"
);

-- A conversation's index rows go with it, in the same transaction, however
-- it ends (Delete, Sweep, PurgeInactive, or the append that restarts an
-- expired conversation), as its messages go by ON DELETE CASCADE.
CREATE TRIGGER conversations_unindex AFTER DELETE ON conversations BEGIN
    DELETE FROM message_terms WHERE rowid >= old.num * 4294967296 AND rowid < (old.num + 1) * 4294967296;
END;
