-- The fenced end of a job that completes (a reply, a skip or neither),
-- the long way: the fence (`relayger_lease_fence`) locks the job and judges
-- its lease; the job must also be the agent's, in a room the agent is still
-- a member of and the token may see. Sets the completed state and clears
-- the lease. Answers what the end needs, and the question's sender (its
-- delivery changed). No row: nothing was written (the caller diagnoses why).
--
-- $1 job_id     uuid
-- $2 runtime_id uuid
-- $3 agent_id   uuid
-- $4 owner      text
-- $5 version    bigint
-- $6 rooms      uuid[]  the token's room restriction, NULL for none
-- $7 state      text    the completed state (handled or skipped)
-- $8 reason     text    a skip's reason, else NULL
WITH fence AS (
    SELECT relayger_lease_fence($1, $2, $4, $5) AS id
)
UPDATE jobs j
SET state = $7, reason = $8, lease_owner = NULL, lease_version = NULL,
    lease_expires_at = NULL, updated_at = now()
FROM fence, runtimes rt
WHERE j.id = fence.id AND rt.id = j.runtime_id AND rt.agent_id = $3
  AND ($6::uuid[] IS NULL OR j.room_id = ANY($6))
  AND EXISTS (SELECT 1 FROM room_members m
              WHERE m.room_id = j.room_id AND m.identity_id = $3 AND m.left_at IS NULL)
RETURNING j.room_id, j.message_id, j.attempts, rt.policy,
          (SELECT q.sender_id FROM messages q
           WHERE q.room_id = j.room_id AND q.id = j.message_id) AS asker
