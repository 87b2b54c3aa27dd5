-- 0012: one index of a conversation's messages instead of three.
--
-- An append writes a leaf page of every index it adds an entry to, and
-- each page it writes is a WAL frame at COMMIT: a group of appends to
-- distinct conversations wrote a page per conversation in each of the
-- indexes a message went to (messages_seq, messages_budget and, for a user
-- message, messages_turn). Now it goes to one, messages_seq, which also
-- holds tokens_before and turn, so that it covers where a tail starts:
--
--   - tokens_before and turn never decrease with seq (tokens are never
--     negative; turn counts the user messages among 1..seq);
--   - a budget's run starts after the newest message with tokens_before
--     < T - B, and turn K after the newest message with turn < K (turn
--     steps up by one at each user message): both found by walking the
--     index back from the conversation's newest message over the messages
--     the tail is made of, which the read that follows reads anyway.
--
-- The index is no longer UNIQUE (a unique index on these five columns
-- would not keep two messages from sharing a seq): seq is unique because
-- every append takes it from the conversation's row (last_seq + 1) in the
-- transaction that writes both, behind the store's single writer, as the
-- conformance suite checks. Building the index reads every message once,
-- when Open migrates a database written before.
DROP INDEX messages_budget;
DROP INDEX messages_turn;
DROP INDEX messages_seq;
CREATE INDEX messages_seq ON messages (tenant, conv_id, seq, tokens_before, turn);
