-- 0011: a conversation's leases (0008) go with it: a lease left by a
-- holder that crashed, or whose release failed, no longer keeps the
-- tenant and ID of a deleted conversation (or an erased user's) in the
-- file. A holder still at work then releases nothing, as after an expiry.
CREATE TRIGGER conversations_drop_leases AFTER DELETE ON conversations BEGIN
    DELETE FROM leases WHERE tenant = old.tenant AND conversation = old.id;
END;
