-- 0008: leases on a conversation's derived work (chatmem.Leaser), so that
-- of several replicas over one database only one calls the summarizer, or
-- the extractors, for a conversation at a time. expires is on the
-- server's clock, which every replica shares; wanted is set when another
-- holder was refused. A released lease is deleted; an expired one is taken
-- over in place.
CREATE TABLE leases (
    tenant       text        NOT NULL,
    conversation text        NOT NULL,
    kind         text        NOT NULL,
    holder       text        NOT NULL,
    expires      timestamptz NOT NULL,
    wanted       boolean     NOT NULL DEFAULT false,
    PRIMARY KEY (tenant, conversation, kind)
);
