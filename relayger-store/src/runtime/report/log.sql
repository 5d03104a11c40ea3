-- A page of the runtime's log, newest first by record id: the rows of
-- runtime_log (registrations, configures, policy skips, manual retries) and
-- the records an attempt stands for (its grant, `claimed`, and once ended
-- its end event), ids from one sequence: a log row's is 4 × its id, an
-- attempt's grant 4 × its lease version + 1, its end 4 × its lease
-- version + 2. Only records of rooms the agent is still a member of and the
-- token may see; records without a room are always visible. Each part is
-- cut to the page before they are merged, so the read follows the page,
-- not the history.
--
-- $1 runtime_id: the runtime
-- $2 agent_id: the runtime's agent
-- $3 rooms: the token's room restriction, NULL for none
-- $4 page_size: the most records
WITH visible AS (
    SELECT m.room_id FROM room_members m
    WHERE m.identity_id = $2::uuid AND m.left_at IS NULL
      AND ($3::uuid[] IS NULL OR m.room_id = ANY($3::uuid[]))
), records AS (
    (SELECT 4 * l.id AS id, l.at, l.kind, l.room_id, l.message_id, l.detail
     FROM runtime_log l
     WHERE l.runtime_id = $1::uuid
       AND (l.room_id IS NULL OR l.room_id IN (SELECT room_id FROM visible))
     ORDER BY l.id DESC
     LIMIT $4::bigint)
    UNION ALL
    (SELECT 4 * a.lease_version + 1, a.claimed_at, 'claimed', j.room_id, j.message_id,
            jsonb_build_object('attempt', a.attempt,
                               'version', lpad(a.lease_version::text, 20, '0'))
     FROM attempts a JOIN jobs j ON j.id = a.job_id
     WHERE a.runtime_id = $1::uuid AND j.room_id IN (SELECT room_id FROM visible)
     ORDER BY a.lease_version DESC
     LIMIT $4::bigint)
    UNION ALL
    (SELECT 4 * a.lease_version + 2, a.ended_at, a.end_event, j.room_id, j.message_id,
            CASE WHEN a.end_event = 'released' THEN '{}'::jsonb
                 WHEN a.outcome IS NULL
                     THEN jsonb_build_object('attempt', a.attempt, 'reason', 'lease_expired')
                 WHEN a.outcome = 'failed'
                     THEN jsonb_build_object('attempt', a.attempt, 'error', a.error)
                 ELSE jsonb_build_object('attempt', a.attempt,
                                         'replyMessageId', a.reply_message_id,
                                         'skip', CASE WHEN a.outcome = 'skipped' THEN j.reason END)
            END
     FROM attempts a JOIN jobs j ON j.id = a.job_id
     WHERE a.runtime_id = $1::uuid AND a.end_event IS NOT NULL
       AND j.room_id IN (SELECT room_id FROM visible)
     ORDER BY a.lease_version DESC
     LIMIT $4::bigint)
)
SELECT id, at, kind, room_id, message_id, detail
FROM records
ORDER BY id DESC
LIMIT $4::bigint
