-- 0001: conversations, their messages and idempotency keys.
--
-- Times are Unix nanoseconds (INTEGER). Every row carries the tenant, so no
-- statement of one tenant can reach another's rows. Text is bound with its
-- length, so a NUL byte is stored like any other (SQL string functions such
-- as length() would stop at it; the store uses none on message text).

CREATE TABLE conversations (
    tenant        TEXT    NOT NULL,
    id            TEXT    NOT NULL,
    tokenizer     TEXT    NOT NULL,
    last_seq      INTEGER NOT NULL, -- seq of the newest message = message count
    tokens        INTEGER NOT NULL, -- running total of non-system tokens
    system_tokens INTEGER NOT NULL, -- running total of system tokens
    turns         INTEGER NOT NULL, -- user messages so far
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    expires_at    INTEGER,          -- NULL: never
    PRIMARY KEY (tenant, id)
) STRICT, WITHOUT ROWID;

-- Sweep finds expired conversations, PurgeInactive stale ones.
CREATE INDEX conversations_expires ON conversations (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX conversations_updated ON conversations (updated_at);

-- messages keeps its rowid: content may be large, and WITHOUT ROWID tables
-- suit small rows. The unique index below is the logical primary key.
CREATE TABLE messages (
    tenant        TEXT    NOT NULL,
    conv_id       TEXT    NOT NULL,
    seq           INTEGER NOT NULL,
    role          TEXT    NOT NULL,
    content       TEXT    NOT NULL,
    name          TEXT    NOT NULL,
    tool_calls    TEXT,             -- JSON array; NULL when none
    tool_call_id  TEXT    NOT NULL,
    tokens        INTEGER NOT NULL,
    tokens_before INTEGER NOT NULL, -- non-system tokens of messages 1..seq-1
    turn          INTEGER NOT NULL, -- user messages among 1..seq
    created_at    INTEGER NOT NULL,
    metadata      TEXT,             -- JSON object; NULL when none
    FOREIGN KEY (tenant, conv_id) REFERENCES conversations (tenant, id) ON DELETE CASCADE
) STRICT;

-- Range, and the read of a tail once its first seq is known.
CREATE UNIQUE INDEX messages_seq ON messages (tenant, conv_id, seq);
-- Tail{Tokens: B}: tokens_before grows with seq, so the first message of the
-- newest run that fits B is the first entry with tokens_before >= tokens - B.
CREATE INDEX messages_budget ON messages (tenant, conv_id, tokens_before, seq);
-- Tail{Turns: N}: the N-th newest user message is the one with turn = turns - N + 1.
CREATE INDEX messages_turn ON messages (tenant, conv_id, turn, seq) WHERE role = 'user';
-- System: the pinned messages, read every turn.
CREATE INDEX messages_system ON messages (tenant, conv_id, seq) WHERE role = 'system';

CREATE TABLE idempotency_keys (
    tenant    TEXT    NOT NULL,
    conv_id   TEXT    NOT NULL,
    key       TEXT    NOT NULL,
    first_seq INTEGER NOT NULL, -- the append stored first_seq..first_seq+count-1
    count     INTEGER NOT NULL,
    PRIMARY KEY (tenant, conv_id, key),
    FOREIGN KEY (tenant, conv_id) REFERENCES conversations (tenant, id) ON DELETE CASCADE
) STRICT, WITHOUT ROWID;
