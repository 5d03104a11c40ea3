//! The bounded scan: turns new messages of changed rooms into jobs and moves
//! the per-room checkpoints, in the claiming transaction.
//!
//! Its cost follows the rooms that changed, not all the rooms an agent is
//! in: every message insert (and every join) marks its room in
//! `runtime_dirty_rooms` for the members' runtimes, and the scan reads only
//! those marks.

use diesel::prelude::*;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use relayger_core::policy::{MessageFacts, Policy};
use uuid::Uuid;

use crate::StoreError;
use crate::pause::{PausePoint, pause};
use crate::schema::{
    jobs, messages, room_members, rooms, runtime_checkpoints, runtime_dirty_rooms, runtimes,
};

/// Rooms looked at per scan.
const ROOMS_PER_SCAN: i64 = 32;
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

/// Scans up to [`ROOMS_PER_SCAN`] changed rooms. Returns true when changed
/// rooms remain (the caller should scan again soon).
pub(crate) async fn scan(
    conn: &mut AsyncPgConnection,
    runtime_id: Uuid,
    agent_id: Uuid,
    policy: &Policy,
) -> Result<bool, StoreError> {
    let dirty: Vec<Uuid> = runtime_dirty_rooms::table
        .filter(runtime_dirty_rooms::runtime_id.eq(runtime_id))
        .order(runtime_dirty_rooms::marked_at)
        .limit(ROOMS_PER_SCAN + 1)
        .select(runtime_dirty_rooms::room_id)
        // No row locks here: the runtime's row lock already serialises its
        // claims, and locking the marks would deadlock with a sender that
        // holds the room lock while re-marking the room (the scan then
        // waits for that room lock in `locked_last_seq`).
        .load(conn)
        .await?;
    let more_rooms = dirty.len() as i64 > ROOMS_PER_SCAN;
    let mut more = more_rooms;
    for room_id in dirty.into_iter().take(ROOMS_PER_SCAN as usize) {
        more |= scan_room(conn, runtime_id, agent_id, policy, room_id).await?;
    }
    Ok(more)
}

/// Returns true when the room still has unscanned messages.
async fn scan_room(
    conn: &mut AsyncPgConnection,
    runtime_id: Uuid,
    agent_id: Uuid,
    policy: &Policy,
    room_id: Uuid,
) -> Result<bool, StoreError> {
    // The room row first, then membership: see `locked_last_seq`; a rejoin
    // (which locks the row) waits for this scan to commit before it marks.
    let last_seq = locked_last_seq(conn, room_id).await?;
    let member: i64 = room_members::table
        .filter(room_members::room_id.eq(room_id))
        .filter(room_members::identity_id.eq(agent_id))
        .filter(room_members::left_at.is_null())
        .count()
        .get_result(conn)
        .await?;
    pause(PausePoint::ScanAfterMembership, runtime_id).await;
    if member == 0 {
        // No access: nothing in this room becomes a job.
        clear_mark(conn, runtime_id, room_id, i64::MAX, last_seq).await?;
        return Ok(false);
    }
    let checkpoint: i64 = runtime_checkpoints::table
        .find((runtime_id, room_id))
        .select(runtime_checkpoints::seq)
        .first(conn)
        .await
        .optional()?
        .unwrap_or(0);
    let batch: Vec<(Uuid, i64, Uuid, bool, bool)> = messages::table
        .filter(messages::room_id.eq(room_id))
        .filter(messages::seq.gt(checkpoint))
        .order(messages::seq)
        .limit(MESSAGES_PER_ROOM)
        .select((
            messages::id,
            messages::seq,
            messages::sender_id,
            messages::ask,
            messages::by_runtime,
        ))
        .load(conn)
        .await?;
    let Some(&(_, scanned_to, _, _, _)) = batch.last() else {
        clear_mark(conn, runtime_id, room_id, checkpoint, last_seq).await?;
        return Ok(false);
    };
    let new_jobs: Vec<_> = batch
        .iter()
        // Only the trigger decides here; sender, room, deadline and access
        // are judged at claim time under the policy current then, and a
        // refusal is recorded as a skip.
        .filter(|(_, _, sender, ask, by_runtime)| {
            policy.triggers_on(&MessageFacts {
                from_self: *sender == agent_id,
                ask: *ask,
                by_runtime: *by_runtime,
            })
        })
        .map(|(message_id, _, _, _, _)| {
            (
                jobs::id.eq(Uuid::now_v7()),
                jobs::runtime_id.eq(runtime_id),
                jobs::room_id.eq(room_id),
                jobs::message_id.eq(*message_id),
                jobs::job_key.eq(job_key(runtime_id, room_id, *message_id)),
                jobs::state.eq("pending"),
            )
        })
        .collect();
    if !new_jobs.is_empty() {
        diesel::insert_into(jobs::table)
            .values(new_jobs)
            .on_conflict_do_nothing()
            .execute(conn)
            .await?;
    }
    diesel::insert_into(runtime_checkpoints::table)
        .values((
            runtime_checkpoints::runtime_id.eq(runtime_id),
            runtime_checkpoints::room_id.eq(room_id),
            runtime_checkpoints::seq.eq(scanned_to),
        ))
        .on_conflict((
            runtime_checkpoints::runtime_id,
            runtime_checkpoints::room_id,
        ))
        .do_update()
        // Checkpoints never move backwards.
        .set(
            runtime_checkpoints::seq.eq(diesel::dsl::sql::<diesel::sql_types::BigInt>(
                "GREATEST(runtime_checkpoints.seq, EXCLUDED.seq)",
            )),
        )
        .execute(conn)
        .await?;
    clear_mark(conn, runtime_id, room_id, scanned_to, last_seq).await
}

/// The room's last seq, read sharing the room row lock. It waits for a
/// sender that is inserting right now (it holds that lock until commit) and
/// then sees its seq, and no later sender commits before this claim does:
/// the batch read after it sees every message up to this seq, so a mark is
/// only dropped for messages that were scanned. Without the lock the
/// sender's no-op re-mark could be deleted and its message never scanned.
async fn locked_last_seq(conn: &mut AsyncPgConnection, room_id: Uuid) -> Result<i64, StoreError> {
    Ok(rooms::table
        .find(room_id)
        .select(rooms::last_seq)
        .for_share()
        .first(conn)
        .await?)
}

/// Drops the room's mark once the checkpoint has reached the room's last
/// seq (read under the room lock by [`locked_last_seq`]). Returns true when
/// the room still has unscanned messages.
async fn clear_mark(
    conn: &mut AsyncPgConnection,
    runtime_id: Uuid,
    room_id: Uuid,
    scanned_to: i64,
    last_seq: i64,
) -> Result<bool, StoreError> {
    if last_seq > scanned_to {
        return Ok(true);
    }
    diesel::delete(runtime_dirty_rooms::table.find((runtime_id, room_id)))
        .execute(conn)
        .await?;
    Ok(false)
}
