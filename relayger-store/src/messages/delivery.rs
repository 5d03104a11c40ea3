//! What became of a question (`read.sql`, judged by relayger-core's
//! `delivery`) and its asker's cancel (`lock_runtimes.sql`, `cancel.sql`).

use diesel::prelude::*;
use diesel::sql_types::{Array, BigInt, Bool, Integer, Jsonb, Nullable, Text, Timestamptz};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use relayger_core::ErrorCode;
use relayger_core::delivery::{self, JobRecord, RecipientFacts, RuntimeRecord};
use relayger_core::ids::IdentityNumber;
use relayger_core::job::JobState;
use relayger_core::policy::{MessageFacts, Policy};
use relayger_core::wire::{Delivery, RecipientDelivery, Timestamp};
use time::OffsetDateTime;
use uuid::Uuid;

use super::NO_SUCH_MESSAGE;
use crate::rooms::require_member;
use crate::schema::messages;
use crate::{Caller, Store, StoreError};

const READ: &str = include_str!("delivery/read.sql");
const LOCK_RUNTIMES: &str = include_str!("delivery/lock_runtimes.sql");
const CANCEL: &str = include_str!("delivery/cancel.sql");

/// One row of `read.sql`: a recipient and one of its runtimes (or none).
#[derive(QueryableByName)]
struct DeliveryRow {
    #[diesel(sql_type = BigInt)]
    seq: i64,
    #[diesel(sql_type = Bool)]
    ask: bool,
    #[diesel(sql_type = Bool)]
    by_runtime: bool,
    #[diesel(sql_type = Timestamptz)]
    asked_at: OffsetDateTime,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    canceled_at: Option<OffsetDateTime>,
    #[diesel(sql_type = Nullable<diesel::sql_types::Uuid>)]
    identity_id: Option<Uuid>,
    #[diesel(sql_type = Nullable<Text>)]
    number: Option<String>,
    #[diesel(sql_type = Nullable<diesel::sql_types::Uuid>)]
    reply_id: Option<Uuid>,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    replied_at: Option<OffsetDateTime>,
    #[diesel(sql_type = Nullable<diesel::sql_types::Uuid>)]
    runtime_id: Option<Uuid>,
    #[diesel(sql_type = Nullable<Jsonb>)]
    policy: Option<serde_json::Value>,
    #[diesel(sql_type = BigInt)]
    checkpoint: i64,
    #[diesel(sql_type = Nullable<Text>)]
    job_state: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    job_reason: Option<String>,
    #[diesel(sql_type = Nullable<Integer>)]
    job_attempts: Option<i32>,
    #[diesel(sql_type = Bool)]
    lease_live: bool,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    job_updated_at: Option<OffsetDateTime>,
}

impl DeliveryRow {
    /// The runtime's record of the message; `None` for a recipient's row
    /// without a runtime.
    fn runtime_record(&self) -> Result<Option<RuntimeRecord<'_>>, StoreError> {
        if self.runtime_id.is_none() {
            return Ok(None);
        }
        if let Some(state) = &self.job_state {
            let state = JobState::parse(state)
                .ok_or_else(|| StoreError::corrupt("a job's state", state))?;
            let attempts = self.job_attempts.unwrap_or(0);
            return Ok(Some(RuntimeRecord::Job(JobRecord {
                state,
                reason: self.job_reason.as_deref(),
                lease_live: self.lease_live,
                attempts: u32::try_from(attempts)
                    .map_err(|_| StoreError::corrupt("a job's attempts", attempts))?,
            })));
        }
        let policy: Policy = match &self.policy {
            Some(policy) => serde_json::from_value(policy.clone())
                .map_err(|e| StoreError::corrupt("a runtime's policy", e.to_string()))?,
            None => {
                return Ok(Some(RuntimeRecord::NoJob {
                    will_consider: false,
                }));
            }
        };
        // A recipient is never the sender, so the message is not its own.
        let triggered = policy.triggers_on(&MessageFacts {
            from_self: false,
            ask: self.ask,
            by_runtime: self.by_runtime,
        });
        Ok(Some(RuntimeRecord::NoJob {
            will_consider: triggered && self.checkpoint < self.seq,
        }))
    }
}

/// The delivery `read.sql`'s rows make: one recipient per identity, in the
/// order read. No row: no such message.
fn delivery_of(
    room_id: Uuid,
    message_id: Uuid,
    rows: &[DeliveryRow],
) -> Result<Delivery, StoreError> {
    let head = rows
        .first()
        .ok_or_else(|| StoreError::not_found(NO_SUCH_MESSAGE))?;
    let mut updated_at = head.asked_at;
    let mut later = |at: Option<OffsetDateTime>| {
        if let Some(at) = at {
            updated_at = updated_at.max(at);
        }
    };
    later(head.canceled_at);
    let canceled = head.canceled_at.is_some();
    let mut recipients = Vec::new();
    for group in rows.chunk_by(|a, b| a.identity_id == b.identity_id) {
        let first = &group[0];
        let (Some(identity_id), Some(number)) = (first.identity_id, &first.number) else {
            // The message's own row: nobody else is in the room.
            continue;
        };
        let mut runtimes = Vec::with_capacity(group.len());
        for row in group {
            runtimes.extend(row.runtime_record()?);
            later(row.job_updated_at);
        }
        later(first.replied_at);
        let view = delivery::recipient(&RecipientFacts {
            reply: first.reply_id,
            canceled,
            runtimes,
        });
        recipients.push(RecipientDelivery {
            identity_id,
            number: IdentityNumber::parse(number)
                .map_err(|_| StoreError::corrupt("an identity's number", number))?,
            state: view.state,
            reason: view.reason.map(str::to_owned),
            attempts: view.attempts,
            reply_message_id: view.reply,
            listeners: view.listeners,
        });
    }
    let states: Vec<_> = recipients.iter().map(|r| r.state).collect();
    Ok(Delivery {
        conversation_id: room_id,
        message_id,
        state: delivery::summary(&states, canceled),
        canceled,
        recipients,
        updated_at: Timestamp(updated_at),
    })
}

/// The message's sender and whether it is a question; `None`: no such
/// message in the room.
async fn question_of(
    conn: &mut AsyncPgConnection,
    room_id: Uuid,
    message_id: Uuid,
) -> Result<Option<(Uuid, bool)>, StoreError> {
    Ok(messages::table
        .filter(messages::room_id.eq(room_id))
        .filter(messages::id.eq(message_id))
        .select((messages::sender_id, messages::ask))
        .first(conn)
        .await
        .optional()?)
}

async fn read_delivery(
    conn: &mut AsyncPgConnection,
    room_id: Uuid,
    message_id: Uuid,
) -> Result<Delivery, StoreError> {
    let rows: Vec<DeliveryRow> = diesel::sql_query(READ)
        .bind::<diesel::sql_types::Uuid, _>(room_id)
        .bind::<diesel::sql_types::Uuid, _>(message_id)
        .load(conn)
        .await?;
    delivery_of(room_id, message_id, &rows)
}

impl Store {
    /// What became of a message of a room the caller is in (and its token
    /// may see), for each other member.
    pub async fn delivery(
        &self,
        caller: &Caller,
        room_id: Uuid,
        message_id: Uuid,
    ) -> Result<Delivery, StoreError> {
        let mut conn = self.conn().await?;
        require_member(&mut conn, caller, room_id).await?;
        read_delivery(&mut conn, room_id, message_id).await
    }

    /// The asker cancels its question: every job of it not yet ended ends
    /// `canceled` (a pending one is never claimed; a claimed one's holder
    /// is refused at its next heartbeat or finish), and a job made of it
    /// later is skipped `canceled` by its claim. Only the sender may cancel,
    /// and only a question; a second cancel changes nothing. Answers the
    /// delivery after the cancel.
    pub async fn cancel_question(
        &self,
        caller: &Caller,
        room_id: Uuid,
        message_id: Uuid,
    ) -> Result<Delivery, StoreError> {
        self.write_and_wake(async move |conn, wakes| {
            require_member(conn, caller, room_id).await?;
            let (sender, ask) = question_of(conn, room_id, message_id)
                .await?
                .ok_or_else(|| StoreError::not_found(NO_SUCH_MESSAGE))?;
            if sender != caller.identity_id {
                return Err(StoreError::forbidden(
                    "only the question's sender may cancel it",
                ));
            }
            if !ask {
                return Err(StoreError::rejected(
                    ErrorCode::UnprocessableEntity,
                    "this message is not a question (sent without ask)",
                ));
            }
            let runtimes: Vec<LockedRuntime> = diesel::sql_query(LOCK_RUNTIMES)
                .bind::<diesel::sql_types::Uuid, _>(room_id)
                .bind::<diesel::sql_types::Uuid, _>(sender)
                .load(conn)
                .await?;
            let ids: Vec<Uuid> = runtimes.into_iter().map(|r| r.id).collect();
            let canceled: Canceled = diesel::sql_query(CANCEL)
                .bind::<diesel::sql_types::Uuid, _>(room_id)
                .bind::<diesel::sql_types::Uuid, _>(message_id)
                .bind::<diesel::sql_types::Uuid, _>(sender)
                .bind::<Array<diesel::sql_types::Uuid>, _>(&ids)
                .get_result(conn)
                .await?;
            // A first cancel changes the delivery even when no job ended
            // (no runtime had taken the question yet): the asker's other
            // listeners (a socket, an A2A stream) look again.
            if canceled.recorded || canceled.ended > 0 {
                wakes.add_askers(&[sender]);
            }
            read_delivery(conn, room_id, message_id).await
        })
        .await
    }
}

/// What `cancel.sql` changed.
#[derive(QueryableByName)]
struct Canceled {
    #[diesel(sql_type = Bool)]
    recorded: bool,
    #[diesel(sql_type = BigInt)]
    ended: i64,
}

#[derive(QueryableByName)]
struct LockedRuntime {
    #[diesel(sql_type = diesel::sql_types::Uuid, column_name = id)]
    id: Uuid,
}
