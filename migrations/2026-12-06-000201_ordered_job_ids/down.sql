DROP FUNCTION relayger_ordered_uuid(bigint, bigint);
