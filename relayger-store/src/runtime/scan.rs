//! The bounded scan: turns new messages of changed rooms into jobs and moves
//! the per-room checkpoints, in the claiming transaction.
//!
//! Its cost follows the rooms that changed, not all the rooms an agent is
//! in: every message insert (and every join) marks its room in
//! `runtime_dirty_rooms` for the members' runtimes, and the scan reads only
//! those marks. It is set-based: two statements for all the changed rooms
//! it takes, whatever their number (lock the rooms; read membership,
//! checkpoints and new messages and write jobs, checkpoints and cleared
//! marks), both in the claim's first flight whether or not anything changed
//! (then they are index reads that find no mark).

use std::sync::LazyLock;

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Bool};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use relayger_core::policy::Trigger;
use uuid::Uuid;

use super::with_states;
use crate::StoreError;
use crate::prepared::CachedExt;
use crate::schema::{runtime_dirty_rooms, runtimes};

/// Rooms looked at per scan (one scan per claim).
const ROOMS_PER_SCAN: i64 = 128;
/// Messages read per room per scan.
const MESSAGES_PER_ROOM: i64 = 200;

/// Marks `rooms` changed for every runtime of `identities`.
pub(crate) async fn mark_rooms_changed(
    conn: &mut AsyncPgConnection,
    identities: &[Uuid],
    rooms: &[Uuid],
) -> Result<(), StoreError> {
    if identities.is_empty() || rooms.is_empty() {
        return Ok(());
    }
    let runtime_ids: Vec<Uuid> = runtimes::table
        .filter(runtimes::agent_id.eq_any(identities))
        .select(runtimes::id)
        .load(conn)
        .await?;
    let rows: Vec<_> = runtime_ids
        .iter()
        .flat_map(|runtime| {
            rooms.iter().map(move |room| {
                (
                    runtime_dirty_rooms::runtime_id.eq(*runtime),
                    runtime_dirty_rooms::room_id.eq(*room),
                )
            })
        })
        .collect();
    if rows.is_empty() {
        return Ok(());
    }
    diesel::insert_into(runtime_dirty_rooms::table)
        .values(rows)
        .on_conflict_do_nothing()
        .execute(conn)
        .await?;
    Ok(())
}

/// The idempotency key of one (runtime, message): stable across attempts,
/// processes and owners. A message id is unique only within its room, so
/// the room is part of the key.
pub(crate) fn job_key(runtime_id: Uuid, room_id: Uuid, message_id: Uuid) -> String {
    format!(
        "job_{}_{}_{}",
        runtime_id.simple(),
        room_id.simple(),
        message_id.simple()
    )
}

/// The agent's runtime `$1`'s oldest marks (at most `$2`): only when the
/// runtime is the agent `$3`'s, so a claim that sends this before it knows
/// (in its first flight) reads and locks nothing of someone else's.
macro_rules! oldest_marks {
    () => {
        "WITH dirty AS (
         SELECT room_id, marked_at FROM runtime_dirty_rooms
         WHERE runtime_id = $1
           AND EXISTS (SELECT 1 FROM runtimes WHERE id = $1 AND agent_id = $3)
         ORDER BY marked_at, room_id LIMIT $2
     )
"
    };
}

/// The transaction-local setting through which [`LOCK_ROOMS`] hands the
/// rooms it locked to [`WRITE_SCAN`], the next statement of the same flight:
/// statements pipelined behind each other cannot pass each other values any
/// other way without a round trip. `SET LOCAL`-like (`set_config(…, true)`),
/// so it ends with the transaction and holds through a transaction pooler.
const SCAN_ROOMS_SETTING: &str = "relayger.scan_rooms";

/// The oldest marks' rooms, locked sharing the room row lock, their ids
/// left in [`SCAN_ROOMS_SETTING`] in scan order. A sender that is inserting
/// right now holds that lock until commit: this waits for it, and no later
/// sender commits before this claim does. The marks themselves are not
/// locked: the runtime's row lock already serialises its claims, and
/// locking them would deadlock with a sender that holds the room lock while
/// re-marking the room.
static LOCK_ROOMS: LazyLock<String> = LazyLock::new(|| {
    format!(
        "{}, locked AS MATERIALIZED (
             SELECT r.id, d.marked_at FROM rooms r JOIN dirty d ON d.room_id = r.id
             ORDER BY d.marked_at, r.id
             FOR SHARE OF r
         )
         SELECT set_config('{SCAN_ROOMS_SETTING}',
                           COALESCE(string_agg(id::text, ',' ORDER BY marked_at, id), ''),
                           true) AS rooms
         FROM locked",
        oldest_marks!().trim_end()
    )
});

/// The scan of the rooms [`LOCK_ROOMS`] locked, in one statement: their
/// membership, checkpoints and next messages; a pending job for each
/// message the runtime's triggers take (`Policy::triggers_on`, evaluated
/// here on the stored policy; the property test `claim_judgement` holds it
/// to the core's), with ids in claim order — every room's oldest new job,
/// then every room's second, and so on, each room's in message order, so a
/// claim spreading its grants over rooms (at most `JOBS_PER_ROOM` a room)
/// does not lock round after round of one room's jobs; the checkpoints
/// (never backwards); and the marks dropped once a room's checkpoint
/// reached its last seq (or the agent is no member: nothing there becomes
/// a job). Sent right behind [`LOCK_ROOMS`], so its snapshot is taken once
/// the room locks are held: it sees every message up to the locked last
/// seq, and a join that held a room lock, which a rejoin (it locks the room
/// row) cannot slip past. Answers whether changed rooms remain (marks it
/// did not take, or rooms with messages past what it read).
static WRITE_SCAN: LazyLock<String> = LazyLock::new(|| {
    let questions = Trigger::Questions.as_str();
    let messages = Trigger::Messages.as_str();
    with_states(&format!(
        "WITH locked AS (
             SELECT t.room_id, t.ord
             FROM unnest(string_to_array(
                      NULLIF(current_setting('{SCAN_ROOMS_SETTING}', true), ''), ',')::uuid[])
                  WITH ORDINALITY AS t(room_id, ord)
         ),
         runtime AS (SELECT policy FROM runtimes WHERE id = $1 AND agent_id = $2),
         rooms_now AS (
             SELECT l.room_id, l.ord, r.last_seq, mem.member, COALESCE(c.seq, 0) AS checkpoint
             FROM locked l
             JOIN rooms r ON r.id = l.room_id
             CROSS JOIN LATERAL (
                 SELECT count(*) > 0 AS member FROM room_members rm
                 WHERE rm.room_id = l.room_id AND rm.identity_id = $2 AND rm.left_at IS NULL
             ) mem
             LEFT JOIN runtime_checkpoints c ON c.runtime_id = $1 AND c.room_id = l.room_id
         ),
         read AS (
             SELECT s.room_id, s.ord, m.id, m.seq, m.sender_id, m.ask, m.by_runtime
             FROM rooms_now s
             CROSS JOIN LATERAL (
                 SELECT id, seq, sender_id, ask, by_runtime FROM messages
                 WHERE s.member AND room_id = s.room_id AND seq > s.checkpoint
                 ORDER BY seq LIMIT $3
             ) m
         ),
         scanned AS (
             SELECT s.room_id, s.member, s.checkpoint, s.last_seq,
                    COALESCE((SELECT max(seq) FROM read WHERE read.room_id = s.room_id),
                             s.checkpoint) AS scanned_to
             FROM rooms_now s
         ),
         triggered AS (
             SELECT t.room_id, t.id AS message_id,
                    row_number() OVER (ORDER BY t.rank, t.ord) - 1 AS n
             FROM (
                 SELECT read.*, row_number() OVER (PARTITION BY read.room_id ORDER BY read.seq)
                            AS rank
                 FROM read CROSS JOIN runtime
                 WHERE read.sender_id <> $2
                   AND ((runtime.policy->'triggers' ? '{questions}' AND read.ask)
                        OR (runtime.policy->'triggers' ? '{messages}' AND NOT read.by_runtime))
             ) t
         ),
         stamp AS (SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms),
         new_jobs AS (
             INSERT INTO jobs (id, runtime_id, room_id, message_id, job_key, state)
             SELECT relayger_ordered_uuid(stamp.ms, t.n), $1, t.room_id, t.message_id,
                    'job_' || replace($1::text, '-', '') || '_' || replace(t.room_id::text, '-', '')
                        || '_' || replace(t.message_id::text, '-', ''),
                    {{pending}}
             FROM triggered t CROSS JOIN stamp
             ON CONFLICT DO NOTHING
         ),
         checkpoints AS (
             INSERT INTO runtime_checkpoints (runtime_id, room_id, seq)
             SELECT $1, room_id, scanned_to FROM scanned WHERE scanned_to > checkpoint
             ON CONFLICT (runtime_id, room_id)
             DO UPDATE SET seq = GREATEST(runtime_checkpoints.seq, EXCLUDED.seq)
         ),
         cleared AS (
             DELETE FROM runtime_dirty_rooms d USING scanned s
             WHERE d.runtime_id = $1 AND d.room_id = s.room_id
               AND (NOT s.member OR s.last_seq <= s.scanned_to)
         )
         SELECT EXISTS (SELECT 1 FROM scanned WHERE member AND last_seq > scanned_to)
             OR EXISTS (SELECT 1 FROM runtime_dirty_rooms d
                        WHERE d.runtime_id = $1
                          AND EXISTS (SELECT 1 FROM runtimes WHERE id = $1 AND agent_id = $2)
                          AND NOT EXISTS (SELECT 1 FROM scanned s WHERE s.room_id = d.room_id))
             AS more_to_scan"
    ))
});

#[derive(QueryableByName)]
struct Scanned {
    #[diesel(sql_type = Bool)]
    more_to_scan: bool,
}

/// Locks up to [`ROOMS_PER_SCAN`] changed rooms ([`LOCK_ROOMS`]) and scans
/// them ([`WRITE_SCAN`]): two statements sent together (the future does not
/// borrow `conn` once made, so a claim polls it with its first flight;
/// pipelined statements run in the order sent). Locks, reads and writes
/// nothing unless the runtime is the agent's. Answers whether changed rooms
/// remain (the caller should scan again soon).
pub(crate) fn scan(
    conn: &AsyncPgConnection,
    runtime_id: Uuid,
    agent_id: Uuid,
) -> impl std::future::Future<Output = QueryResult<bool>> + Send + '_ {
    let (mut first, mut second) = (conn, conn);
    let lock = diesel::sql_query(LOCK_ROOMS.as_str())
        .bind::<diesel::sql_types::Uuid, _>(runtime_id)
        .bind::<BigInt, _>(ROOMS_PER_SCAN)
        .bind::<diesel::sql_types::Uuid, _>(agent_id)
        .cached()
        .execute(&mut first);
    let write = diesel::sql_query(WRITE_SCAN.as_str())
        .bind::<diesel::sql_types::Uuid, _>(runtime_id)
        .bind::<diesel::sql_types::Uuid, _>(agent_id)
        .bind::<BigInt, _>(MESSAGES_PER_ROOM)
        .cached()
        .get_result::<Scanned>(&mut second);
    async move {
        let (_, scanned) = futures_util::try_join!(lock, write)?;
        Ok(scanned.more_to_scan)
    }
}
