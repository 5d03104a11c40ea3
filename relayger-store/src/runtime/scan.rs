//! The bounded scan: turns new messages of changed rooms into jobs and moves
//! the per-room checkpoints, in the claiming transaction.
//!
//! Its cost follows the rooms that changed, not all the rooms an agent is
//! in: every message insert (and every join) marks its room in
//! `runtime_dirty_rooms` for the members' runtimes, and the scan reads only
//! those marks. It is set-based: two statements for all the changed rooms
//! it takes, whatever their number (`scan/lock_rooms.sql` locks the rooms;
//! `scan/write_scan.sql` takes the same rooms again, reads membership,
//! checkpoints and new messages and writes jobs, checkpoints and cleared
//! marks), both in the claim's first flight whether or not anything changed
//! (then they are index reads that find no mark).

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Bool};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use uuid::Uuid;

use super::statements::{LOCK_ROOMS, WRITE_SCAN};
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
    let lock = diesel::sql_query(LOCK_ROOMS)
        .bind::<diesel::sql_types::Uuid, _>(runtime_id)
        .bind::<diesel::sql_types::Uuid, _>(agent_id)
        .bind::<BigInt, _>(ROOMS_PER_SCAN)
        .cached()
        .execute(&mut first);
    let write = diesel::sql_query(WRITE_SCAN)
        .bind::<diesel::sql_types::Uuid, _>(runtime_id)
        .bind::<diesel::sql_types::Uuid, _>(agent_id)
        .bind::<BigInt, _>(MESSAGES_PER_ROOM)
        .bind::<BigInt, _>(ROOMS_PER_SCAN)
        .cached()
        .get_result::<Scanned>(&mut second);
    async move {
        let (_, scanned) = futures_util::try_join!(lock, write)?;
        Ok(scanned.more_to_scan)
    }
}
