-- 0016: erasure records. DeleteUser records that a user is being erased
-- (finished NULL) before it deletes anything, and when it completed
-- after: an append that would create a conversation bound to the user is
-- refused meanwhile, and afterwards for work that started before it
-- completed (chatmem.AppendOptions.Started). The user is named by a hash
-- (internal/erasure.ID), never by its ID.
--
--   uh       = 16 bytes of SHA-256 over the tenant and user ID
--   started  = when the last DeleteUser to start started, Unix nanoseconds
--   finished = when it completed (NULL: it runs, or failed and must be
--              called again)
CREATE TABLE user_erasures (
    uh       BLOB    NOT NULL PRIMARY KEY,
    started  INTEGER NOT NULL,
    finished INTEGER
) STRICT, WITHOUT ROWID;
