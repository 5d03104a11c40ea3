//! The questions one identity asked in a room, newest first: an A2A
//! client's task list. And the direct room of two contacts, for a route
//! that names the other side by number.

use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use relayger_core::ids::IdentityNumber;
use relayger_core::wire::MessageEnvelope;
use uuid::Uuid;

use super::send::direct_room;
use super::{MessageRow, MessageWithSender};
use crate::rooms::require_member;
use crate::schema::{identities, messages};
use crate::{Caller, Store, StoreError};

/// One page of [`Store::questions`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuestionPage {
    /// Newest first.
    pub questions: Vec<MessageEnvelope>,
    /// Give as `before` for the next page; `None` on the last.
    pub next_before: Option<i64>,
    /// The caller's questions in the room, all pages together.
    pub total: i64,
}

impl Store {
    /// The direct room the caller shares with its contact `number` (404
    /// when there is none, or when the caller's token may not see it).
    pub async fn direct_room_with(
        &self,
        caller: &Caller,
        number: &IdentityNumber,
    ) -> Result<Uuid, StoreError> {
        let mut conn = self.conn().await?;
        let room = direct_room(&mut conn, caller.identity_id, number).await?;
        require_member(&mut conn, caller, room).await?;
        Ok(room)
    }

    /// The questions (`ask`) the caller sent in a room it is in, newest
    /// first, those before seq `before` when given, at most `limit`.
    pub async fn questions(
        &self,
        caller: &Caller,
        room_id: Uuid,
        before: Option<i64>,
        limit: u32,
    ) -> Result<QuestionPage, StoreError> {
        let mut conn = self.conn().await?;
        require_member(&mut conn, caller, room_id).await?;
        let mine = messages::room_id
            .eq(room_id)
            .and(messages::sender_id.eq(caller.identity_id))
            .and(messages::ask.eq(true));
        let mut query = messages::table
            .inner_join(identities::table)
            .filter(mine)
            .select((
                MessageRow::as_select(),
                identities::number,
                identities::kind,
            ))
            .order(messages::seq.desc())
            // One more than asked: whether another page follows.
            .limit(i64::from(limit) + 1)
            .into_boxed();
        if let Some(before) = before {
            query = query.filter(messages::seq.lt(before));
        }
        let mut rows: Vec<MessageWithSender> = query.load(&mut conn).await?;
        let more = rows.len() > limit as usize;
        rows.truncate(limit as usize);
        let questions: Vec<MessageEnvelope> =
            rows.into_iter().map(MessageWithSender::envelope).collect();
        let total: i64 = messages::table
            .filter(mine)
            .count()
            .get_result(&mut conn)
            .await?;
        Ok(QuestionPage {
            next_before: more.then(|| questions.last().map(|q| q.seq)).flatten(),
            questions,
            total,
        })
    }
}
