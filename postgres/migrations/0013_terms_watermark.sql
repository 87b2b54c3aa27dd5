-- 0013: the search index (message_terms, 0003 and 0009) is written after
-- the append, not by it: an append writes its messages and the
-- conversation's row, and terms_seq is the index's watermark, the last
-- seq up to which every message of the conversation has its postings.
-- IndexPending (chatmem.IndexCatcher: Memory's worker calls it every few
-- messages) indexes the messages past it and moves it on in one
-- statement; Postings and UserPostings call it themselves when it lags
-- behind what they are asked, so a message is found from the moment its
-- append returned, and a crash only delays the indexing.
--
-- Every message stored before this migration was indexed by its append
-- (or is listed in terms_backfill, which Open indexes before the store
-- answers anything).
ALTER TABLE conversations ADD COLUMN terms_seq bigint NOT NULL DEFAULT 0;

UPDATE conversations SET terms_seq = last_seq;
