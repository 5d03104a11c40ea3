-- A release (a worker stopping): through the fence, the job goes back to
-- `$5` (core's state after a release: pending) at once; the attempt counts
-- as unfinished (ended `released`) and not towards maxAttempts; the budget
-- unit is not refunded; the attempt's end is its log record. Answers the
-- question's sender (its delivery changed). No row: the lease is not the
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
    RETURNING j.id, j.room_id, j.message_id
), ended AS (
    UPDATE attempts SET ended = 'released', ended_at = clock_timestamp(), end_event = 'released'
    WHERE runtime_id = $2 AND lease_version = $4 AND EXISTS (SELECT 1 FROM released)
)
SELECT (SELECT q.sender_id FROM messages q
        WHERE q.room_id = r.room_id AND q.id = r.message_id) AS asker
FROM released r
