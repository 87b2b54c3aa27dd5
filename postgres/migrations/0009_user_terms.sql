-- 0009: the index of each user's messages across their conversations
-- (chatmem.UserSearcher), kept in message_terms (0003) itself.
--
-- A posting of a conversation with a user carries usr, a hash of tenant and
-- user ID (hashtextextended(tenant || '/' || user_id, 0); / is in no ID),
-- and at, the message's created_at; other postings have NULL in both. The
-- partial index message_terms_user orders a user's postings of a term by
-- date, so "the newest n" is a backward scan that stops after n entries,
-- whatever the length of the user's history. The postings go with their
-- conversation as they did, so nothing else is written or deleted; the
-- hash holds no user ID, and one shared by two users costs a filter (each
-- posting's conversation is checked, through conversations_num), never a
-- wrong answer.
ALTER TABLE message_terms ADD COLUMN usr bigint, ADD COLUMN at timestamptz;

UPDATE message_terms x
SET usr = hashtextextended(c.tenant || '/' || c.user_id, 0), at = m.created_at
FROM conversations c, messages m
WHERE c.num = x.conv AND c.user_id IS NOT NULL
  AND m.tenant = c.tenant AND m.conv_id = c.id AND m.seq = x.seq;

CREATE INDEX message_terms_user ON message_terms (usr, term, at, conv, seq) WHERE usr IS NOT NULL;

-- A posting names its conversation by num: UserPostings checks it here.
CREATE UNIQUE INDEX conversations_num ON conversations (num);
