-- 0006: the fact extraction watermark (chatmem.FactMarker).
--
-- fact_seq is the last message whose facts were extracted and stored; the
-- facts and the mark are written in one transaction. A conversation
-- created again (after Delete or expiry) is a new row, so its mark starts
-- at 0. Facts of the messages stored before this migration were extracted
-- (or dropped) as they arrived: they count as extracted, so an upgrade
-- does not send every old message to the extractors again.

ALTER TABLE conversations ADD COLUMN fact_seq INTEGER NOT NULL DEFAULT 0;

UPDATE conversations SET fact_seq = last_seq;
