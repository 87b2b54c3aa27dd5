-- 0012: one index finds where a tail starts, for a budget and for a
-- number of turns, instead of two (messages_budget and messages_turn).
--
-- An append writes a leaf page of every index it adds an entry to, and
-- every page it writes is a WAL frame at COMMIT: a group of appends to
-- distinct conversations wrote a page per conversation in each of the
-- three indexes a user message went to (messages_seq, messages_budget,
-- messages_turn). Now it goes to two.
--
-- tokens_before and turn both never decrease with seq (tokens are never
-- negative; turn counts the user messages among 1..seq), so the index's
-- order (tokens_before, turn, seq) is the order of seq:
--
--   - a budget's start is the first entry with tokens_before >= T - B, one
--     seek as in messages_budget;
--   - turn K starts at the first message with turn >= K (turn steps up by
--     one at each user message, so that message is the K-th user message):
--     the entry after the newest one with turn < K, found by walking the
--     index backwards from the conversation's newest message over the
--     messages of the turns asked for, which the tail reads anyway.
DROP INDEX messages_budget;
DROP INDEX messages_turn;
CREATE INDEX messages_tail ON messages (tenant, conv_id, tokens_before, turn, seq);
