//! Messages: sending (gapless per-room seqs under the room row lock, `send`),
//! reading one message, threads (`thread`), and the mailbox (inbox + ACK
//! cursor, `inbox`), the questions an identity asked in a room (`questions`);
//! the statement texts are in `sql`.

mod delivery;
mod history;
mod inbox;
mod questions;
mod send;
mod sql;
mod thread;
#[cfg(test)]
mod thread_tests;

use diesel::prelude::*;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use relayger_core::ids::IdentityNumber;
use relayger_core::wire::{IdentityKind, IdentityRef, MessageEnvelope, SealedPayload, Timestamp};
use time::OffsetDateTime;
use uuid::Uuid;

pub use questions::QuestionPage;

use crate::rooms::require_member;
use crate::schema::{identities, messages};
use crate::{Caller, Store, StoreError};

/// Also the answer for a message in a room the caller cannot see.
const NO_SUCH_MESSAGE: &str = "no such message in this room";

/// What to send, already validated at the boundary.
#[derive(Debug, Clone)]
pub struct NewMessage {
    pub to: Option<IdentityNumber>,
    pub room_id: Option<Uuid>,
    pub message_id: Option<Uuid>,
    pub body: MessageBody,
    pub ask: bool,
    pub deadline: Option<OffsetDateTime>,
    pub reply_to: Option<Uuid>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum MessageBody {
    Text(String),
    Sealed(SealedPayload),
}

/// Checks a sealed payload against the room's current members (done inside
/// the sending transaction, so membership cannot change underneath).
pub type SealedValidator = fn(&SealedPayload, &[Uuid]) -> Result<(), String>;

#[derive(Debug, Clone, Queryable, Selectable, QueryableByName)]
#[diesel(table_name = messages)]
pub(crate) struct MessageRow {
    id: Uuid,
    room_id: Uuid,
    seq: i64,
    sender_id: Uuid,
    text: Option<String>,
    sealed: Option<serde_json::Value>,
    ask: bool,
    deadline: Option<OffsetDateTime>,
    reply_to: Option<Uuid>,
    by_runtime: bool,
    created_at: OffsetDateTime,
}

#[derive(Debug, Clone, Queryable, QueryableByName)]
pub(crate) struct MessageWithSender {
    #[diesel(embed)]
    message: MessageRow,
    #[diesel(sql_type = diesel::sql_types::Text, column_name = number)]
    sender_number: String,
    #[diesel(sql_type = diesel::sql_types::Text, column_name = kind)]
    sender_kind: String,
}

impl MessageWithSender {
    pub(crate) fn sender_id(&self) -> Uuid {
        self.message.sender_id
    }

    pub(crate) fn envelope(self) -> MessageEnvelope {
        let m = self.message;
        MessageEnvelope {
            conversation_id: m.room_id,
            message_id: m.id,
            seq: m.seq,
            sender: IdentityRef {
                id: m.sender_id,
                number: IdentityNumber::parse(&self.sender_number)
                    .expect("identities.number is checked by the schema"),
                kind: IdentityKind::parse(&self.sender_kind).unwrap_or(IdentityKind::Person),
            },
            text: m.text,
            sealed: m.sealed.and_then(|v| serde_json::from_value(v).ok()),
            ask: m.ask,
            deadline: m.deadline.map(Timestamp),
            reply_to: m.reply_to,
            by_runtime: m.by_runtime,
            created_at: Timestamp(m.created_at),
        }
    }
}

pub(crate) async fn load_envelope(
    conn: &mut AsyncPgConnection,
    room_id: Uuid,
    message_id: Uuid,
) -> Result<Option<MessageEnvelope>, StoreError> {
    let row: Option<MessageWithSender> = messages::table
        .inner_join(identities::table)
        .filter(messages::room_id.eq(room_id))
        .filter(messages::id.eq(message_id))
        .select((
            MessageRow::as_select(),
            identities::number,
            identities::kind,
        ))
        .first(conn)
        .await
        .optional()?;
    Ok(row.map(MessageWithSender::envelope))
}

impl Store {
    /// One message of a room the caller is in.
    pub async fn message(
        &self,
        caller: &Caller,
        room_id: Uuid,
        message_id: Uuid,
    ) -> Result<MessageEnvelope, StoreError> {
        let mut conn = self.conn().await?;
        require_member(&mut conn, caller, room_id).await?;
        load_envelope(&mut conn, room_id, message_id)
            .await?
            .ok_or_else(|| StoreError::not_found(NO_SUCH_MESSAGE))
    }
}
