-- 0004: the vectors of the optional embedding retriever
-- (chatmem.VectorStore).
--
-- message_vectors holds one row per (message, model): the message's vector
-- as little-endian float32s in a BLOB, under its conversation's number
-- (conversations.num, never reused). One model's vectors in one
-- conversation are one range of the primary key's index, so a search over
-- the messages in [before - span, before) reads those rows and no others,
-- whatever the length of the history; the similarity is computed by the
-- store, in Go. The rows go with their conversation by ON DELETE CASCADE,
-- however it ends (Delete, Sweep, PurgeInactive, or the append that
-- restarts an expired conversation), as its messages do.
--
-- The table keeps its rowid: a vector of 256 dimensions is a row of 1 kB,
-- which a WITHOUT ROWID table would spill to an overflow page (its rows
-- should stay under a twentieth of a page), while a table leaf holds it.

CREATE TABLE message_vectors (
    conv  INTEGER NOT NULL REFERENCES conversations (num) ON DELETE CASCADE,
    model TEXT    NOT NULL, -- chatmem.Embedder.Name
    seq   INTEGER NOT NULL,
    vec   BLOB    NOT NULL,
    PRIMARY KEY (conv, model, seq)
) STRICT;
