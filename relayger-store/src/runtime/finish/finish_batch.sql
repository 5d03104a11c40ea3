-- Whole finishes of a batch of jobs that complete (a reply, a skip or
-- neither; no error, no note) in one statement, for jobs whose room,
-- message and key this instance knows from their claims. Row k of every
-- array is job k; the jobs come in room order, then job order. In order:
-- each job's fence (`relayger_lease_fence`, in the jobs' order) and its
-- completed state (the checks of fence_complete.sql, plus room and
-- message); for the fenced jobs, the attempts' ends (each job's
-- completion: outcome, usage, fingerprint and reply; and, as its
-- end event, the log record); then the reply rooms, locked in id order
-- (two batches never wait on each other's rooms crosswise), each bumped
-- once by its number of replies, and the replies numbered in job order
-- within their room (as insert_reply.sql does one at a time), each naming
-- its question's thread root (so no trigger function runs), with the
-- members' runtimes' dirty marks. A job whose fence matches nothing writes
-- nothing and is missing from `fenced` (the caller then finishes it the
-- long way, which diagnoses it). Answers the fenced jobs, the members to
-- wake, and the fenced questions' senders (their delivery changed). The members are read in the statement's
-- snapshot: a reply room whose `members_version` moved between that
-- snapshot and its lock (a join, a leave, a `--from now` registration)
-- raises `relayger_members_changed()`, failing the whole transaction (the
-- caller then takes the long way, which locks the rooms first).
--
-- $1  runtime_id        uuid
-- $2  agent_id          uuid
-- $3  rooms             uuid[]    the token's room restriction, NULL for none
-- $4  job_ids           uuid[]
-- $5  owners            text[]
-- $6  versions          bigint[]
-- $7  states            text[]    the completed state (handled or skipped)
-- $8  reasons           text[]    a skip's reason, else NULL
-- $9  room_ids          uuid[]    the job's room, as granted
-- $10 message_ids       uuid[]    the job's message, as granted
-- $11 outcomes          text[]    the attempt's outcome
-- $12 model_calls       bigint[]  reported usage, all three NULL when unreported
-- $13 input_tokens      bigint[]
-- $14 output_tokens     bigint[]
-- $15 end_events        text[]    the attempt's end as a log record
-- $16 reply_message_ids uuid[]    NULL without a reply
-- $17 reply_texts       text[]    NULL without a reply
-- $18 fingerprints      text[]    the completion fingerprint (hex; stored as bytes)
WITH input AS MATERIALIZED (
    SELECT *
    FROM unnest($4::uuid[], $5::text[], $6::bigint[], $7::text[], $8::text[],
                $9::uuid[], $10::uuid[], $11::text[], $12::bigint[], $13::bigint[],
                $14::bigint[], $15::text[], $16::uuid[], $17::text[], $18::text[])
        WITH ORDINALITY AS i(job_id, owner, version, state, reason, room_id, message_id,
                             outcome, model_calls, input_tokens, output_tokens, end_event,
                             reply_message_id, reply_text, fingerprint, ord)
), fence AS MATERIALIZED (
    SELECT i.ord, relayger_lease_fence(i.job_id, $1, i.owner, i.version) AS id
    FROM input i
    ORDER BY i.ord
), fenced AS (
    UPDATE jobs j
    SET state = i.state, reason = i.reason, lease_owner = NULL, lease_version = NULL,
        lease_expires_at = NULL, updated_at = now()
    FROM fence f, input i, runtimes rt
    WHERE j.id = f.id AND i.ord = f.ord AND rt.id = j.runtime_id AND rt.agent_id = $2
      AND j.room_id = i.room_id AND j.message_id = i.message_id
      AND ($3::uuid[] IS NULL OR j.room_id = ANY($3))
      AND EXISTS (SELECT 1 FROM room_members m
                  WHERE m.room_id = j.room_id AND m.identity_id = $2 AND m.left_at IS NULL)
    RETURNING j.id
), done AS MATERIALIZED (
    SELECT i.* FROM input i WHERE i.job_id IN (SELECT id FROM fenced)
), attempt AS (
    UPDATE attempts a
    SET finished_at = now(), outcome = d.outcome, ended = 'finished', error = NULL,
        model_calls = d.model_calls, input_tokens = d.input_tokens,
        output_tokens = d.output_tokens, fingerprint = decode(d.fingerprint, 'hex'),
        ended_at = clock_timestamp(), end_event = d.end_event,
        reply_room_id = CASE WHEN d.reply_message_id IS NULL THEN NULL ELSE d.room_id END,
        reply_message_id = d.reply_message_id
    FROM done d
    WHERE a.runtime_id = $1 AND a.lease_version = d.version
), replies AS MATERIALIZED (
    SELECT d.room_id, d.message_id, d.reply_message_id, d.reply_text,
           row_number() OVER (PARTITION BY d.room_id ORDER BY d.ord) AS n
    FROM done d
    WHERE d.reply_message_id IS NOT NULL
), snapshot AS MATERIALIZED (
    SELECT r.id, r.members_version FROM rooms r
    WHERE r.id IN (SELECT room_id FROM replies)
), room AS MATERIALIZED (
    SELECT r.id, r.members_version, c.n
    FROM rooms r
    JOIN (SELECT room_id, count(*) AS n FROM replies GROUP BY room_id) c ON c.room_id = r.id
    ORDER BY r.id
    FOR NO KEY UPDATE OF r
), bumped AS (
    UPDATE rooms SET last_seq = rooms.last_seq + room.n
    FROM room JOIN snapshot s ON s.id = room.id
    WHERE rooms.id = room.id AND room.members_version = s.members_version
    RETURNING rooms.id, rooms.last_seq - room.n AS base
), others AS MATERIALIZED (
    SELECT m.room_id, m.identity_id FROM room_members m
    WHERE m.room_id IN (SELECT id FROM bumped) AND m.left_at IS NULL AND m.identity_id <> $2
), inserted AS (
    INSERT INTO messages (id, room_id, seq, sender_id, text, ask, reply_to, by_runtime,
                          runtime_id, thread_root)
    SELECT r.reply_message_id, r.room_id, b.base + r.n, $2, r.reply_text, false, r.message_id,
           true, $1, q.thread_root
    FROM replies r
    JOIN bumped b ON b.id = r.room_id
    JOIN messages q ON q.room_id = r.room_id AND q.id = r.message_id
    RETURNING room_id
), marked AS (
    INSERT INTO runtime_dirty_rooms (runtime_id, room_id)
    SELECT DISTINCT rt.id, o.room_id FROM others o JOIN runtimes rt ON rt.agent_id = o.identity_id
    ON CONFLICT DO NOTHING
)
SELECT ARRAY(SELECT id FROM fenced) AS fenced,
       CASE WHEN (SELECT count(*) FROM inserted) = (SELECT count(*) FROM replies)
            THEN ARRAY(SELECT DISTINCT identity_id FROM others)
            ELSE relayger_members_changed() END AS wake,
       ARRAY(SELECT DISTINCT q.sender_id FROM done d
             JOIN messages q ON q.room_id = d.room_id AND q.id = d.message_id) AS askers
