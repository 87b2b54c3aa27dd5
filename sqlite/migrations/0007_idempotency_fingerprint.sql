-- 0007: the fingerprint of the request each idempotency key was applied
-- with (chatmem.AppendOptions.Fingerprint), so that the key reused with
-- other messages is refused rather than replayed. Keys stored before have
-- none ('' matches any).
ALTER TABLE idempotency_keys ADD COLUMN fingerprint TEXT NOT NULL DEFAULT '';
