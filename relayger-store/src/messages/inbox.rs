//! The mailbox: inbox pages and the ACK cursor.

use diesel::prelude::*;
use diesel::sql_types::BigInt;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use relayger_core::inbox_budget::{self, InboxBudget};
use relayger_core::wire::{InboxRoom, MessageEnvelope};
use uuid::Uuid;

use super::{MessageRow, MessageWithSender};
use crate::prepared::CachedExt;
use crate::rooms::require_member;
use crate::schema::{identities, mailbox_cursors, messages, rooms};
use crate::{Caller, Store, StoreError};

/// Messages of one room read per query while an inbox page is filled.
const INBOX_CHUNK: i64 = 20;

impl Store {
    /// One inbox page: rooms with news after `after` (in room-id order), each
    /// with its oldest unacknowledged messages from others, until `budget`
    /// is spent; the `after` that continues, when rooms were left.
    pub async fn inbox(
        &self,
        caller: &Caller,
        after: Option<Uuid>,
        mut budget: InboxBudget,
    ) -> Result<(Vec<InboxRoom>, Option<Uuid>), StoreError> {
        let mut conn = self.conn().await?;
        let me = caller.identity_id;
        let mut query = rooms::table
            .inner_join(crate::schema::room_members::table)
            .left_join(
                mailbox_cursors::table.on(mailbox_cursors::room_id
                    .eq(rooms::id)
                    .and(mailbox_cursors::identity_id.eq(me))),
            )
            .filter(crate::schema::room_members::identity_id.eq(me))
            .filter(crate::schema::room_members::left_at.is_null())
            .filter(rooms::last_seq.gt(diesel::dsl::sql::<BigInt>(
                "COALESCE(mailbox_cursors.acked_seq, 0)",
            )))
            .into_boxed();
        if let Some(after) = after {
            query = query.filter(rooms::id.gt(after));
        }
        if let Some(allowed) = &caller.rooms {
            query = query.filter(rooms::id.eq_any(allowed.clone()));
        }
        let rooms_with_news: Vec<(Uuid, i64, Option<i64>)> = query
            .order(rooms::id)
            .limit(i64::from(inbox_budget::MAX_ROOMS) + 1)
            .select((
                rooms::id,
                rooms::last_seq,
                mailbox_cursors::acked_seq.nullable(),
            ))
            // A boxed query is not cached by itself; its text takes four
            // shapes (with or without `after` and a room list).
            .cached()
            .load(&mut conn)
            .await?;
        let more_rooms = rooms_with_news.len() > inbox_budget::MAX_ROOMS as usize;
        let mut out = Vec::new();
        let mut last_seen = None;
        for (room_id, last_seq, acked) in rooms_with_news
            .into_iter()
            .take(inbox_budget::MAX_ROOMS as usize)
        {
            if budget.is_spent() {
                return Ok((out, last_seen));
            }
            let acked_seq = acked.unwrap_or(0);
            let messages = inbox_room(&mut conn, room_id, acked_seq, me, &mut budget).await?;
            last_seen = Some(room_id);
            if messages.is_empty() {
                continue;
            }
            out.push(InboxRoom {
                room_id,
                acked_seq,
                last_seq,
                messages,
            });
        }
        Ok((out, if more_rooms { last_seen } else { None }))
    }

    /// Moves the caller's ACK cursor in a room forward to `seq`.
    pub async fn ack(&self, caller: &Caller, room_id: Uuid, seq: i64) -> Result<i64, StoreError> {
        let mut conn = self.conn().await?;
        let room = require_member(&mut conn, caller, room_id).await?;
        if seq < 0 || seq > room.last_seq {
            return Err(StoreError::invalid(format!(
                "seq must be from 0 to the room's last seq {}, got {seq}",
                room.last_seq
            )));
        }
        let acked: i64 = diesel::insert_into(mailbox_cursors::table)
            .values((
                mailbox_cursors::identity_id.eq(caller.identity_id),
                mailbox_cursors::room_id.eq(room_id),
                mailbox_cursors::acked_seq.eq(seq),
            ))
            .on_conflict((mailbox_cursors::identity_id, mailbox_cursors::room_id))
            .do_update()
            .set((
                mailbox_cursors::acked_seq.eq(diesel::dsl::sql::<BigInt>(
                    "GREATEST(mailbox_cursors.acked_seq, EXCLUDED.acked_seq)",
                )),
                mailbox_cursors::updated_at.eq(diesel::dsl::now),
            ))
            .returning(mailbox_cursors::acked_seq)
            .get_result(&mut conn)
            .await?;
        Ok(acked)
    }
}

/// A room's oldest unacknowledged messages from others, read a few at a
/// time so no more than the page's budget is ever loaded.
async fn inbox_room(
    conn: &mut AsyncPgConnection,
    room_id: Uuid,
    acked_seq: i64,
    me: Uuid,
    budget: &mut InboxBudget,
) -> Result<Vec<MessageEnvelope>, StoreError> {
    let mut messages = Vec::new();
    let mut allowance = i64::from(budget.room_allowance());
    let mut after_seq = acked_seq;
    while allowance > 0 {
        let rows: Vec<MessageWithSender> = messages::table
            .inner_join(identities::table)
            .filter(messages::room_id.eq(room_id))
            .filter(messages::seq.gt(after_seq))
            .filter(messages::sender_id.ne(me))
            .order(messages::seq)
            .limit(allowance.min(INBOX_CHUNK))
            .select((
                MessageRow::as_select(),
                identities::number,
                identities::kind,
            ))
            .load(conn)
            .await?;
        let full = rows.len() as i64 == allowance.min(INBOX_CHUNK);
        for row in rows {
            let bytes = row.message.text.as_ref().map_or(0, String::len)
                + row
                    .message
                    .sealed
                    .as_ref()
                    .map_or(0, |sealed| sealed.to_string().len());
            if !budget.take(bytes) {
                return Ok(messages);
            }
            after_seq = row.message.seq;
            allowance -= 1;
            messages.push(row.envelope());
        }
        if !full {
            break;
        }
    }
    Ok(messages)
}
