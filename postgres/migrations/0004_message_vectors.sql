-- 0004: the vectors of the optional embedding retriever
-- (chatmem.VectorStore).
--
-- message_vectors holds one row per (message, model): the message's vector
-- as float32s, little-endian, in a bytea. Like message_terms, the rows name
-- their conversation by conversations.num and are deleted with it, in the
-- same transaction (Delete, Sweep, PurgeInactive, and an append that
-- restarts an expired conversation). One model's vectors in one
-- conversation are one range of the primary key, so a search over the
-- messages in [before - span, before) reads exactly those rows, whatever
-- the length of the history; the similarity is computed by the store, in
-- Go, as PostgreSQL has no vector type without an extension.

CREATE TABLE message_vectors (
    conv  bigint NOT NULL,            -- conversations.num
    model text COLLATE "C" NOT NULL,  -- chatmem.Embedder.Name
    seq   bigint NOT NULL,
    vec   bytea NOT NULL CHECK (length(vec) > 0 AND length(vec) % 4 = 0),
    PRIMARY KEY (conv, model, seq)
);

-- Vectors of more than about 500 dimensions (2 kB) are moved out of line;
-- EXTERNAL keeps them uncompressed there, as float noise does not compress
-- and the attempt costs every write and read.
ALTER TABLE message_vectors ALTER COLUMN vec SET STORAGE EXTERNAL;
