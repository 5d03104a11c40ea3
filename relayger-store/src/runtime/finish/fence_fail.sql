-- The fenced start of a failed attempt's end: the same fence and checks as
-- fence_complete.sql, but the job stays claimed and keeps its lease (the
-- retry or the dead letter is written next, in the same transaction, from
-- what this returns, the question's sender included). No row: nothing was
-- written.
--
-- $1 job_id     uuid
-- $2 runtime_id uuid
-- $3 agent_id   uuid
-- $4 owner      text
-- $5 version    bigint
-- $6 rooms      uuid[]  the token's room restriction, NULL for none
WITH fence AS (
    SELECT relayger_lease_fence($1, $2, $4, $5) AS id
)
UPDATE jobs j
SET updated_at = now()
FROM fence, runtimes rt
WHERE j.id = fence.id AND rt.id = j.runtime_id AND rt.agent_id = $3
  AND ($6::uuid[] IS NULL OR j.room_id = ANY($6))
  AND EXISTS (SELECT 1 FROM room_members m
              WHERE m.room_id = j.room_id AND m.identity_id = $3 AND m.left_at IS NULL)
RETURNING j.room_id, j.message_id, j.attempts, rt.policy,
          (SELECT q.sender_id FROM messages q
           WHERE q.room_id = j.room_id AND q.id = j.message_id) AS asker
