-- 0008: leases on a conversation's derived work (chatmem.Leaser), so that
-- of several processes over one file only one calls the summarizer, or the
-- extractors, for a conversation at a time. expires is in Unix
-- nanoseconds; wanted is set when another holder was refused. A released
-- lease is deleted; an expired one is taken over in place.
CREATE TABLE leases (
    tenant       TEXT    NOT NULL,
    conversation TEXT    NOT NULL,
    kind         TEXT    NOT NULL,
    holder       TEXT    NOT NULL,
    expires      INTEGER NOT NULL,
    wanted       INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, conversation, kind)
) WITHOUT ROWID;
