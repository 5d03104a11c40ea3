//! The bounded scan: turns new messages of changed rooms into jobs and moves
//! the per-room checkpoints, in the claiming transaction.
//!
//! Its cost follows the rooms that changed, not all the rooms an agent is
//! in: every message insert (and every join) marks its room in
//! `runtime_dirty_rooms` for the members' runtimes, and the scan reads only
//! those marks. It is set-based: three statements for all the changed rooms
//! it takes (lock the rooms, read membership, checkpoints and new messages,
//! write jobs, checkpoints and cleared marks). The two reads go in the
//! claim's first flight whether or not anything changed (then they are two
//! index reads that find no mark); the write is left out when there is
//! nothing to write.

use std::collections::HashMap;
use std::sync::LazyLock;

use diesel::prelude::*;
use diesel::sql_types::{Array, BigInt, Bool, Text};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use relayger_core::policy::{MessageFacts, Policy};
use uuid::Uuid;

use super::with_states;
use crate::StoreError;
use crate::pause::{PausePoint, pause};
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

#[derive(QueryableByName)]
struct LockedRoom {
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    id: Uuid,
    #[diesel(sql_type = BigInt)]
    last_seq: i64,
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

/// The oldest marks' rooms, read sharing the room row lock. A sender that
/// is inserting right now holds that lock until commit: this waits for it
/// and then sees its seq, and no later sender commits before this claim
/// does, so the messages read after it include every message up to this
/// seq and a mark is only dropped for messages that were scanned. Without
/// the lock the sender's no-op re-mark could be deleted and its message
/// never scanned. The marks themselves are not locked: the runtime's row
/// lock already serialises its claims, and locking them would deadlock
/// with a sender that holds the room lock while re-marking the room.
const LOCK_ROOMS: &str = concat!(
    oldest_marks!(),
    "     SELECT r.id, r.last_seq FROM rooms r JOIN dirty d ON d.room_id = r.id
     ORDER BY d.marked_at, r.id
     FOR SHARE OF r"
);

#[derive(QueryableByName)]
struct RoomMessage {
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    room_id: Uuid,
    #[diesel(sql_type = Bool)]
    member: bool,
    #[diesel(sql_type = BigInt)]
    checkpoint: i64,
    #[diesel(sql_type = Bool)]
    more_rooms: bool,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Uuid>)]
    message_id: Option<Uuid>,
    #[diesel(sql_type = diesel::sql_types::Nullable<BigInt>)]
    seq: Option<i64>,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Uuid>)]
    sender_id: Option<Uuid>,
    #[diesel(sql_type = diesel::sql_types::Nullable<Bool>)]
    ask: Option<bool>,
    #[diesel(sql_type = diesel::sql_types::Nullable<Bool>)]
    by_runtime: Option<bool>,
}

/// Membership, checkpoint and the next messages of each marked room (a row
/// per message, or one row without a message). Membership is a per-room
/// primary-key lookup (`count(*)` in a lateral join): written as `EXISTS`,
/// PostgreSQL planned it as one hashed subplan over every membership of the
/// agent — 10,000 rows read for a claim of one room in P4. A statement of
/// its own, run after [`LOCK_ROOMS`] (sent behind it in the same flight):
/// its snapshot is taken once the room locks are held, so it includes a
/// join that held a room lock, which a rejoin (it locks the room row)
/// cannot slip past. It reads the marks again rather than taking the
/// locked rooms as a parameter, so it need not wait for their answer; a
/// sender may mark a room in between, and only rooms both statements name
/// are scanned ([`plan`]).
const ROOM_MESSAGES: &str = concat!(
    oldest_marks!(),
    "     SELECT r.room_id, mem.member, COALESCE(c.seq, 0) AS checkpoint,
            EXISTS (SELECT 1 FROM runtime_dirty_rooms WHERE runtime_id = $1
                    OFFSET $2) AS more_rooms,
            m.id AS message_id, m.seq, m.sender_id, m.ask, m.by_runtime
     FROM dirty r
     CROSS JOIN LATERAL (
         SELECT count(*) > 0 AS member FROM room_members rm
         WHERE rm.room_id = r.room_id AND rm.identity_id = $3 AND rm.left_at IS NULL
     ) mem
     LEFT JOIN runtime_checkpoints c ON c.runtime_id = $1 AND c.room_id = r.room_id
     LEFT JOIN LATERAL (
         SELECT id, seq, sender_id, ask, by_runtime FROM messages
         WHERE mem.member AND room_id = r.room_id AND seq > COALESCE(c.seq, 0)
         ORDER BY seq LIMIT $4
     ) m ON true
     ORDER BY r.room_id, m.seq"
);

/// The scan's writes: new jobs, checkpoints (never backwards) and the
/// dropped marks, in one statement.
static WRITE_SCAN: LazyLock<String> = LazyLock::new(|| {
    with_states(
        "WITH new_jobs AS (
             INSERT INTO jobs (id, runtime_id, room_id, message_id, job_key, state)
             SELECT id, $1, room_id, message_id, job_key, {pending}
             FROM unnest($2::uuid[], $3::uuid[], $4::uuid[], $5::text[])
                 AS t(id, room_id, message_id, job_key)
             ON CONFLICT DO NOTHING
         ),
         checkpoints AS (
             INSERT INTO runtime_checkpoints (runtime_id, room_id, seq)
             SELECT $1, room_id, seq FROM unnest($6::uuid[], $7::bigint[]) AS t(room_id, seq)
             ON CONFLICT (runtime_id, room_id)
             DO UPDATE SET seq = GREATEST(runtime_checkpoints.seq, EXCLUDED.seq)
         )
         DELETE FROM runtime_dirty_rooms WHERE runtime_id = $1 AND room_id = ANY($8::uuid[])",
    )
});

/// What the scan read: the locked rooms and their messages.
pub(crate) struct ScanRead {
    locked: Vec<LockedRoom>,
    rows: Vec<RoomMessage>,
}

/// Locks up to [`ROOMS_PER_SCAN`] changed rooms and reads their
/// membership, checkpoints and new messages: two statements, sent together
/// (the future does not borrow `conn` once made, so a claim polls it with
/// its first flight; pipelined statements run in the order sent). Reads
/// and locks nothing unless the runtime is the agent's.
pub(crate) fn read(
    conn: &AsyncPgConnection,
    runtime_id: Uuid,
    agent_id: Uuid,
) -> impl std::future::Future<Output = QueryResult<ScanRead>> + Send + '_ {
    let (mut first, mut second) = (conn, conn);
    let locked = diesel::sql_query(LOCK_ROOMS)
        .bind::<diesel::sql_types::Uuid, _>(runtime_id)
        .bind::<BigInt, _>(ROOMS_PER_SCAN)
        .bind::<diesel::sql_types::Uuid, _>(agent_id)
        .cached()
        .load(&mut first);
    let rows = diesel::sql_query(ROOM_MESSAGES)
        .bind::<diesel::sql_types::Uuid, _>(runtime_id)
        .bind::<BigInt, _>(ROOMS_PER_SCAN)
        .bind::<diesel::sql_types::Uuid, _>(agent_id)
        .bind::<BigInt, _>(MESSAGES_PER_ROOM)
        .cached()
        .load(&mut second);
    async move {
        let (locked, rows) = futures_util::try_join!(locked, rows)?;
        Ok(ScanRead { locked, rows })
    }
}

/// What the scan writes (sent by the caller, [`ScanWrites::send`], in one
/// flight with the claim's first candidate read) and whether changed rooms
/// remain (the caller should scan again soon). Only a room both of
/// [`read`]'s statements name is scanned: one a sender marked between them
/// (not locked) and one whose mark fell out of the second's window (a
/// mark with an older time committed late) stay marked for the next scan.
pub(crate) async fn plan(
    read: ScanRead,
    runtime_id: Uuid,
    agent_id: Uuid,
    policy: &Policy,
) -> (ScanWrites, bool) {
    let ScanRead { locked, rows } = read;
    let mut writes = ScanWrites::default();
    let mut by_room: HashMap<Uuid, Vec<&RoomMessage>> = HashMap::new();
    for row in &rows {
        by_room.entry(row.room_id).or_default().push(row);
    }
    if locked.is_empty() {
        return (writes, !by_room.is_empty());
    }
    pause(PausePoint::ScanAfterMembership, runtime_id).await;
    let mut more = rows.as_slice().first().is_some_and(|row| row.more_rooms);
    for room in &locked {
        match by_room.remove(&room.id) {
            Some(rows) => more |= writes.room(runtime_id, agent_id, policy, room, &rows),
            None => more = true,
        }
    }
    more |= !by_room.is_empty();
    writes.interleave_rooms();
    (writes, more)
}

/// What one scan writes, collected over its rooms.
#[derive(Default)]
pub(crate) struct ScanWrites {
    /// Each new job's place among its room's new jobs (0 for the oldest).
    job_ranks: Vec<usize>,
    job_ids: Vec<Uuid>,
    job_rooms: Vec<Uuid>,
    job_messages: Vec<Uuid>,
    job_keys: Vec<String>,
    checkpoint_rooms: Vec<Uuid>,
    checkpoint_seqs: Vec<i64>,
    cleared: Vec<Uuid>,
}

impl ScanWrites {
    /// One room's jobs, checkpoint and mark. Returns true when the room
    /// still has unscanned messages.
    fn room(
        &mut self,
        runtime_id: Uuid,
        agent_id: Uuid,
        policy: &Policy,
        room: &LockedRoom,
        rows: &[&RoomMessage],
    ) -> bool {
        let member = rows.first().is_some_and(|row| row.member);
        if !member {
            // No access: nothing in this room becomes a job.
            self.cleared.push(room.id);
            return false;
        }
        let checkpoint = rows.first().map_or(0, |row| row.checkpoint);
        let mut scanned_to = checkpoint;
        let mut rank = 0;
        for row in rows {
            let (Some(message_id), Some(seq), Some(sender), Some(ask), Some(by_runtime)) = (
                row.message_id,
                row.seq,
                row.sender_id,
                row.ask,
                row.by_runtime,
            ) else {
                continue;
            };
            scanned_to = scanned_to.max(seq);
            // Only the trigger decides here; sender, room, deadline and
            // access are judged at claim time under the policy current
            // then, and a refusal is recorded as a skip.
            let facts = MessageFacts {
                from_self: sender == agent_id,
                ask,
                by_runtime,
            };
            if policy.triggers_on(&facts) {
                self.job_ranks.push(rank);
                rank += 1;
                self.job_rooms.push(room.id);
                self.job_messages.push(message_id);
                self.job_keys.push(job_key(runtime_id, room.id, message_id));
            }
        }
        if scanned_to > checkpoint {
            self.checkpoint_rooms.push(room.id);
            self.checkpoint_seqs.push(scanned_to);
        }
        // The mark goes once the checkpoint has reached the room's last seq
        // (read under the room lock).
        if room.last_seq > scanned_to {
            return true;
        }
        self.cleared.push(room.id);
        false
    }

    /// Gives the new jobs their ids (UUIDv7, increasing) rooms taking
    /// turns: every room's oldest new job, then every room's second, and so
    /// on, each room's jobs in message order. The jobs of one scan share
    /// its transaction's `created_at`, so their ids are the claim order;
    /// taken room by room, a claim's candidates would come from one room at
    /// a time, and with at most [`JOBS_PER_ROOM`] granted a room it would
    /// lock round after round of another room's jobs to fill a batch.
    ///
    /// [`JOBS_PER_ROOM`]: relayger_core::limits::JOBS_PER_ROOM
    fn interleave_rooms(&mut self) {
        let mut order: Vec<usize> = (0..self.job_ranks.len()).collect();
        // Stable: within a rank, rooms keep the scan's order.
        order.sort_by_key(|&i| self.job_ranks[i]);
        self.job_rooms = permute(std::mem::take(&mut self.job_rooms), &order);
        self.job_messages = permute(std::mem::take(&mut self.job_messages), &order);
        self.job_keys = permute(std::mem::take(&mut self.job_keys), &order);
        self.job_ids = order.iter().map(|_| Uuid::now_v7()).collect();
        self.job_ranks.clear();
    }

    /// The scan's one write ([`WRITE_SCAN`]), none when it has nothing to
    /// write. It may be polled together with other statements on the same
    /// connection: they are pipelined (sent in one flight, run in order).
    pub(crate) fn send(
        self,
        mut conn: &AsyncPgConnection,
        runtime_id: Uuid,
    ) -> impl std::future::Future<Output = QueryResult<usize>> + Send + '_ {
        let nothing =
            self.job_ids.is_empty() && self.checkpoint_rooms.is_empty() && self.cleared.is_empty();
        let write = (!nothing).then(|| {
            diesel::sql_query(WRITE_SCAN.as_str())
                .bind::<diesel::sql_types::Uuid, _>(runtime_id)
                .bind::<Array<diesel::sql_types::Uuid>, _>(self.job_ids)
                .bind::<Array<diesel::sql_types::Uuid>, _>(self.job_rooms)
                .bind::<Array<diesel::sql_types::Uuid>, _>(self.job_messages)
                .bind::<Array<Text>, _>(self.job_keys)
                .bind::<Array<diesel::sql_types::Uuid>, _>(self.checkpoint_rooms)
                .bind::<Array<BigInt>, _>(self.checkpoint_seqs)
                .bind::<Array<diesel::sql_types::Uuid>, _>(self.cleared)
                .cached()
                .execute(&mut conn)
        });
        async move {
            match write {
                Some(write) => write.await,
                None => Ok(0),
            }
        }
    }
}

/// `values` in `order` (a permutation of their indexes).
fn permute<T>(values: Vec<T>, order: &[usize]) -> Vec<T> {
    let mut values: Vec<Option<T>> = values.into_iter().map(Some).collect();
    order.iter().filter_map(|&i| values[i].take()).collect()
}
