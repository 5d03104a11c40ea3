-- The runtimes of a room's other current members, locked in id order as a
-- claim locks one (lock_runtime.sql): a claim of any of them that made or
-- granted a job of the question has committed once this returns, and any
-- later claim sees the cancel, so no job of a canceled question is granted.
--
-- $1 room_id uuid
-- $2 asker   uuid
SELECT rt.id
FROM runtimes rt
WHERE rt.agent_id IN (SELECT rm.identity_id FROM room_members rm
                      WHERE rm.room_id = $1 AND rm.left_at IS NULL AND rm.identity_id <> $2)
ORDER BY rt.id
FOR NO KEY UPDATE
