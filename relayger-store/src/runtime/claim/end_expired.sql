-- Ends expired leases (rows of expired_leases.sql, still locked), all in one
-- statement: the attempt ends as `expired` (its end, `expired` or
-- `dead_letter`, is its log record) and the job moves on (pending with a
-- backoff, or dead). Rows are found by `= ANY`
-- of the input arrays as well as by the join, so the generic plan (a claim
-- forces them) takes the indexes rather than hashing the input against a
-- scan of the table (runtime/plan_tests.rs).
--
-- $1 runtime_id: the runtime whose leases expired
-- $2 job_ids: the expired jobs
-- $3 lease_versions: each job's lease version (its attempt)
-- $4 states: each job's next state, `pending` or `dead` (job::next_state)
-- $5 backoffs_ms: each job's retry backoff, NULL for a dead one
-- $6 kinds: each attempt's end event, `expired` or `dead_letter`
WITH input AS (
    SELECT * FROM unnest($2::uuid[], $3::bigint[], $4::text[], $5::bigint[], $6::text[])
        AS t(id, version, state, backoff_ms, kind)
),
ended AS (
    UPDATE attempts a SET ended = 'expired', ended_at = clock_timestamp(), end_event = input.kind
    FROM input
    WHERE a.lease_version = input.version AND a.lease_version = ANY($3::bigint[])
      AND a.runtime_id = $1::uuid AND a.finished_at IS NULL
)
UPDATE jobs j SET state = input.state, reason = 'lease_expired',
    not_before = CASE WHEN input.backoff_ms IS NULL THEN j.not_before
                 ELSE now() + input.backoff_ms * interval '1 millisecond' END,
    lease_owner = NULL, lease_version = NULL, lease_expires_at = NULL,
    updated_at = now()
FROM input
WHERE j.id = input.id AND j.id = ANY($2::uuid[]) AND j.runtime_id = $1::uuid
RETURNING (SELECT q.sender_id FROM messages q
           WHERE q.room_id = j.room_id AND q.id = j.message_id) AS asker
