-- 0002: each conversation's rolling summary and its facts, with their
-- history.
--
-- Both reference their conversation with ON DELETE CASCADE, as messages do,
-- so they go in the same transaction as the conversation row, however it
-- ends: Delete, Sweep, PurgeInactive, or the append that restarts an expired
-- conversation (it deletes the old row first). Times are Unix nanoseconds.

-- summaries keeps its rowid, like messages: the text may run to kilobytes,
-- and WITHOUT ROWID tables suit small rows. The unique index is the logical
-- primary key: one summary per conversation.
CREATE TABLE summaries (
    tenant     TEXT    NOT NULL,
    conv_id    TEXT    NOT NULL,
    text       TEXT    NOT NULL CHECK (text <> ''),
    covers_seq INTEGER NOT NULL CHECK (covers_seq > 0), -- the last message the text stands for
    tokens     INTEGER NOT NULL,
    summarizer TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    FOREIGN KEY (tenant, conv_id) REFERENCES conversations (tenant, id) ON DELETE CASCADE
) STRICT;

CREATE UNIQUE INDEX summaries_conv ON summaries (tenant, conv_id);

-- facts holds every value each key has had. version numbers a key's values
-- 1, 2, ... in the order they were recorded (FactHistory's order); current
-- marks the newest, the key's value now. Keys compare with BINARY, SQLite's
-- default collation, so Facts returns them in byte order.
CREATE TABLE facts (
    tenant     TEXT    NOT NULL,
    conv_id    TEXT    NOT NULL,
    key        TEXT    NOT NULL,
    version    INTEGER NOT NULL CHECK (version > 0),
    current    INTEGER NOT NULL CHECK (current IN (0, 1)),
    value      TEXT    NOT NULL CHECK (value <> ''),
    source_seq INTEGER NOT NULL CHECK (source_seq >= 0),
    set_by     TEXT    NOT NULL,
    confidence REAL    NOT NULL CHECK (confidence >= 0 AND confidence <= 1),
    created_at INTEGER NOT NULL,
    PRIMARY KEY (tenant, conv_id, key, version),
    FOREIGN KEY (tenant, conv_id) REFERENCES conversations (tenant, id) ON DELETE CASCADE
) STRICT, WITHOUT ROWID;

-- Facts: the current value of every key, in key order, without reading the
-- history; unique, so no key ever has two current values.
CREATE UNIQUE INDEX facts_current ON facts (tenant, conv_id, key) WHERE current = 1;
