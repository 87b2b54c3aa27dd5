-- 0011: a conversation's leases (0008) go with it: a lease left by a
-- holder that crashed, or whose release failed, no longer keeps the
-- tenant and ID of a deleted conversation (or an erased user's) in the
-- database. A holder still at work then releases nothing, as after an
-- expiry.
-- The function keeps the schema's search path (the migration's), so that
-- it finds this schema's leases whatever the session's search path is.
CREATE FUNCTION drop_conversation_leases() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    DELETE FROM leases WHERE tenant = OLD.tenant AND conversation = OLD.id;
    RETURN NULL;
END;
$$;

CREATE TRIGGER conversations_drop_leases AFTER DELETE ON conversations
    FOR EACH ROW EXECUTE FUNCTION drop_conversation_leases();
