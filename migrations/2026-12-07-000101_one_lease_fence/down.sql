ALTER TABLE runtime_log DROP CONSTRAINT runtime_log_kind_check;
DROP FUNCTION relayger_lease_fence(uuid, uuid, text, bigint);
