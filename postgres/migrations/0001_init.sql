-- 0001: conversations, their messages and their idempotency keys.
--
-- Key columns use the "C" collation so that List's ID order is byte order,
-- as in every other store, whatever the database's default collation.

CREATE TABLE conversations (
    tenant        text COLLATE "C" NOT NULL,
    id            text COLLATE "C" NOT NULL,
    tokenizer     text NOT NULL DEFAULT '',
    last_seq      bigint NOT NULL DEFAULT 0,
    tokens        bigint NOT NULL DEFAULT 0, -- running total of non-system tokens
    system_tokens bigint NOT NULL DEFAULT 0,
    turns         bigint NOT NULL DEFAULT 0, -- user messages so far
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL,
    expires_at    timestamptz,               -- NULL: never
    PRIMARY KEY (tenant, id)
);

-- Sweep and PurgeInactive.
CREATE INDEX conversations_expires_at ON conversations (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX conversations_updated_at ON conversations (updated_at);

CREATE TABLE messages (
    tenant       text COLLATE "C" NOT NULL,
    conv_id      text COLLATE "C" NOT NULL,
    seq          bigint NOT NULL,
    role         text NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
    content      bytea NOT NULL, -- UTF-8; bytea because text cannot hold NUL
    name         text NOT NULL DEFAULT '',
    tool_calls   jsonb,          -- NULL: none; [] is kept as []
    tool_call_id text NOT NULL DEFAULT '',
    tokens       bigint NOT NULL CHECK (tokens >= 0),
    -- cum is the running total of non-system tokens up to and including this
    -- message, so it never decreases along seq; turn counts the user messages
    -- up to and including this one (0 before the first).
    cum          bigint NOT NULL,
    turn         bigint NOT NULL,
    created_at   timestamptz NOT NULL,
    metadata     jsonb,
    PRIMARY KEY (tenant, conv_id, seq)
);

-- Tail by tokens: the first message whose cum reaches total - budget.
CREATE INDEX messages_cum ON messages (tenant, conv_id, cum, seq);
-- Tail by turns: the user message that starts a given turn.
CREATE UNIQUE INDEX messages_user_turn ON messages (tenant, conv_id, turn) WHERE role = 'user';
-- System: the pinned messages, without reading the rest.
CREATE INDEX messages_system ON messages (tenant, conv_id, seq) WHERE role = 'system';

CREATE TABLE idempotency (
    tenant     text COLLATE "C" NOT NULL,
    conv_id    text COLLATE "C" NOT NULL,
    key_hash   bytea NOT NULL, -- SHA-256 of the key: any key fits, NUL included
    first_seq  bigint NOT NULL,
    count      integer NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (tenant, conv_id, key_hash)
);
