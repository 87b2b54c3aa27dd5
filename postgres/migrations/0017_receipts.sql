-- 0017: receipts. The receipt of a window (chatmem.Receipt, its JSON) is
-- kept with the reply it produced, in that message's row: it is written
-- by the same statement, and deleted with the row (a rewind, the
-- conversation's deletion, a user's erasure). NULL: none. Stored as bytea,
-- the bytes as given.
ALTER TABLE messages ADD COLUMN receipt bytea;
