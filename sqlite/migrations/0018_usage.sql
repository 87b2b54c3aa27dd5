-- 0018: the cost ledger (chatmem.UsageStore): the usage of model calls in
-- hour buckets, one row per tenant, hour, user, conversation, model and
-- kind of call, which every process adds to. hour is the bucket's start
-- in Unix seconds; user_id and conversation are '' for none (and after
-- the user's erasure, which moves the user's rows to those).
CREATE TABLE usage (
    tenant          TEXT    NOT NULL,
    hour            INTEGER NOT NULL,
    user_id         TEXT    NOT NULL,
    conversation    TEXT    NOT NULL,
    model           TEXT    NOT NULL,
    kind            TEXT    NOT NULL,
    calls           INTEGER NOT NULL,
    input           INTEGER NOT NULL,
    cached_input    INTEGER NOT NULL,
    output          INTEGER NOT NULL,
    reasoning       INTEGER NOT NULL,
    embedding_input INTEGER NOT NULL,
    PRIMARY KEY (tenant, hour, user_id, conversation, model, kind)
) STRICT, WITHOUT ROWID;

CREATE INDEX usage_by_user ON usage (tenant, user_id);
