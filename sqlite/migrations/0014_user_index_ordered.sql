-- 0014: user_index rows say whether they sort after every row of their
-- millisecond with a lower id (0009).
--
-- UserPostings returns a term's newest postings in the order of the
-- messages' dates, then conversation IDs, then seqs, while ids order a
-- millisecond's messages by their slot, the order they were indexed in.
-- Where a term's read stops inside a millisecond it read the rest of that
-- millisecond to sort it, and one Append dates all its messages alike: a
-- conversation imported or filled in one call is one millisecond of up to
-- thousands of rows. A row whose ordered is 1 sorts after every row of
-- its millisecond with a lower id, as it did when it was indexed (deleting
-- rows keeps that true); when the rows a read keeps of the millisecond
-- all say so, the rows it did not read sort below them and are not read.
--
-- The rows indexed before this migration say so when every row of their
-- millisecond up to them, in id order, sorts after the one before it,
-- which is what indexing them would have said had none been deleted since
-- (and is true all the same): one pass over user_index in id order (a row's
-- millisecond is its id >> 18), naming each row's conversation.
ALTER TABLE user_index ADD COLUMN ordered INTEGER NOT NULL DEFAULT 0;

UPDATE user_index SET ordered = 1 WHERE id IN (
    SELECT id FROM (
        SELECT id, sum(descent) OVER (PARTITION BY ms ORDER BY id ROWS UNBOUNDED PRECEDING) AS descents
        FROM (
            SELECT u.id, u.id >> 18 AS ms,
                CASE
                    WHEN lag(u.id) OVER w IS NULL THEN 0
                    WHEN u.at <> lag(u.at) OVER w THEN u.at < lag(u.at) OVER w
                    WHEN c.id <> lag(c.id) OVER w THEN c.id < lag(c.id) OVER w
                    ELSE u.seq <= lag(u.seq) OVER w
                END AS descent
            FROM user_index u JOIN conversations c ON c.num = u.conv
            WINDOW w AS (PARTITION BY u.id >> 18 ORDER BY u.id)
        )
    )
    WHERE descents = 0
);
