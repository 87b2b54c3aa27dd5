-- 0018: the cost ledger (chatmem.UsageStore): the usage of model calls in
-- hour buckets, one row per tenant, hour, user, conversation, model and
-- kind of call, which every process adds to. user_id and conversation are
-- '' for none (and after the user's erasure, which moves the user's rows
-- to those). Text columns use the "C" collation, so that groups come in
-- byte order, as in every other store.
CREATE TABLE usage (
    tenant          text COLLATE "C" NOT NULL,
    hour            timestamptz NOT NULL,
    user_id         text COLLATE "C" NOT NULL,
    conversation    text COLLATE "C" NOT NULL,
    model           text COLLATE "C" NOT NULL,
    kind            text COLLATE "C" NOT NULL,
    calls           bigint NOT NULL,
    input           bigint NOT NULL,
    cached_input    bigint NOT NULL,
    output          bigint NOT NULL,
    reasoning       bigint NOT NULL,
    embedding_input bigint NOT NULL,
    PRIMARY KEY (tenant, hour, user_id, conversation, model, kind)
);

CREATE INDEX usage_by_user ON usage (tenant, user_id);
