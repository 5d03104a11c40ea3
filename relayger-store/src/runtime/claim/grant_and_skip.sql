-- Every grant and skip of one claim in one statement: the job rows, one
-- attempt per grant (it is the grant's budget unit, numbered by the
-- runtime's running grant count, and its `claimed` log record), and a log
-- record per policy skip. Answers the granted jobs with their attempt
-- number and lease version.
--
-- A job is written only while it is still pending: the candidates were
-- read without row locks, and a job that left pending since (a job no
-- longer there) is neither granted nor skipped, and is not in the answer.
-- The test is written `(j.state = 'pending') IS TRUE` so that it cannot
-- select the pending jobs' partial index for the generic plan (it would
-- read every pending job of every runtime): the primary key finds them.
--
-- The jobs are found by `j.id = ANY($2)` as well as by the join: the
-- generic plan guesses `unnest` at ten rows, and with only the join it
-- hashed them against a sequential scan of every job of every runtime
-- while the table held about a thousand rows; with it, the primary key
-- finds them at any size (runtime/plan_tests.rs).
--
-- A lease runs from the grant, on the database clock read now
-- (`clock_timestamp()`), after the runtime's lock: a claim that waited for
-- that lock longer than a lease would otherwise grant leases that ended
-- before the worker had them (the fence, likewise, judges a lease when it
-- has the job's lock).
--
-- $1 runtime_id: the runtime claimed
-- $2 job_ids: the candidates granted and skipped
-- $3 owners: each job's new lease owner, NULL for a skip
-- $4 reasons: each job's skip reason, NULL for a grant
-- $5 lease_ms: the lease's length
-- $6 budget_last: the runtime's running grant count so far (the newest
--    attempt's `grant_seq`)
WITH input AS (
    SELECT * FROM unnest($2::uuid[], $3::text[], $4::text[]) AS t(id, owner, reason)
),
granted AS (
    UPDATE jobs j SET state = 'claimed', attempts = j.attempts + 1,
        lease_owner = input.owner, lease_version = nextval('lease_version_seq'),
        lease_expires_at = clock_timestamp() + $5::bigint * interval '1 millisecond',
        not_before = NULL, updated_at = now()
    FROM input
    WHERE j.id = input.id AND j.id = ANY($2::uuid[]) AND (j.state = 'pending') IS TRUE
      AND input.owner IS NOT NULL
    RETURNING j.id, j.attempts, j.lease_owner, j.lease_version
),
skipped AS (
    UPDATE jobs j SET state = 'skipped', reason = input.reason, updated_at = now()
    FROM input
    WHERE j.id = input.id AND j.id = ANY($2::uuid[]) AND (j.state = 'pending') IS TRUE
      AND input.reason IS NOT NULL
    RETURNING j.room_id, j.message_id, input.reason
),
stamp AS (SELECT clock_timestamp() AS at),
new_attempts AS (
    INSERT INTO attempts (job_id, runtime_id, attempt, lease_owner, lease_version, grant_seq,
                          claimed_at)
    SELECT g.id, $1::uuid, g.attempts, g.lease_owner, g.lease_version,
           $6::bigint + row_number() OVER (ORDER BY g.lease_version), stamp.at
    FROM granted g CROSS JOIN stamp
),
logged AS (
    INSERT INTO runtime_log (runtime_id, kind, room_id, message_id, detail)
    SELECT $1::uuid, 'skipped', room_id, message_id,
           jsonb_build_object('reason', reason)
    FROM skipped
)
SELECT id, attempts, lease_version FROM granted
