//! Sending: the one-statement text send, and the transaction under the
//! room row lock for sealed messages and whatever that statement declines.

use diesel::prelude::*;
use diesel::sql_types::{Nullable, Text, Uuid as SqlUuid};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use relayger_core::ids::IdentityNumber;
use relayger_core::wire::MessageEnvelope;
use time::OffsetDateTime;
use uuid::Uuid;

use super::sql::SEND_TEXT;
use super::{MessageBody, MessageWithSender, NewMessage, SealedValidator, load_envelope};
use crate::identities::identity_by_number;
use crate::prepared::CachedExt;
use crate::rooms::{member_ids, require_member};
use crate::schema::{contacts, messages, rooms};
use crate::wake::Wakes;
use crate::{Caller, Store, StoreError};

/// The direct room `me` shares with the contact `number`.
pub(super) async fn direct_room(
    conn: &mut AsyncPgConnection,
    me: Uuid,
    number: &IdentityNumber,
) -> Result<Uuid, StoreError> {
    let other = identity_by_number(conn, number).await?;
    let (low, high) = if me < other.id {
        (me, other.id)
    } else {
        (other.id, me)
    };
    contacts::table
        .filter(contacts::identity_a.eq(low))
        .filter(contacts::identity_b.eq(high))
        .filter(contacts::state.eq("active"))
        .select(contacts::room_id)
        .first(conn)
        .await
        .optional()?
        .ok_or_else(|| StoreError::not_found(format!("{number} is not your contact")))
}

/// Whether a stored message is the same send as a retried request.
fn same_send(existing: &MessageEnvelope, sender: Uuid, room_id: Uuid, new: &NewMessage) -> bool {
    let body_matches = match &new.body {
        MessageBody::Text(text) => existing.text.as_deref() == Some(text.as_str()),
        MessageBody::Sealed(sealed) => existing.sealed.as_ref() == Some(sealed),
    };
    existing.sender.id == sender
        && existing.conversation_id == room_id
        && body_matches
        && existing.ask == new.ask
        && existing.deadline.map(|t| t.0) == new.deadline
        && existing.reply_to == new.reply_to
}

/// A message row about to be written; the caller holds the room row lock
/// and passes `seq = last_seq + 1`.
pub(crate) struct InsertMessage {
    pub(crate) id: Uuid,
    pub(crate) room_id: Uuid,
    pub(crate) seq: i64,
    pub(crate) sender_id: Uuid,
    pub(crate) text: Option<String>,
    pub(crate) sealed: Option<serde_json::Value>,
    pub(crate) ask: bool,
    pub(crate) deadline: Option<OffsetDateTime>,
    pub(crate) reply_to: Option<Uuid>,
    /// Set for a runtime's reply (`byRuntime`).
    pub(crate) runtime_id: Option<Uuid>,
}

/// Writes a message, bumps the room's last seq and marks the room changed
/// for the other members' runtimes in the caller's transaction; gathers the
/// other members in `wakes` (woken once the transaction commits).
pub(crate) async fn insert_message(
    conn: &mut AsyncPgConnection,
    message: InsertMessage,
    members: &[Uuid],
    wakes: &mut Wakes,
) -> Result<MessageEnvelope, StoreError> {
    diesel::update(rooms::table.find(message.room_id))
        .set(rooms::last_seq.eq(message.seq))
        .cached()
        .execute(conn)
        .await?;
    diesel::insert_into(messages::table)
        .values((
            messages::id.eq(message.id),
            messages::room_id.eq(message.room_id),
            messages::seq.eq(message.seq),
            messages::sender_id.eq(message.sender_id),
            messages::text.eq(message.text),
            messages::sealed.eq(message.sealed),
            messages::ask.eq(message.ask),
            messages::deadline.eq(message.deadline),
            messages::reply_to.eq(message.reply_to),
            messages::by_runtime.eq(message.runtime_id.is_some()),
            messages::runtime_id.eq(message.runtime_id),
        ))
        .execute(conn)
        .await?;
    let others: Vec<Uuid> = members
        .iter()
        .copied()
        .filter(|id| *id != message.sender_id)
        .collect();
    wakes.add(&others);
    crate::runtime::scan::mark_rooms_changed(conn, &others, &[message.room_id]).await?;
    load_envelope(conn, message.room_id, message.id)
        .await?
        .ok_or_else(|| StoreError::not_found("message vanished"))
}

#[derive(QueryableByName)]
struct SentText {
    #[diesel(embed)]
    message: MessageWithSender,
    #[diesel(sql_type = diesel::sql_types::Array<SqlUuid>)]
    wake: Vec<Uuid>,
}

/// [`SEND_TEXT`]; `None` when the locked path must answer.
async fn send_text(
    conn: &mut AsyncPgConnection,
    me: Uuid,
    room_id: Uuid,
    message_id: Uuid,
    text: &str,
    new: &NewMessage,
) -> Result<Option<(MessageEnvelope, Vec<Uuid>)>, StoreError> {
    use diesel::result::{DatabaseErrorKind, Error};
    use diesel::sql_types::{Bool, Timestamptz};
    let sent = diesel::sql_query(SEND_TEXT)
        .bind::<SqlUuid, _>(room_id)
        .bind::<SqlUuid, _>(me)
        .bind::<SqlUuid, _>(message_id)
        .bind::<Text, _>(text)
        .bind::<Bool, _>(new.ask)
        .bind::<Nullable<Timestamptz>, _>(new.deadline)
        .bind::<Nullable<SqlUuid>, _>(new.reply_to)
        .cached()
        .get_result::<SentText>(conn)
        .await;
    match sent {
        Ok(sent) => Ok(Some((sent.message.envelope(), sent.wake))),
        Err(Error::NotFound) => Ok(None),
        // The same id sent concurrently: the statement rolled back whole.
        Err(Error::DatabaseError(DatabaseErrorKind::UniqueViolation, _)) => Ok(None),
        Err(err) => Err(err.into()),
    }
}

impl Store {
    /// Sends a message. Returns the envelope and whether it was newly
    /// created (false for an identical retry of the same message id).
    ///
    /// A text message goes in one statement ([`SEND_TEXT`], autocommit);
    /// a sealed one (checked against the members) and every case that
    /// statement declines take the transaction under the room row lock.
    pub async fn send_message(
        &self,
        caller: &Caller,
        mut new: NewMessage,
        validate_sealed: SealedValidator,
    ) -> Result<(MessageEnvelope, bool), StoreError> {
        let mut conn = self.conn().await?;
        let caller = caller.clone();
        let me = caller.identity_id;
        let room_id = match (&new.to, new.room_id) {
            (Some(number), None) => direct_room(&mut conn, me, number).await?,
            (None, Some(room_id)) => room_id,
            _ => return Err(StoreError::invalid("give exactly one of `to` or `roomId`")),
        };
        if let MessageBody::Text(text) = &new.body
            && caller.may_see_room(room_id)
        {
            let message_id = new.message_id.unwrap_or_else(Uuid::now_v7);
            let sent = conn
                .statement(async |conn| send_text(conn, me, room_id, message_id, text, &new).await)
                .await?;
            if let Some((envelope, wake)) = sent {
                let mut wakes = Wakes::default();
                wakes.add(&wake);
                self.publish_wakes(wakes);
                return Ok((envelope, true));
            }
            // The locked path uses the same id: a retry stays a retry.
            new.message_id = Some(message_id);
        }
        let mut wakes = Wakes::default();
        let sent = conn
            .transaction(async |conn| -> Result<_, StoreError> {
                require_member(conn, &caller, room_id).await?;
                // The room row lock orders every insert into this room: seqs
                // are assigned and committed one after another, gapless.
                let last_seq: i64 = rooms::table
                    .find(room_id)
                    .select(rooms::last_seq)
                    .for_no_key_update()
                    .first(conn)
                    .await?;
                // A message id is unique within its room, and only this
                // room is looked at: whether the id is used in a room the
                // caller cannot see changes nothing in the answer.
                if let Some(message_id) = new.message_id
                    && let Some(envelope) = load_envelope(conn, room_id, message_id).await?
                {
                    return if same_send(&envelope, me, room_id, &new) {
                        Ok((envelope, false))
                    } else {
                        Err(StoreError::conflict(format!(
                            "message id {message_id} is already used by a different message in this room"
                        )))
                    };
                }
                if let Some(parent) = new.reply_to {
                    let found: i64 = messages::table
                        .filter(messages::room_id.eq(room_id))
                        .filter(messages::id.eq(parent))
                        .count()
                        .get_result(conn)
                        .await?;
                    if found == 0 {
                        return Err(StoreError::not_found(format!(
                            "replyTo {parent} is not a message in this room"
                        )));
                    }
                }
                let members = member_ids(conn, room_id).await?;
                let (text, sealed) = match &new.body {
                    MessageBody::Text(text) => (Some(text.clone()), None),
                    MessageBody::Sealed(payload) => {
                        validate_sealed(payload, &members).map_err(StoreError::invalid)?;
                        let value = serde_json::to_value(payload)
                            .map_err(|e| StoreError::invalid(e.to_string()))?;
                        (None, Some(value))
                    }
                };
                let message_id = new.message_id.unwrap_or_else(Uuid::now_v7);
                let envelope = insert_message(
                    conn,
                    InsertMessage {
                        id: message_id,
                        room_id,
                        seq: last_seq + 1,
                        sender_id: me,
                        text,
                        sealed,
                        ask: new.ask,
                        deadline: new.deadline,
                        reply_to: new.reply_to,
                        runtime_id: None,
                    },
                    &members,
                    &mut wakes,
                )
                .await?;
                Ok((envelope, true))
            })
            .await?;
        self.publish_wakes(wakes);
        Ok(sent)
    }
}
