-- A cancel's writes, after `lock_runtimes.sql` locked the runtimes that
-- may hold a job of the question: the cancel's record (once), every job of
-- it still pending or claimed skipped `canceled` (a claimed job's lease is
-- dropped, so its holder's heartbeat, finish or release is refused), the
-- attempt of each claimed one ended `canceled` (an unfinished attempt: its
-- budget unit stays spent), and a `skipped` log record for each pending
-- one, as a claim's policy skip writes. Answers whether the cancel was
-- new and how many jobs it ended (either changes the delivery).
--
-- $1 room_id     uuid
-- $2 message_id  uuid
-- $3 canceled_by uuid: the asker
-- $4 runtime_ids uuid[]: the runtimes locked
WITH recorded AS (
    INSERT INTO question_cancels (room_id, message_id, canceled_by)
    VALUES ($1, $2, $3)
    ON CONFLICT DO NOTHING
    RETURNING 1
), held AS MATERIALIZED (
    SELECT j.id, j.runtime_id, j.state, j.lease_version
    FROM jobs j
    WHERE j.runtime_id = ANY($4::uuid[]) AND j.room_id = $1 AND j.message_id = $2
      AND j.state IN ('pending', 'claimed')
    FOR UPDATE
), ended AS (
    UPDATE jobs j
    SET state = 'skipped', reason = 'canceled', not_before = NULL, lease_owner = NULL,
        lease_version = NULL, lease_expires_at = NULL, updated_at = now()
    FROM held h
    WHERE j.id = h.id
    RETURNING j.id
), attempt AS (
    UPDATE attempts a
    SET ended = 'canceled', ended_at = clock_timestamp(), end_event = 'canceled'
    FROM held h
    WHERE h.state = 'claimed' AND a.runtime_id = h.runtime_id
      AND a.lease_version = h.lease_version AND a.ended IS NULL
), logged AS (
    INSERT INTO runtime_log (runtime_id, kind, room_id, message_id, detail)
    SELECT h.runtime_id, 'skipped', $1, $2, jsonb_build_object('reason', 'canceled')
    FROM held h
    WHERE h.state = 'pending'
)
SELECT EXISTS (SELECT 1 FROM recorded) AS recorded, (SELECT count(*) FROM held) AS ended
