-- 0015: the user index (0009) as a B-tree of postings instead of FTS5.
--
-- UserPostings returns a term's newest messages of a user. With FTS5 it
-- read the term's ids from each segment's doclist, then named each id in
-- user_index: one seek per posting, in pages all over a large file. In
-- WAL mode a read connection's page cache is emptied whenever another
-- connection has committed, so a turn (an append, then the read) read all
-- those pages again: about 580 a turn across a user's 1,000,000 messages
-- against 65 across 1,000. Here each (user, term) pair is one run of user_postings in date
-- order, newest last, each posting naming its message: a term's newest
-- postings are one range read, a page or two.
--
--   uh   = a 64-bit hash of tenant and user ID (as 0009's prefix was): it
--          holds no user ID; a hash shared by two users costs a filter
--          (every hit is checked against its conversation's tenant and
--          user), never a wrong answer
--   term = one of the message's chatmem.IndexTerms
--   at   = the message's created_at, Unix nanoseconds
--   conv = conversations.num, seq = the message's seq
--
-- The key orders a date's postings by conversation number, where
-- UserPostings orders them by conversation ID: it reads the rest of a
-- date's postings where its read stops inside one (usersearch.go).
CREATE TABLE user_postings (
    uh   INTEGER NOT NULL,
    term TEXT    NOT NULL,
    at   INTEGER NOT NULL,
    conv INTEGER NOT NULL,
    seq  INTEGER NOT NULL,
    PRIMARY KEY (uh, term, at, conv, seq)
) STRICT, WITHOUT ROWID;

-- The terms each message was posted under (a JSON array), by
-- conversation: what deleting a conversation's postings needs, since the
-- postings are keyed by user and term.
CREATE TABLE user_posted (
    conv  INTEGER NOT NULL, -- conversations.num
    seq   INTEGER NOT NULL,
    uh    INTEGER NOT NULL,
    at    INTEGER NOT NULL,
    terms TEXT    NOT NULL,
    PRIMARY KEY (conv, seq)
) STRICT, WITHOUT ROWID;

-- A conversation's postings go with it, in the same transaction, however
-- it ends.
DROP TRIGGER conversations_user_unindex;
CREATE TRIGGER conversations_user_unpost AFTER DELETE ON conversations WHEN old.user_id IS NOT NULL BEGIN
    DELETE FROM user_postings WHERE (uh, term, at, conv, seq) IN (
        SELECT p.uh, t.value, p.at, p.conv, p.seq FROM user_posted p, json_each(p.terms) t WHERE p.conv = old.num);
    DELETE FROM user_posted WHERE conv = old.num;
END;

-- The FTS5 index goes; Open posts the messages of every conversation with
-- a user again (Store.backfillUsers, as after 0009), one conversation
-- after another, in batches, before it returns: about 5 minutes per
-- million messages on a 2-core machine. A
-- process that has the file open meanwhile finds only what was posted.
DROP TABLE user_terms;
DROP TABLE user_index;
UPDATE conversations SET user_unindexed_seq = last_seq WHERE user_id IS NOT NULL;
