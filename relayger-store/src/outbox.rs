//! The outbox: wake signals written in the committing transaction, turned
//! into NOTIFYs by a dispatcher, so a signal is never lost between commit
//! and notify (leftovers after a crash are dispatched on the next pass).

use diesel::prelude::*;
use diesel::sql_types::Text;
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use uuid::Uuid;

use crate::schema::outbox;
use crate::{Store, StoreError};

/// The NOTIFY channel that carries identity ids whose inbox changed.
pub const INBOX_CHANNEL: &str = "relayger_inbox";
/// The NOTIFY channel that carries revoked token ids (sockets close).
pub const REVOKED_CHANNEL: &str = "relayger_revoked";

/// NOTIFY payloads must stay under 8000 bytes: 36-byte UUIDs plus a comma.
const IDS_PER_NOTIFY: usize = 200;
/// Rows dispatched per pass.
const BATCH: i64 = 500;

/// Records that these identities' inboxes changed, in the caller's transaction.
pub(crate) async fn enqueue_inbox_changed(
    conn: &mut AsyncPgConnection,
    identity_ids: &[Uuid],
) -> Result<(), StoreError> {
    if identity_ids.is_empty() {
        return Ok(());
    }
    let mut ids = identity_ids.to_vec();
    ids.sort();
    ids.dedup();
    diesel::insert_into(outbox::table)
        .values((
            outbox::kind.eq("inbox_changed"),
            outbox::identity_ids.eq(ids),
        ))
        .execute(conn)
        .await?;
    Ok(())
}

pub(crate) async fn notify(
    conn: &mut AsyncPgConnection,
    channel: &str,
    payload: &str,
) -> Result<(), StoreError> {
    diesel::sql_query("SELECT pg_notify($1, $2)")
        .bind::<Text, _>(channel)
        .bind::<Text, _>(payload)
        .execute(conn)
        .await?;
    Ok(())
}

impl Store {
    /// Turns pending outbox rows into NOTIFYs and deletes them, in one
    /// transaction (NOTIFY is delivered on commit). Several dispatchers may
    /// run at once: rows are taken with SKIP LOCKED. Returns how many rows
    /// were dispatched.
    pub async fn dispatch_outbox(&self) -> Result<usize, StoreError> {
        let mut conn = self.conn().await?;
        conn.transaction(async |conn| -> Result<_, StoreError> {
            let rows: Vec<(i64, Vec<Uuid>)> = outbox::table
                .order(outbox::id)
                .limit(BATCH)
                .select((outbox::id, outbox::identity_ids))
                .for_update()
                .skip_locked()
                .load(conn)
                .await?;
            if rows.is_empty() {
                return Ok(0);
            }
            let mut ids: Vec<Uuid> = rows
                .iter()
                .flat_map(|(_, ids)| ids.iter().copied())
                .collect();
            ids.sort();
            ids.dedup();
            for chunk in ids.chunks(IDS_PER_NOTIFY) {
                let payload = chunk
                    .iter()
                    .map(Uuid::to_string)
                    .collect::<Vec<_>>()
                    .join(",");
                notify(conn, INBOX_CHANNEL, &payload).await?;
            }
            let row_ids: Vec<i64> = rows.iter().map(|(id, _)| *id).collect();
            diesel::delete(outbox::table.filter(outbox::id.eq_any(&row_ids)))
                .execute(conn)
                .await?;
            Ok(rows.len())
        })
        .await
    }

    /// Tells every server instance that a token was revoked.
    pub async fn notify_revoked(&self, token_id: Uuid) -> Result<(), StoreError> {
        let mut conn = self.conn().await?;
        notify(&mut conn, REVOKED_CHANNEL, &token_id.to_string()).await
    }
}
