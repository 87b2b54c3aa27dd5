-- 0003: the lexical index chatmem.Searcher reads (PolicyRecall).
--
-- message_terms holds one row per (message, term) posting, for the terms
-- chatmem.IndexTerms gives the message; the append that stores a message
-- writes its postings in the same transaction, and they are deleted with
-- their conversation, like its messages. A term's postings in one
-- conversation are one range of the primary key, so "the newest n postings
-- of term t before seq b" is a backward index scan that stops after n
-- entries, whatever the length of the history. (A GIN index over a tsvector
-- cannot do that: it yields every match of the term, which must then be
-- sorted by seq, so its cost grows with the conversation.)

-- Postings name their conversation by conversations.num, a number of its
-- own, rather than by (tenant, id): there are about ten postings per
-- message, each in the table and in its primary key, and the conversation's
-- key would be most of their size (twice 37 bytes for UUIDs). A
-- conversation keeps its num while its row lives, an expired one started
-- afresh included; one deleted and created again gets a new one.
ALTER TABLE conversations ADD COLUMN num bigint GENERATED ALWAYS AS IDENTITY;

CREATE TABLE message_terms (
    conv bigint NOT NULL,                -- conversations.num
    term text COLLATE "C" NOT NULL,
    seq  bigint NOT NULL,
    PRIMARY KEY (conv, term, seq)
);

-- The messages stored before this migration are indexed by the store (in
-- Go: the terms come from chatmem.IndexTerms) when it opens, one batch per
-- transaction: terms_backfill lists each conversation's messages still to
-- index, those with done < seq <= upto, and loses the row when they are.
-- Messages appended after this migration are indexed by their append.
CREATE TABLE terms_backfill (
    tenant  text COLLATE "C" NOT NULL,
    conv_id text COLLATE "C" NOT NULL,
    done    bigint NOT NULL,
    upto    bigint NOT NULL,
    PRIMARY KEY (tenant, conv_id)
);

INSERT INTO terms_backfill (tenant, conv_id, done, upto)
SELECT tenant, id, 0, last_seq FROM conversations WHERE last_seq > 0;
