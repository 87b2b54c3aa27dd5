-- 0019: the conversation's revision (chatmem.Conversation.Revision), which
-- every rewind that removes messages and every redaction moves on, so that
-- a process that keeps messages of the conversation (the tail cache) knows
-- them stale. Conversations stored before start at 0, as new ones do.
ALTER TABLE conversations ADD COLUMN revision INTEGER NOT NULL DEFAULT 0;
