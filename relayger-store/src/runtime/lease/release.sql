-- A release (a worker stopping): through the fence, the job goes back to
-- `$5` (core's state after a release: pending) at once; the attempt counts
-- as unfinished (ended `released`) and not towards maxAttempts; the budget
-- unit is not refunded; one log record. No row: the lease is not the
-- caller's or has ended, and nothing was written.
--
-- $1 job_id     uuid
-- $2 runtime_id uuid
-- $3 owner      text
-- $4 version    bigint
-- $5 state      text
WITH fenced AS (
    SELECT relayger_lease_fence($1, $2, $3, $4) AS id
), released AS (
    UPDATE jobs j
    SET state = $5, attempts = j.attempts - 1, not_before = NULL,
        lease_owner = NULL, lease_version = NULL, lease_expires_at = NULL, updated_at = now()
    FROM fenced
    WHERE j.id = fenced.id
    RETURNING j.job_key, j.room_id, j.message_id
), ended AS (
    UPDATE attempts SET ended = 'released'
    WHERE lease_version = $4 AND EXISTS (SELECT 1 FROM released)
)
INSERT INTO runtime_log (runtime_id, kind, job_key, room_id, message_id, detail)
SELECT $2, 'released', job_key, room_id, message_id, '{}'::jsonb FROM released
RETURNING id
