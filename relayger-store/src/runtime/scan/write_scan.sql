-- The second of the scan's two statements: scans the rooms lock_rooms.sql
-- locked, in one statement, whatever their number: their membership,
-- checkpoints and next messages; a pending job for each message the
-- runtime's triggers take; the checkpoints (never backwards); and the marks
-- dropped once a room's checkpoint reached its last seq (or the agent is no
-- member: nothing there becomes a job). Answers whether changed rooms
-- remain (marks it did not take, or rooms with messages past what it read).
--
-- The rooms: the same oldest marks as lock_rooms.sql, taken again, and
-- each locked again (a lock this transaction already holds is no new
-- write). The runtime's row lock keeps other claims from its marks, so
-- they are the rooms the first statement locked, whose senders it waited
-- for; this statement's snapshot, taken after those locks, sees every
-- message up to their last seq, and a join that held a room lock. Only a
-- mark that came in between can add a room the first statement did not
-- lock: such a room is passed over (its mark stays, for the next scan)
-- when a sender or a join holds it (SKIP LOCKED), or when its row changed
-- after this statement's snapshot (its locked row, the newest, is not the
-- one the snapshot sees), so no room is scanned from a snapshot older than
-- its lock.
--
-- The trigger rule is `Policy::triggers_on`, evaluated here on the stored
-- policy; the store test `the_scan_triggers_on_what_policy_triggers_on_says`
-- holds it to the core's for every trigger set and kind of message (and
-- the property test relayger-api/tests/claim_judgement.rs for random ones).
-- A message gets no second job of the runtime: a room's jobs are written by
-- the statement that moves its checkpoint past them, so a scan should never
-- meet one, and if it does (a checkpoint moved back by hand), the message
-- is passed over rather than failing every claim of the runtime. The scans
-- of a runtime run one at a time under its lock, so reading the unique key
-- is enough, without a speculative insert (`ON CONFLICT`), which writes a
-- confirmation record for every job.
-- How far each room was read is one aggregate over what was read (a
-- subquery per room walked every room's read messages again: 12,800 rows
-- for each of 128 rooms in a first scan of a large backlog).
-- New jobs take ids in claim order — every room's oldest new job, then
-- every room's second, and so on, each room's in message order
-- (`relayger_ordered_uuid`) — so a claim spreading its grants over rooms
-- does not lock round after round of one room's jobs.
--
-- $1 runtime_id: the runtime claiming
-- $2 agent_id: the caller, who must own it
-- $3 messages_per_room: how many messages of one room one scan reads
-- $4 rooms_per_scan: how many of the oldest marks one scan takes
WITH dirty AS (
    SELECT room_id, marked_at FROM runtime_dirty_rooms
    WHERE runtime_id = $1::uuid
      AND EXISTS (SELECT 1 FROM runtimes WHERE id = $1::uuid AND agent_id = $2::uuid)
    ORDER BY marked_at, room_id
    LIMIT $4::bigint
),
locked AS MATERIALIZED (
    SELECT r.id AS room_id, r.xmin AS locked_version, d.marked_at
    FROM rooms r JOIN dirty d ON d.room_id = r.id
    FOR SHARE OF r SKIP LOCKED
),
runtime AS (SELECT policy FROM runtimes WHERE id = $1::uuid AND agent_id = $2::uuid),
rooms_now AS (
    SELECT l.room_id, row_number() OVER (ORDER BY l.marked_at, l.room_id) AS ord,
           r.last_seq, mem.member, COALESCE(c.seq, 0) AS checkpoint
    FROM locked l
    JOIN rooms r ON r.id = l.room_id AND r.xmin = l.locked_version
    CROSS JOIN LATERAL (
        SELECT count(*) > 0 AS member FROM room_members rm
        WHERE rm.room_id = l.room_id AND rm.identity_id = $2::uuid AND rm.left_at IS NULL
    ) mem
    LEFT JOIN runtime_checkpoints c ON c.runtime_id = $1::uuid AND c.room_id = l.room_id
),
read AS (
    SELECT s.room_id, s.ord, m.id, m.seq, m.sender_id, m.ask, m.by_runtime
    FROM rooms_now s
    CROSS JOIN LATERAL (
        SELECT id, seq, sender_id, ask, by_runtime FROM messages
        WHERE s.member AND room_id = s.room_id AND seq > s.checkpoint
        ORDER BY seq
        LIMIT $3::bigint
    ) m
),
scanned AS (
    SELECT s.room_id, s.member, s.checkpoint, s.last_seq,
           COALESCE(r.last_read, s.checkpoint) AS scanned_to
    FROM rooms_now s
    LEFT JOIN (SELECT room_id, max(seq) AS last_read FROM read GROUP BY room_id) r
        ON r.room_id = s.room_id
),
triggered AS (
    SELECT t.room_id, t.id AS message_id,
           row_number() OVER (ORDER BY t.rank, t.ord) - 1 AS n
    FROM (
        SELECT read.*,
               row_number() OVER (PARTITION BY read.room_id ORDER BY read.seq) AS rank
        FROM read CROSS JOIN runtime
        WHERE read.sender_id <> $2::uuid
          AND ((runtime.policy->'triggers' ? 'questions' AND read.ask)
               OR (runtime.policy->'triggers' ? 'messages' AND NOT read.by_runtime))
    ) t
),
stamp AS (SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms),
new_jobs AS (
    INSERT INTO jobs (id, runtime_id, room_id, message_id, state)
    SELECT relayger_ordered_uuid(stamp.ms, t.n), $1::uuid, t.room_id, t.message_id, 'pending'
    FROM triggered t CROSS JOIN stamp
    WHERE NOT EXISTS (SELECT 1 FROM jobs j
                      WHERE j.runtime_id = $1::uuid AND j.room_id = t.room_id
                        AND j.message_id = t.message_id)
),
checkpoints AS (
    INSERT INTO runtime_checkpoints (runtime_id, room_id, seq)
    SELECT $1::uuid, room_id, scanned_to FROM scanned WHERE scanned_to > checkpoint
    ON CONFLICT (runtime_id, room_id)
    DO UPDATE SET seq = GREATEST(runtime_checkpoints.seq, EXCLUDED.seq)
),
cleared AS (
    DELETE FROM runtime_dirty_rooms d USING scanned s
    WHERE d.runtime_id = $1::uuid AND d.room_id = s.room_id
      AND (NOT s.member OR s.last_seq <= s.scanned_to)
)
SELECT EXISTS (SELECT 1 FROM scanned WHERE member AND last_seq > scanned_to)
    OR EXISTS (SELECT 1 FROM runtime_dirty_rooms d
               WHERE d.runtime_id = $1::uuid
                 AND EXISTS (SELECT 1 FROM runtimes WHERE id = $1::uuid AND agent_id = $2::uuid)
                 AND NOT EXISTS (SELECT 1 FROM scanned s WHERE s.room_id = d.room_id))
    AS more_to_scan
