//! The statements of the finish path and the rows they return.

use diesel::QueryableByName;
use diesel::sql_types::{Array, BigInt, Bool, Jsonb, Nullable, Text, Timestamptz, Uuid as SqlUuid};
use uuid::Uuid;

pub(super) use super::super::statements::{
    DIAGNOSE, FENCE_COMPLETE, FENCE_FAIL, FINISH_BATCH, INSERT_REPLY, LOCK_ROOM, RECORD_END,
};

/// The constraint name of the error `relayger_members_changed()` raises
/// (a migration defines it).
pub(super) const MEMBERS_CHANGED: &str = "relayger_members_changed";

#[derive(QueryableByName)]
pub(super) struct Fenced {
    #[diesel(sql_type = SqlUuid)]
    pub(super) room_id: Uuid,
    #[diesel(sql_type = SqlUuid)]
    pub(super) message_id: Uuid,
    #[diesel(sql_type = diesel::sql_types::Integer)]
    pub(super) attempts: i32,
    #[diesel(sql_type = Jsonb)]
    pub(super) policy: serde_json::Value,
    /// The question's sender.
    #[diesel(sql_type = SqlUuid)]
    pub(super) asker: Uuid,
}

#[derive(QueryableByName)]
pub(super) struct Diagnosis {
    #[diesel(sql_type = Bool)]
    pub(super) owned: bool,
    #[diesel(sql_type = Nullable<SqlUuid>)]
    pub(super) message_id: Option<Uuid>,
    #[diesel(sql_type = Nullable<SqlUuid>)]
    pub(super) room_id: Option<Uuid>,
    #[diesel(sql_type = Nullable<Text>)]
    pub(super) state: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    pub(super) reason: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    pub(super) lease_owner: Option<String>,
    #[diesel(sql_type = Nullable<BigInt>)]
    pub(super) lease_version: Option<i64>,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    pub(super) lease_expires_at: Option<time::OffsetDateTime>,
    #[diesel(sql_type = Timestamptz)]
    pub(super) judged_at: time::OffsetDateTime,
    #[diesel(sql_type = Bool)]
    pub(super) member: bool,
    #[diesel(sql_type = Nullable<Text>)]
    pub(super) completed_fingerprint: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    pub(super) completed_outcome: Option<String>,
    #[diesel(sql_type = Nullable<SqlUuid>)]
    pub(super) completed_reply: Option<Uuid>,
    /// The lease version the job was completed under.
    #[diesel(sql_type = Nullable<BigInt>)]
    pub(super) completed_version: Option<i64>,
    #[diesel(sql_type = Nullable<Text>)]
    pub(super) attempt_fingerprint: Option<String>,
    #[diesel(sql_type = Nullable<Jsonb>)]
    pub(super) attempt_response: Option<serde_json::Value>,
}

#[derive(QueryableByName)]
pub(super) struct Wake {
    #[diesel(sql_type = Array<SqlUuid>)]
    pub(super) wake: Vec<Uuid>,
}

#[derive(QueryableByName)]
pub(super) struct FinishedBatch {
    /// The jobs whose fence matched.
    #[diesel(sql_type = Array<SqlUuid>)]
    pub(super) fenced: Vec<Uuid>,
    #[diesel(sql_type = Array<SqlUuid>)]
    pub(super) wake: Vec<Uuid>,
    /// The senders of the finished jobs' messages: their delivery changed.
    #[diesel(sql_type = Array<SqlUuid>)]
    pub(super) askers: Vec<Uuid>,
}
