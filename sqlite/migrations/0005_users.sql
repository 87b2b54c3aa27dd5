-- 0005: users. A conversation may belong to a user of its tenant (bound by
-- the append that creates it, never changed), and a user has facts of its
-- own, with their history, apart from every conversation's.

-- user_id is NULL for a conversation without a user.
ALTER TABLE conversations ADD COLUMN user_id TEXT;

-- UserConversations and DeleteUser: a user's conversations in ID order.
CREATE INDEX conversations_user ON conversations (tenant, user_id, id) WHERE user_id IS NOT NULL;

-- user_facts is facts (0002) for a user instead of a conversation, with
-- conv_id the conversation a value was taken from ('' for none). It
-- references no conversation: a user fact outlives the conversation that
-- stated it, and goes with the user (DeleteUser).
CREATE TABLE user_facts (
    tenant     TEXT    NOT NULL,
    user_id    TEXT    NOT NULL,
    key        TEXT    NOT NULL,
    version    INTEGER NOT NULL CHECK (version > 0),
    current    INTEGER NOT NULL CHECK (current IN (0, 1)),
    value      TEXT    NOT NULL CHECK (value <> ''),
    conv_id    TEXT    NOT NULL,
    source_seq INTEGER NOT NULL CHECK (source_seq >= 0),
    set_by     TEXT    NOT NULL,
    confidence REAL    NOT NULL CHECK (confidence >= 0 AND confidence <= 1),
    created_at INTEGER NOT NULL,
    PRIMARY KEY (tenant, user_id, key, version)
) STRICT, WITHOUT ROWID;

CREATE UNIQUE INDEX user_facts_current ON user_facts (tenant, user_id, key) WHERE current = 1;
