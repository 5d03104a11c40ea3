-- What became of one message, one row per recipient and runtime: every
-- other current member of its room (a recipient without a runtime is one
-- row with no runtime; a message nobody else can read, one row with no
-- recipient; no row: no such message), the recipient's first reply to it, and for each of
-- the recipient's runtimes its job of the message, or, without one, how
-- far the runtime has read the room (`checkpoint`) and its policy (whose
-- triggers say whether it will take the message). relayger-core's
-- `delivery` makes the states of them. The caller's membership is checked
-- before.
--
-- $1 room_id    uuid
-- $2 message_id uuid
SELECT m.seq, m.ask, m.by_runtime, m.created_at AS asked_at, qc.canceled_at,
       rcp.identity_id, i.number,
       reply.id AS reply_id, reply.created_at AS replied_at,
       rt.id AS runtime_id, rt.policy, COALESCE(c.seq, 0) AS checkpoint,
       j.state AS job_state, j.reason AS job_reason, j.attempts AS job_attempts,
       COALESCE(j.lease_expires_at > now(), false) AS lease_live,
       j.updated_at AS job_updated_at
FROM messages m
LEFT JOIN question_cancels qc ON qc.room_id = m.room_id AND qc.message_id = m.id
LEFT JOIN (room_members rcp JOIN identities i ON i.id = rcp.identity_id)
       ON rcp.room_id = m.room_id AND rcp.left_at IS NULL AND rcp.identity_id <> m.sender_id
LEFT JOIN LATERAL (
    SELECT r.id, r.created_at FROM messages r
    WHERE r.reply_to = m.id AND r.room_id = m.room_id AND r.sender_id = rcp.identity_id
    ORDER BY r.seq
    LIMIT 1
) reply ON true
LEFT JOIN runtimes rt ON rt.agent_id = rcp.identity_id
LEFT JOIN runtime_checkpoints c ON c.runtime_id = rt.id AND c.room_id = m.room_id
LEFT JOIN jobs j ON j.runtime_id = rt.id AND j.room_id = m.room_id AND j.message_id = m.id
WHERE m.room_id = $1 AND m.id = $2
ORDER BY i.number, rt.id
