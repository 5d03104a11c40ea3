-- A finish's reply, the long way: bumps the room's `last_seq` (the room
-- lock, held from here to the commit), inserts the message (its attempt,
-- ended by record_end.sql, already names it) and the other members'
-- runtimes' dirty marks, and answers whom to wake.
-- Like the one-statement send, it writes nothing when the room's
-- `members_version` moved while it waited for the lock (its snapshot of the
-- members would be stale) and raises `relayger_members_changed()` instead,
-- so the transaction fails whole even with its COMMIT already sent behind
-- it; the caller then runs the finish again with the room locked first
-- (lock_room.sql).
--
-- $1  room_id          uuid
-- $2  agent_id         uuid    the reply's sender
-- $3  reply_message_id uuid
-- $4  reply_text       text
-- $5  reply_to         uuid    the job's message
-- $6  runtime_id       uuid
WITH room AS (
    SELECT r.id, r.members_version FROM rooms r WHERE r.id = $1
), bumped AS (
    UPDATE rooms SET last_seq = rooms.last_seq + 1
    FROM room
    WHERE rooms.id = room.id AND rooms.members_version = room.members_version
    RETURNING rooms.id, rooms.last_seq
), others AS (
    SELECT identity_id FROM room_members
    WHERE room_id = $1 AND left_at IS NULL AND identity_id <> $2
), inserted AS (
    INSERT INTO messages (id, room_id, seq, sender_id, text, ask, reply_to, by_runtime, runtime_id)
    SELECT $3, b.id, b.last_seq, $2, $4, false, $5, true, $6 FROM bumped b
    RETURNING id, room_id
), marked AS (
    INSERT INTO runtime_dirty_rooms (runtime_id, room_id)
    SELECT rt.id, i.room_id FROM inserted i
    JOIN runtimes rt ON rt.agent_id IN (SELECT identity_id FROM others)
    ON CONFLICT DO NOTHING
)
SELECT CASE WHEN EXISTS (SELECT 1 FROM inserted) THEN ARRAY(SELECT identity_id FROM others)
            ELSE relayger_members_changed() END AS wake
