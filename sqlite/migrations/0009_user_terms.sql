-- 0009: the index of each user's messages across their conversations
-- (chatmem.UserSearcher), beside the per-conversation one of 0003.
--
-- Each non-system message of a conversation with a user is one row of
-- user_index and one row of the FTS5 table user_terms, both under the same
-- number id:
--
--   id    = the message's CreatedAt in milliseconds since 1678 (what Unix
--           nanoseconds in an int64 reach back to) << 18 | a slot, the
--           lowest free one of that millisecond
--   terms = its chatmem.IndexTerms, each prefixed with the user's prefix
--           ("u", a 64-bit hash of tenant and user ID in base 36, "_"),
--           separated by spaces
--
-- So each (user, term) pair has a doclist of its own, in the order of the
-- messages' dates: the newest postings are the end of that doclist, read
-- backwards, whatever the length of the user's history. user_index names
-- the message (conversations.num, seq) with its exact date, which orders
-- the messages of one millisecond. The prefix holds no user ID; a hash
-- shared by two users costs a filter (every hit is checked against the
-- conversation's tenant and user), never a wrong answer.
CREATE TABLE user_index (
    id   INTEGER PRIMARY KEY,
    conv INTEGER NOT NULL, -- conversations.num
    seq  INTEGER NOT NULL,
    at   INTEGER NOT NULL  -- the message's created_at, Unix nanoseconds
) STRICT;

-- The trigger below finds a conversation's rows here.
CREATE INDEX user_index_conv ON user_index (conv);

CREATE VIRTUAL TABLE user_terms USING fts5 (
    terms,
    content = '',
    contentless_delete = 1,
    detail = none,
    tokenize = "ascii tokenchars '''_'"
);

-- A conversation's rows go with it, in the same transaction, however it
-- ends, as its message_terms rows do (0003).
CREATE TRIGGER conversations_user_unindex AFTER DELETE ON conversations WHEN old.user_id IS NOT NULL BEGIN
    DELETE FROM user_terms WHERE rowid IN (SELECT id FROM user_index WHERE conv = old.num);
    DELETE FROM user_index WHERE conv = old.num;
END;

-- Messages of conversations with a user stored before this migration are
-- indexed by Open (Store.backfillUsers), as 0003's backfill does:
-- user_unindexed_seq is the newest message of the conversation the user
-- index lacks (0: none), lowered batch by batch. Appends index their own.
ALTER TABLE conversations ADD COLUMN user_unindexed_seq INTEGER NOT NULL DEFAULT 0;
UPDATE conversations SET user_unindexed_seq = last_seq WHERE user_id IS NOT NULL;
CREATE INDEX conversations_user_unindexed ON conversations (num) WHERE user_unindexed_seq > 0;
