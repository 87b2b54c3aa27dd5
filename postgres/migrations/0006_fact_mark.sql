-- 0006: the fact extraction watermark (chatmem.FactMarker).
--
-- fact_seq is the last message whose facts were extracted and stored, in
-- the conversation created at fact_of: an expired conversation started
-- afresh keeps its row (with a new created_at), so a mark of another
-- created_at counts as 0. The facts and the mark are written in one
-- transaction. Facts of the messages stored before this migration were
-- extracted (or dropped) as they arrived: they count as extracted, so an
-- upgrade does not send every old message to the extractors again.

ALTER TABLE conversations
    ADD COLUMN fact_seq bigint NOT NULL DEFAULT 0,
    ADD COLUMN fact_of  timestamptz;

UPDATE conversations SET fact_seq = last_seq, fact_of = created_at;
