-- 0002: each conversation's rolling summary and its facts, with their
-- history. Both are deleted with their conversation, in the same
-- transaction (Delete, Sweep, PurgeInactive, and an append that restarts an
-- expired conversation).

CREATE TABLE summaries (
    tenant     text COLLATE "C" NOT NULL,
    conv_id    text COLLATE "C" NOT NULL,
    text       bytea NOT NULL CHECK (length(text) > 0), -- UTF-8; bytea as messages.content
    covers_seq bigint NOT NULL CHECK (covers_seq > 0),
    tokens     bigint NOT NULL,
    summarizer text NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (tenant, conv_id)
);

CREATE TABLE facts (
    tenant     text COLLATE "C" NOT NULL,
    conv_id    text COLLATE "C" NOT NULL,
    key        text COLLATE "C" NOT NULL, -- "C": Facts orders keys by byte
    -- version numbers a key's values 1, 2, ... in the order they were set;
    -- current marks the newest, the key's value now.
    version    bigint NOT NULL CHECK (version > 0),
    current    boolean NOT NULL,
    value      text NOT NULL CHECK (value <> ''),
    source_seq bigint NOT NULL CHECK (source_seq >= 0),
    set_by     text NOT NULL,
    confidence double precision NOT NULL CHECK (confidence >= 0 AND confidence <= 1),
    created_at timestamptz NOT NULL,
    PRIMARY KEY (tenant, conv_id, key, version)
);

-- Facts: the current value of every key, in key order, without reading
-- the history; unique, so no key ever has two current values.
CREATE UNIQUE INDEX facts_current ON facts (tenant, conv_id, key) WHERE current;
