-- A finish's reply statement raises this when the room's members changed
-- while it waited for the room lock (its snapshot no longer says whom to
-- wake and mark). The error fails the whole transaction, so the COMMIT sent
-- right behind the statement ends it as a rollback, and the finish is run
-- again with the room locked first. Identified by its constraint name.
CREATE FUNCTION relayger_members_changed() RETURNS uuid[]
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    RAISE EXCEPTION 'the room''s members changed while the statement waited for it'
        USING ERRCODE = 'check_violation', CONSTRAINT = 'relayger_members_changed';
END
$$;
