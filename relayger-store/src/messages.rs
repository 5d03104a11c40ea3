//! Messages: sending (gapless per-room seqs under the room row lock), reading
//! one message, threads, and the mailbox (inbox + ACK cursor).

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Nullable, Text, Uuid as SqlUuid};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use relayger_core::ids::IdentityNumber;
use relayger_core::inbox_budget::{self, InboxBudget};
use relayger_core::wire::{
    IdentityKind, IdentityRef, InboxRoom, MessageEnvelope, SealedPayload, Timestamp,
};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::identities::identity_by_number;
use crate::prepared::CachedExt;
use crate::rooms::{NO_SUCH_ROOM, member_ids, require_member};
use crate::schema::{contacts, identities, mailbox_cursors, messages, rooms};
use crate::wake::Wakes;
use crate::{Caller, Store, StoreError};

/// Messages of one room read per query while an inbox page is filled.
const INBOX_CHUNK: i64 = 20;

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

/// The direct room `me` shares with the contact `number`.
async fn direct_room(
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

/// The CTEs after `room` (the room row and the `members_version` the
/// statement saw) of a statement that appends one message to room `$1` from
/// `$2`: `bumped` takes the next seq under the room lock unless the members
/// changed meanwhile, `others` are the members to wake; `inserted` follows.
/// Shared by the one-statement send and a finish's reply.
macro_rules! room_append_ctes {
    () => {
        "), bumped AS (
    UPDATE rooms SET last_seq = rooms.last_seq + 1
    FROM room WHERE rooms.id = room.id AND rooms.members_version = room.members_version
    RETURNING rooms.id, rooms.last_seq
), others AS (
    SELECT identity_id FROM room_members
    WHERE room_id = $1 AND left_at IS NULL AND identity_id <> $2
), inserted AS (
"
    };
}
pub(crate) use room_append_ctes;

/// The CTE that marks the room changed for the other members' runtimes,
/// after `inserted` and `others` of [`room_append_ctes`].
macro_rules! dirty_marks_cte {
    () => {
        "), marked AS (
    INSERT INTO runtime_dirty_rooms (runtime_id, room_id)
    SELECT rt.id, i.room_id FROM inserted i
    JOIN runtimes rt ON rt.agent_id IN (SELECT identity_id FROM others)
    ON CONFLICT DO NOTHING
"
    };
}
pub(crate) use dirty_marks_cte;

/// The one-statement send of a text message: checks membership, a fresh
/// message id and the parent, bumps `last_seq`, inserts the message and the
/// other members' runtimes' dirty marks, and returns the envelope and the
/// identities to wake. Its reads use the statement's snapshot, so it also
/// declines when the room's `members_version` moved while it waited for the
/// room lock (a join, or a runtime registered `--from now`, committed).
/// No row means "not this way" (not a member, an id already used, no such
/// parent, or that version check): the caller takes the locked path, which
/// gives the exact answer. Nothing is written then, so no seq is skipped.
const SEND_TEXT: &str = concat!(
    "WITH room AS (
    SELECT r.id, r.members_version FROM rooms r
    JOIN room_members m ON m.room_id = r.id AND m.identity_id = $2 AND m.left_at IS NULL
    WHERE r.id = $1
      AND NOT EXISTS (SELECT 1 FROM messages WHERE room_id = $1 AND id = $3)
      AND ($7::uuid IS NULL OR EXISTS (SELECT 1 FROM messages p WHERE p.room_id = $1 AND p.id = $7))
",
    room_append_ctes!(),
    "    INSERT INTO messages (id, room_id, seq, sender_id, text, ask, deadline, reply_to)
    SELECT $3, b.id, b.last_seq, $2, $4, $5, $6, $7 FROM bumped b
    RETURNING *
",
    dirty_marks_cte!(),
    ")
SELECT i.id, i.room_id, i.seq, i.sender_id, i.text, i.sealed, i.ask, i.deadline,
       i.reply_to, i.by_runtime, i.created_at, s.number, s.kind,
       ARRAY(SELECT identity_id FROM others) AS wake
FROM inserted i JOIN identities s ON s.id = i.sender_id"
);

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

/// The thread read: always one row of checks (`member`: the caller is a
/// current member; `found`: the message is in the room), carrying the page's
/// messages when both hold — the root of `$2`'s thread and the root's reply
/// chain after seq `$3`, at most `$4`, and none past the first whose content
/// takes the page over `$6` bytes. The page is read only when the checks
/// hold (its `WHERE` starts with them).
const THREAD: &str = "\
WITH RECURSIVE checks AS (
    SELECT EXISTS (SELECT 1 FROM room_members
                   WHERE room_id = $1 AND identity_id = $5 AND left_at IS NULL) AS member,
           EXISTS (SELECT 1 FROM messages WHERE room_id = $1 AND id = $2) AS found
), up AS (
    SELECT id, reply_to FROM messages WHERE room_id = $1 AND id = $2
    UNION ALL
    SELECT m.id, m.reply_to FROM up, LATERAL (
        SELECT id, reply_to FROM messages WHERE room_id = $1 AND id = up.reply_to OFFSET 0
    ) m
), root AS (SELECT id FROM up WHERE reply_to IS NULL LIMIT 1),
chain AS (
    SELECT id FROM root
    UNION ALL
    SELECT m.id FROM chain c, LATERAL (
        SELECT id FROM messages WHERE reply_to = c.id AND room_id = $1 OFFSET 0
    ) m
), candidates AS (
    SELECT m.id, m.seq FROM checks c, messages m
    WHERE c.member AND c.found
      AND m.room_id = $1 AND m.id IN (SELECT id FROM chain) AND m.seq > $3
    ORDER BY m.seq
    LIMIT $4
), sized AS (
    -- Content bytes, never more than the envelope's JSON: the text, or a
    -- sealed payload's base64 strings.
    SELECT k.id, k.seq,
           COALESCE(octet_length(m.text), 0) + COALESCE((
               SELECT sum(octet_length(r->>'enc') + octet_length(r->>'ciphertext'))
               FROM jsonb_array_elements(m.sealed->'recipients') r
           ), 0) AS own
    FROM candidates k JOIN messages m ON m.room_id = $1 AND m.id = k.id
), page AS (
    SELECT id, seq, own, sum(own) OVER (ORDER BY seq ROWS UNBOUNDED PRECEDING) AS upto
    FROM sized
)
SELECT c.member, c.found, p.* FROM checks c LEFT JOIN (
    SELECT m.id, m.room_id, m.seq, m.sender_id, m.text, m.sealed, m.ask, m.deadline,
           m.reply_to, m.by_runtime, m.created_at, i.number, i.kind
    FROM page g
    JOIN messages m ON m.room_id = $1 AND m.id = g.id
    JOIN identities i ON i.id = m.sender_id
    WHERE g.upto - g.own < $6
) p ON true
ORDER BY p.seq";

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
