-- A page of the runtime's jobs with their questions, newest question
-- first (then by job id), filtered by state, room, the question's sender
-- and the question's time; only jobs of rooms the agent is still a member
-- of and the token may see. A page continues after the job `after` names.
--
-- $1 runtime_id: the runtime
-- $2 agent_id: the runtime's agent
-- $3 rooms: the token's room restriction, NULL for none
-- $4 state: only jobs in this state, NULL for any
-- $5 room_id: only jobs of this room, NULL for any
-- $6 sender: only questions of the identity with this number, NULL for any
-- $7 since: only questions sent at or after this time, NULL for no bound
-- $8 until: only questions sent before this time, NULL for no bound
-- $9 after: the last job of the previous page, NULL for the first page
-- $10 rows: the most rows (the page size and one more, to learn whether
--     more follow)
WITH visible AS (
    SELECT m.room_id FROM room_members m
    WHERE m.identity_id = $2::uuid AND m.left_at IS NULL
      AND ($3::uuid[] IS NULL OR m.room_id = ANY($3::uuid[]))
      AND ($5::uuid IS NULL OR m.room_id = $5::uuid)
), cursor AS (
    SELECT q.created_at, a.id
    FROM jobs a JOIN messages q ON q.room_id = a.room_id AND q.id = a.message_id
    WHERE a.id = $9::uuid AND a.runtime_id = $1::uuid
)
SELECT j.id AS job_id, j.state AS job_state, j.attempts AS job_attempts,
       j.reason AS job_reason, j.updated_at AS job_updated_at,
       q.id, q.room_id, q.seq, q.sender_id, q.text, q.sealed, q.ask, q.deadline,
       q.reply_to, q.by_runtime, q.created_at, i.number, i.kind
FROM jobs j
JOIN messages q ON q.room_id = j.room_id AND q.id = j.message_id
JOIN identities i ON i.id = q.sender_id
WHERE j.runtime_id = $1::uuid
  AND j.room_id IN (SELECT room_id FROM visible)
  AND ($4::text IS NULL OR j.state = $4::text)
  AND ($6::text IS NULL OR i.number = $6::text)
  AND ($7::timestamptz IS NULL OR q.created_at >= $7::timestamptz)
  AND ($8::timestamptz IS NULL OR q.created_at < $8::timestamptz)
  AND ($9::uuid IS NULL OR (q.created_at, j.id) < (SELECT created_at, id FROM cursor))
ORDER BY q.created_at DESC, j.id DESC
LIMIT $10::bigint
