-- Why a finish's fence matched nothing, in one read: whether the runtime is
-- the agent's, the job's state and skip reason (its asker may have canceled
-- it), the job's lease as held (judged by relayger-core's
-- `LeaseFence::admits` against `judged_at`, the database clock now),
-- whether the agent is still a member of the job's room, the job's
-- completion (its attempt with a completing outcome, its reply and that
-- attempt's lease version: only a retry under that lease may replay it;
-- relayger-core's `AttemptOutcome::completion` makes the answer of them)
-- and this version's error finish (its stored answer), either of which a
-- retry may replay. Fingerprints are read as the hex they are computed as.
--
-- $1 job_id     uuid
-- $2 runtime_id uuid
-- $3 agent_id   uuid
-- $4 version    bigint
SELECT EXISTS (SELECT 1 FROM runtimes WHERE id = $2 AND agent_id = $3) AS owned,
       j.room_id, j.message_id, j.state, j.reason, j.lease_owner, j.lease_version, j.lease_expires_at,
       clock_timestamp() AS judged_at,
       EXISTS (SELECT 1 FROM room_members m
               WHERE m.room_id = j.room_id AND m.identity_id = $3 AND m.left_at IS NULL) AS member,
       encode(c.fingerprint, 'hex') AS completed_fingerprint, c.outcome AS completed_outcome,
       c.reply_message_id AS completed_reply, c.lease_version AS completed_version,
       encode(a.fingerprint, 'hex') AS attempt_fingerprint, a.finish_response AS attempt_response
FROM (SELECT 1) one
LEFT JOIN jobs j ON j.id = $1 AND j.runtime_id = $2
LEFT JOIN attempts c ON c.job_id = j.id AND c.outcome IN ('replied', 'skipped', 'handled')
LEFT JOIN attempts a ON a.job_id = j.id AND a.lease_version = $4 AND a.outcome = 'failed'
