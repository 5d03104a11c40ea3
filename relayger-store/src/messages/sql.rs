//! The statement texts of the message paths. A finish's reply appends to
//! its room the same way as [`SEND_TEXT`] (`runtime/finish/*.sql`).

/// The one-statement send of a text message: checks membership, a fresh
/// message id and the parent, bumps `last_seq`, inserts the message and the
/// other members' runtimes' dirty marks, and returns the envelope and the
/// identities to wake. Its reads use the statement's snapshot, so it also
/// declines when the room's `members_version` moved while it waited for the
/// room lock (a join, or a runtime registered `--from now`, committed).
/// No row means "not this way" (not a member, an id already used, no such
/// parent, or that version check): the caller takes the locked path, which
/// gives the exact answer. Nothing is written then, so no seq is skipped.
pub(super) const SEND_TEXT: &str = "\
WITH room AS (
    SELECT r.id, r.members_version FROM rooms r
    JOIN room_members m ON m.room_id = r.id AND m.identity_id = $2 AND m.left_at IS NULL
    WHERE r.id = $1
      AND NOT EXISTS (SELECT 1 FROM messages WHERE room_id = $1 AND id = $3)
      AND ($7::uuid IS NULL OR EXISTS (SELECT 1 FROM messages p WHERE p.room_id = $1 AND p.id = $7))
), bumped AS (
    UPDATE rooms SET last_seq = rooms.last_seq + 1
    FROM room
    WHERE rooms.id = room.id AND rooms.members_version = room.members_version
    RETURNING rooms.id, rooms.last_seq
), others AS (
    SELECT identity_id FROM room_members
    WHERE room_id = $1 AND left_at IS NULL AND identity_id <> $2
), inserted AS (
    INSERT INTO messages (id, room_id, seq, sender_id, text, ask, deadline, reply_to)
    SELECT $3, b.id, b.last_seq, $2, $4, $5, $6, $7 FROM bumped b
    RETURNING *
), marked AS (
    INSERT INTO runtime_dirty_rooms (runtime_id, room_id)
    SELECT rt.id, i.room_id FROM inserted i
    JOIN runtimes rt ON rt.agent_id IN (SELECT identity_id FROM others)
    ON CONFLICT DO NOTHING
)
SELECT i.id, i.room_id, i.seq, i.sender_id, i.text, i.sealed, i.ask, i.deadline,
       i.reply_to, i.by_runtime, i.created_at, s.number, s.kind,
       ARRAY(SELECT identity_id FROM others) AS wake
FROM inserted i JOIN identities s ON s.id = i.sender_id";

/// The thread read: always one row of checks (`member`: the caller is a
/// current member; `found`: the message is in the room), carrying the page's
/// messages when both hold — the messages of `$2`'s thread (its root and the
/// root's reply chain: the messages whose stored `thread_root` is `$2`'s)
/// after seq `$3`, at most `$4`, and none past the first whose content takes
/// the page over `$6` bytes. The page is one range of `messages_thread_idx`,
/// so it reads what it returns however long the thread is, and only when the
/// checks hold (its `WHERE` starts with them).
pub(super) const THREAD: &str = "\
WITH checks AS (
    SELECT EXISTS (SELECT 1 FROM room_members
                   WHERE room_id = $1 AND identity_id = $5 AND left_at IS NULL) AS member,
           EXISTS (SELECT 1 FROM messages WHERE room_id = $1 AND id = $2) AS found
), root AS (
    SELECT thread_root FROM messages WHERE room_id = $1 AND id = $2
), sized AS (
    -- One range of `messages_thread_idx` in its order: the root is a value
    -- the range starts from (lateral), and it is bounded on both sides
    -- rather than equal, so that no other index gives the order asked for
    -- (with an equality the order was `seq` alone, and a planner that
    -- thought the root common walked the whole room in seq order,
    -- filtering every message by its root). Sized where it is read (the
    -- generic plan joined a second read of the page to the whole room).
    -- The size is the content's bytes, never more than the envelope's JSON:
    -- the text, or a sealed payload's base64 strings.
    SELECT m.id, m.seq, m.own FROM checks c, root r, LATERAL (
        SELECT id, seq,
               COALESCE(octet_length(text), 0) + COALESCE((
                   SELECT sum(octet_length(e->>'enc') + octet_length(e->>'ciphertext'))
                   FROM jsonb_array_elements(sealed->'recipients') e
               ), 0) AS own
        FROM messages
        WHERE room_id = $1 AND thread_root >= r.thread_root AND thread_root <= r.thread_root
          AND seq > $3
        ORDER BY thread_root, seq
        LIMIT $4
    ) m
    WHERE c.member AND c.found
), page AS (
    SELECT id, seq, own, sum(own) OVER (ORDER BY seq ROWS UNBOUNDED PRECEDING) AS upto
    FROM sized
)
-- Each message of the page loaded by its key (lateral, `OFFSET 0`): with
-- `LIMIT $4` unknown, the generic plan guessed thousands of rows and hashed
-- the whole room against them.
SELECT c.member, c.found, p.* FROM checks c LEFT JOIN (
    SELECT m.* FROM page g, LATERAL (
        SELECT m.id, m.room_id, m.seq, m.sender_id, m.text, m.sealed, m.ask, m.deadline,
               m.reply_to, m.by_runtime, m.created_at, i.number, i.kind
        FROM messages m JOIN identities i ON i.id = m.sender_id
        WHERE m.room_id = $1 AND m.id = g.id
        OFFSET 0
    ) m
    WHERE g.upto - g.own < $6
) p ON true
ORDER BY p.seq";
