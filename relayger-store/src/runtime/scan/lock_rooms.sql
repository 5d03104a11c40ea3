-- The first of the scan's two statements: locks the rooms of the runtime's
-- oldest changed-room marks, sharing the room row lock. A sender that is
-- inserting into one of them holds that lock until it commits: this waits
-- for it, so write_scan.sql, sent right behind this, takes its snapshot
-- with that message committed, and no later sender commits into these
-- rooms before the claim does. The marks themselves are not locked: the
-- runtime's row lock already serialises its claims, and locking them would
-- deadlock with a sender that holds the room lock while re-marking the
-- room. Only a runtime of the agent: a claim sends this before it knows
-- whether the runtime is the caller's, and locks nothing of someone else's.
--
-- $1 runtime_id: the runtime claiming
-- $2 agent_id: the caller, who must own it
-- $3 rooms_per_scan: how many of the oldest marks one scan takes
WITH dirty AS (
    SELECT room_id, marked_at FROM runtime_dirty_rooms
    WHERE runtime_id = $1::uuid
      AND EXISTS (SELECT 1 FROM runtimes WHERE id = $1::uuid AND agent_id = $2::uuid)
    ORDER BY marked_at, room_id
    LIMIT $3::bigint
),
locked AS MATERIALIZED (
    SELECT r.id FROM rooms r JOIN dirty d ON d.room_id = r.id
    ORDER BY d.marked_at, r.id
    FOR SHARE OF r
)
SELECT count(*) AS rooms FROM locked
