-- A heartbeat: renews a lease through the fence. Only the expiry moves,
-- never the version; the new expiry counts from the database clock after
-- the fence's row lock. No row: the lease is not the caller's or has ended.
--
-- $1 job_id     uuid
-- $2 runtime_id uuid
-- $3 owner      text
-- $4 version    bigint
-- $5 lease_ms   bigint
WITH fenced AS (
    SELECT relayger_lease_fence($1, $2, $3, $4) AS id
)
UPDATE jobs j
SET lease_expires_at = clock_timestamp() + $5 * interval '1 millisecond'
FROM fenced
WHERE j.id = fenced.id
RETURNING j.lease_expires_at
