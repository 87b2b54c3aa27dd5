-- 0016: erasure records. DeleteUser records that a user is being erased
-- (finished NULL) before it deletes anything, and when it completed
-- after: an append that would create a conversation bound to the user is
-- refused meanwhile, and afterwards for work that started before it
-- completed (chatmem.AppendOptions.Started). The user is named by a hash
-- (internal/erasure.ID), never by its ID. Appends that create a
-- conversation of a user read the row under the user's advisory lock,
-- shared, which DeleteUser takes exclusive to write it.
--
--   uh       = 16 bytes of SHA-256 over the tenant and user ID
--   started  = when the last DeleteUser to start started
--   finished = when it completed (NULL: it runs, or failed and must be
--              called again)
CREATE TABLE user_erasures (
    uh       bytea PRIMARY KEY,
    started  timestamptz NOT NULL,
    finished timestamptz
);
