//! The thread read: one cached statement ([`THREAD`]) for the checks and
//! the page.

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Nullable, Text, Uuid as SqlUuid};
use diesel_async::RunQueryDsl;
use relayger_core::wire::MessageEnvelope;
use time::OffsetDateTime;
use uuid::Uuid;

use super::sql::THREAD;
use super::{MessageRow, MessageWithSender, NO_SUCH_MESSAGE};
use crate::prepared::CachedExt;
use crate::rooms::NO_SUCH_ROOM;
use crate::{Caller, Store, StoreError};

/// One row of [`THREAD`]: the checks, and a message unless the page is
/// empty (or the checks failed).
#[derive(QueryableByName)]
struct ThreadRow {
    #[diesel(sql_type = diesel::sql_types::Bool)]
    member: bool,
    #[diesel(sql_type = diesel::sql_types::Bool)]
    found: bool,
    #[diesel(sql_type = Nullable<SqlUuid>)]
    id: Option<Uuid>,
    #[diesel(sql_type = Nullable<SqlUuid>)]
    room_id: Option<Uuid>,
    #[diesel(sql_type = Nullable<BigInt>)]
    seq: Option<i64>,
    #[diesel(sql_type = Nullable<SqlUuid>)]
    sender_id: Option<Uuid>,
    #[diesel(sql_type = Nullable<Text>)]
    text: Option<String>,
    #[diesel(sql_type = Nullable<diesel::sql_types::Jsonb>)]
    sealed: Option<serde_json::Value>,
    #[diesel(sql_type = Nullable<diesel::sql_types::Bool>)]
    ask: Option<bool>,
    #[diesel(sql_type = Nullable<diesel::sql_types::Timestamptz>)]
    deadline: Option<OffsetDateTime>,
    #[diesel(sql_type = Nullable<SqlUuid>)]
    reply_to: Option<Uuid>,
    #[diesel(sql_type = Nullable<diesel::sql_types::Bool>)]
    by_runtime: Option<bool>,
    #[diesel(sql_type = Nullable<diesel::sql_types::Timestamptz>)]
    created_at: Option<OffsetDateTime>,
    #[diesel(sql_type = Nullable<Text>)]
    number: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    kind: Option<String>,
}

impl ThreadRow {
    /// The message this row carries, if any.
    fn envelope(self) -> Option<MessageEnvelope> {
        let message = MessageRow {
            id: self.id?,
            room_id: self.room_id?,
            seq: self.seq?,
            sender_id: self.sender_id?,
            text: self.text,
            sealed: self.sealed,
            ask: self.ask?,
            deadline: self.deadline,
            reply_to: self.reply_to,
            by_runtime: self.by_runtime?,
            created_at: self.created_at?,
        };
        let row = MessageWithSender {
            message,
            sender_number: self.number?,
            sender_kind: self.kind?,
        };
        Some(row.envelope())
    }
}

impl Store {
    /// The thread of `message_id` (its root and the root's reply chain), in
    /// seq order after `after`: at most `limit + 1` envelopes (the extra one
    /// tells the caller whether more follow), and none past the first whose
    /// content takes the page over `max_bytes` (an envelope is never smaller
    /// than its content, so nothing later could be returned). The cut is
    /// made in SQL: no more is loaded than one page can hold, plus one.
    pub async fn thread(
        &self,
        caller: &Caller,
        room_id: Uuid,
        message_id: Uuid,
        after: i64,
        limit: usize,
        max_bytes: usize,
    ) -> Result<Vec<MessageEnvelope>, StoreError> {
        if !caller.may_see_room(room_id) {
            return Err(StoreError::not_found(NO_SUCH_ROOM));
        }
        let mut conn = self.conn().await?;
        let rows: Vec<ThreadRow> = diesel::sql_query(THREAD)
            .bind::<SqlUuid, _>(room_id)
            .bind::<SqlUuid, _>(message_id)
            .bind::<BigInt, _>(after)
            .bind::<BigInt, _>(i64::try_from(limit).unwrap_or(i64::MAX).saturating_add(1))
            .bind::<SqlUuid, _>(caller.identity_id)
            .bind::<BigInt, _>(i64::try_from(max_bytes).unwrap_or(i64::MAX))
            .cached()
            .load(&mut conn)
            .await?;
        let Some(first) = <[ThreadRow]>::first(&rows) else {
            // `checks` is always one row.
            return Err(StoreError::Query(diesel::result::Error::NotFound));
        };
        if !first.member {
            return Err(StoreError::not_found(NO_SUCH_ROOM));
        }
        if !first.found {
            return Err(StoreError::not_found(NO_SUCH_MESSAGE));
        }
        Ok(rows.into_iter().filter_map(ThreadRow::envelope).collect())
    }
}
