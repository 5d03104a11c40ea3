-- Locks a reply's room before its reply (the second try after a reply found
-- the room's members changed while it waited for the lock).
--
-- $1 room_id uuid
SELECT last_seq FROM rooms WHERE id = $1 FOR NO KEY UPDATE
