DROP FUNCTION relayger_members_changed();
