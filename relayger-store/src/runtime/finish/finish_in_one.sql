-- A whole finish of one job that completes (a reply, a skip or neither;
-- no error, no note) in one statement, for a job whose room, message and
-- key this instance knows from its claim. In order: the fence
-- (`relayger_lease_fence`) and the job's completed state (the checks of
-- fence_complete.sql, plus room, message and key); from its RETURNING the
-- attempt's end (the job's completion: outcome, usage, fingerprint, answer
-- and reply; and, as its end event, the log record) and the reply under the
-- room lock taken last (as insert_reply.sql). A fence that matches nothing
-- writes nothing and answers `fenced = false` (the caller then finishes
-- the job the long way, which diagnoses it). A reply whose room's members
-- changed while it waited for the room lock raises
-- `relayger_members_changed()`, failing the whole transaction.
--
-- $1  job_id           uuid
-- $2  runtime_id       uuid
-- $3  agent_id         uuid
-- $4  owner            text
-- $5  version          bigint
-- $6  rooms            uuid[]  the token's room restriction, NULL for none
-- $7  state            text    the completed state (handled or skipped)
-- $8  reason           text    a skip's reason, else NULL
-- $9  room_id          uuid    the job's room, as granted
-- $10 message_id       uuid    the job's message, as granted
-- $11 outcome          text    the attempt's outcome
-- $12 model_calls      bigint  reported usage, all three NULL when unreported
-- $13 input_tokens     bigint
-- $14 output_tokens    bigint
-- $15 end_event        text    the attempt's end as a log record
-- $16 reply_message_id uuid    NULL without a reply
-- $17 reply_text       text    NULL without a reply
-- $18 fingerprint      text    the completion fingerprint
-- $19 response         jsonb   the finish's answer, kept for a retry to replay
WITH fence AS (
    SELECT relayger_lease_fence($1, $2, $4, $5) AS id
), fenced AS (
    UPDATE jobs j
    SET state = $7, reason = $8, lease_owner = NULL, lease_version = NULL,
        lease_expires_at = NULL, updated_at = now()
    FROM fence, runtimes rt
    WHERE j.id = fence.id AND rt.id = j.runtime_id AND rt.agent_id = $3
      AND j.room_id = $9 AND j.message_id = $10
      AND ($6::uuid[] IS NULL OR j.room_id = ANY($6))
      AND EXISTS (SELECT 1 FROM room_members m
                  WHERE m.room_id = j.room_id AND m.identity_id = $3 AND m.left_at IS NULL)
    RETURNING j.room_id, j.message_id, j.attempts
), attempt AS (
    UPDATE attempts
    SET finished_at = now(), outcome = $11, ended = 'finished', error = NULL,
        model_calls = $12, input_tokens = $13, output_tokens = $14,
        fingerprint = $18, finish_response = $19, ended_at = clock_timestamp(), end_event = $15,
        reply_room_id = CASE WHEN $16::uuid IS NULL THEN NULL ELSE $9::uuid END,
        reply_message_id = $16
    WHERE lease_version = $5 AND EXISTS (SELECT 1 FROM fenced)
), room AS (
    SELECT r.id, r.members_version FROM rooms r
    WHERE r.id = $9 AND $16::uuid IS NOT NULL AND EXISTS (SELECT 1 FROM fenced)
), bumped AS (
    UPDATE rooms SET last_seq = rooms.last_seq + 1
    FROM room
    WHERE rooms.id = room.id AND rooms.members_version = room.members_version
    RETURNING rooms.id, rooms.last_seq
), others AS (
    SELECT identity_id FROM room_members
    WHERE room_id = $9 AND left_at IS NULL AND identity_id <> $3
), inserted AS (
    INSERT INTO messages (id, room_id, seq, sender_id, text, ask, reply_to, by_runtime, runtime_id)
    SELECT $16, b.id, b.last_seq, $3, $17, false, $10, true, $2 FROM bumped b
    RETURNING id, room_id
), marked AS (
    INSERT INTO runtime_dirty_rooms (runtime_id, room_id)
    SELECT rt.id, i.room_id FROM inserted i
    JOIN runtimes rt ON rt.agent_id IN (SELECT identity_id FROM others)
    ON CONFLICT DO NOTHING
)
SELECT EXISTS (SELECT 1 FROM fenced) AS fenced,
       CASE WHEN $16::uuid IS NULL OR NOT EXISTS (SELECT 1 FROM fenced) THEN '{}'::uuid[]
            WHEN EXISTS (SELECT 1 FROM inserted) THEN ARRAY(SELECT identity_id FROM others)
            ELSE relayger_members_changed() END AS wake
