//! The statements of the finish path and the rows they return.

use diesel::QueryableByName;
use diesel::sql_types::{Array, BigInt, Bool, Jsonb, Nullable, Text, Timestamptz, Uuid as SqlUuid};
use uuid::Uuid;

/// The fenced end of a completed job, the long way.
pub(super) const FENCE_COMPLETE: &str = include_str!("fence_complete.sql");

/// The fence for a failed attempt (the job stays claimed; its retry or dead
/// letter is written next by `fail_job`).
pub(super) const FENCE_FAIL: &str = include_str!("fence_fail.sql");

/// A whole finish of one completed job whose place this instance granted.
pub(super) const FINISH_IN_ONE: &str = include_str!("finish_in_one.sql");

/// The attempt's end, the log record and (without a reply) the completion.
pub(super) const RECORD_END: &str = include_str!("record_end.sql");

/// A reply with its completion under the room lock; raises
/// [`MEMBERS_CHANGED`] when the room's members changed meanwhile.
pub(super) const INSERT_REPLY: &str = include_str!("insert_reply.sql");

/// The constraint name of the error `relayger_members_changed()` raises
/// (a migration defines it).
pub(super) const MEMBERS_CHANGED: &str = "relayger_members_changed";

/// The reply room's lock, taken before the reply on a second try.
pub(super) const LOCK_ROOM: &str = include_str!("lock_room.sql");

/// Why a fence matched nothing, in one read.
pub(super) const DIAGNOSE: &str = include_str!("diagnose.sql");

#[derive(QueryableByName)]
pub(super) struct Fenced {
    #[diesel(sql_type = Text)]
    pub(super) job_key: String,
    #[diesel(sql_type = SqlUuid)]
    pub(super) room_id: Uuid,
    #[diesel(sql_type = SqlUuid)]
    pub(super) message_id: Uuid,
    #[diesel(sql_type = diesel::sql_types::Integer)]
    pub(super) attempts: i32,
    #[diesel(sql_type = Jsonb)]
    pub(super) policy: serde_json::Value,
}

#[derive(QueryableByName)]
pub(super) struct Diagnosis {
    #[diesel(sql_type = Bool)]
    pub(super) owned: bool,
    #[diesel(sql_type = Nullable<Text>)]
    pub(super) job_key: Option<String>,
    #[diesel(sql_type = Nullable<SqlUuid>)]
    pub(super) room_id: Option<Uuid>,
    #[diesel(sql_type = Nullable<Text>)]
    pub(super) state: Option<String>,
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
    #[diesel(sql_type = Nullable<Jsonb>)]
    pub(super) completed_outcome: Option<serde_json::Value>,
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
pub(super) struct FinishedInOne {
    #[diesel(sql_type = Bool)]
    pub(super) fenced: bool,
    #[diesel(sql_type = Array<SqlUuid>)]
    pub(super) wake: Vec<Uuid>,
}
