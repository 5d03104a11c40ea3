//! Messages, threads, the mailbox and socket signals.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{IdentityRef, Timestamp};
use crate::ids::IdentityNumber;

/// Plain text above this many UTF-8 bytes is refused with 413.
pub const MAX_TEXT_BYTES: usize = 64 * 1024;

/// The sealed-payload version clients write (it binds `ask`, `deadline` and
/// `replyTo`); version 1 still opens (`relayger_core::sealed::SealVersion`).
pub const SEALED_VERSION: u32 = 2;
/// HPKE (RFC 9180) Auth mode with these algorithms.
pub const SEALED_SUITE: &str = "DHKEM(X25519, HKDF-SHA256)/HKDF-SHA256/ChaCha20Poly1305";

/// An end-to-end sealed message: one HPKE ciphertext per current room member
/// (the sender included, so it can read its own copy). The server checks the
/// shape and the recipient set and stores it; it cannot read or forge it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SealedPayload {
    pub version: u32,
    pub suite: String,
    /// At most [`super::MAX_ROOM_MEMBERS`] entries, one per member.
    pub recipients: Vec<SealedRecipient>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SealedRecipient {
    pub identity_id: Uuid,
    /// Base64 of the HPKE encapsulated key (32 bytes for X25519).
    pub enc: String,
    /// Base64 of the AEAD ciphertext (with its 16-byte tag).
    pub ciphertext: String,
}

/// `POST /v1/messages`. Exactly one of `to` (a contact's number: their
/// direct room) or `roomId`, and exactly one of `text` or `sealed`. A client
/// may choose `messageId` (a UUID it generated) — sealed messages must, since
/// the id is bound into the ciphertext. A message id is unique within its
/// room: resending the same id to the same room with the same content
/// returns the stored message instead of a duplicate (200), other content
/// is 409; an id used in another room is no concern of this one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SendRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<IdentityNumber>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub room_id: Option<Uuid>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<Uuid>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sealed: Option<SealedPayload>,
    #[serde(default)]
    pub ask: bool,
    /// Only with `ask`; RFC 3339 UTC with `Z`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<Uuid>,
}

/// A message as every reader sees it. `conversationId` is the room id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct MessageEnvelope {
    pub conversation_id: Uuid,
    pub message_id: Uuid,
    pub seq: i64,
    pub sender: IdentityRef,
    /// Null for a sealed message (`--compact` drops nulls).
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sealed: Option<SealedPayload>,
    pub ask: bool,
    #[serde(default)]
    pub deadline: Option<Timestamp>,
    #[serde(default)]
    pub reply_to: Option<Uuid>,
    /// Written by a runtime (a worker's reply).
    pub by_runtime: bool,
    pub created_at: Timestamp,
}

/// `GET …/thread`: the root and its reply chain in room-seq order. `next` is
/// the last returned seq when more follow (pass it as `after`), else null.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ThreadResponse {
    pub messages: Vec<MessageEnvelope>,
    pub next: Option<i64>,
}

/// `GET /v1/rooms/{room}/messages[?after=SEQ&before=SEQ&limit=N]`: one
/// page of a room's history, oldest first (`relayger_core::history`).
/// `next` is the page's last seq when newer messages exist (give it as
/// `after`), `prev` its first seq when older ones exist (give it as
/// `before`); null otherwise.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct HistoryPage {
    pub messages: Vec<MessageEnvelope>,
    pub next: Option<i64>,
    pub prev: Option<i64>,
}

/// `GET /v1/inbox[?limit=N&after=ROOM]`: per room (in room-id order), the
/// oldest messages after the identity's ACK cursor, within one page's
/// budget (`relayger_core::inbox_budget`). `next`, when present, is the
/// `after` that continues with the rooms this page did not reach; a room
/// cut short shows the rest once its messages are acknowledged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct InboxResponse {
    pub rooms: Vec<InboxRoom>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<Uuid>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct InboxRoom {
    pub room_id: Uuid,
    pub acked_seq: i64,
    pub last_seq: i64,
    /// The oldest unacknowledged messages, at most 100 per room (fewer
    /// when the page's budget ran out).
    pub messages: Vec<MessageEnvelope>,
}

/// `POST /v1/rooms/{room}/ack`: everything up to `seq` has been seen. The
/// cursor never moves backwards; seq beyond the room's last is refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AckRequest {
    pub seq: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct AckResponse {
    pub room_id: Uuid,
    pub acked_seq: i64,
}

/// A WebSocket text frame: content-free, it only says "look again".
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum SocketSignal {
    /// Something arrived in a room the identity can read, or a contact
    /// request came in.
    InboxChanged,
    /// One of the identity's runtimes changed (a job claimed, finished,
    /// heartbeated, released or retried; a new configuration). Only on a
    /// socket opened with `?runtimeChanges=true`; a worker never asks.
    RuntimeChanged,
    /// What became of one of the identity's questions changed: a recipient's
    /// job was claimed, ended, retried, released or canceled. Read the
    /// question's [`Delivery`] again.
    DeliveryChanged,
}

/// Where a question stands for one recipient (or, summed up, for all):
/// `relayger_core::delivery` makes it from the recipients' jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum DeliveryState {
    /// Nobody holds it yet (or a lease ran out and it waits for another).
    Queued,
    /// A runtime holds a lease on it: a handler may be running.
    Working,
    /// The recipient replied to it (`replyMessageId`).
    Answered,
    /// Every attempt failed: a dead letter.
    Failed,
    /// Not answered on purpose (`reason`): the recipient's policy, a
    /// passed deadline, the handler's skip.
    Rejected,
    /// The asker canceled it before it was answered.
    Canceled,
}

/// One recipient of a question: another member of its room.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct RecipientDelivery {
    pub identity_id: Uuid,
    pub number: IdentityNumber,
    pub state: DeliveryState,
    /// A snake_case code when the state has one (`rejected`, `failed`):
    /// never the handler's text or the recipient's policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Leases granted on it across the recipient's runtimes.
    pub attempts: u32,
    /// The recipient's first reply, when `answered`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_message_id: Option<Uuid>,
    /// The recipient's runtimes that will consider (or considered) the
    /// message: 0 when nobody is listening yet.
    pub listeners: u32,
}

/// `GET /v1/rooms/{room}/messages/{message}/delivery` (and the answer of
/// `DELETE …/ask`): what became of a question, for every other member of
/// its room. `state` sums the recipients up (the most advanced wins).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Delivery {
    pub conversation_id: Uuid,
    pub message_id: Uuid,
    pub state: DeliveryState,
    /// True once the asker canceled the question.
    pub canceled: bool,
    pub recipients: Vec<RecipientDelivery>,
    /// The latest change: the question, a job's, a reply's or the cancel.
    pub updated_at: Timestamp,
}
