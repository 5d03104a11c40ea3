//! Lease upkeep: heartbeats and releases (the expiry of abandoned leases is
//! the claim's: `claim/expiry.rs`).
//!
//! Every lease write checks job, owner, version and `lease_expires_at >
//! now()` in the same statement ([`lease_fence`]), and every lease time is
//! the database's clock.

use diesel::prelude::*;
use diesel::sql_types::{Nullable, Timestamptz};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use relayger_core::ErrorCode;
use relayger_core::job::{JobEvent, JobState, next_state, retry_backoff_ms};
use relayger_core::lease::{LeaseOwner, LeaseVersion};
use relayger_core::wire::{HeartbeatResponse, Timestamp};
use serde_json::json;
use time::OffsetDateTime;
use uuid::Uuid;

use super::{log, owned_runtime};
use crate::schema::{attempts, jobs};
use crate::{Caller, Store, StoreError};

pub(crate) fn lease_interval(
    lease_ms: u64,
) -> diesel::expression::SqlLiteral<Nullable<Timestamptz>> {
    // lease_ms is a validated integer: safe to format into SQL.
    diesel::dsl::sql::<Nullable<Timestamptz>>(&format!(
        "now() + interval '{lease_ms} milliseconds'"
    ))
}

/// The state a claimed job takes after `event` (a failure or an expired
/// lease) with `attempt_count` attempts made, and the backoff before it may
/// be claimed again (none for a dead letter).
pub(crate) fn after_attempt(
    event: JobEvent,
    attempt_count: u32,
    max_attempts: u32,
) -> Result<(JobState, Option<u64>), StoreError> {
    let state = next_state(JobState::Claimed, event, attempt_count, max_attempts)
        .map_err(|e| StoreError::rejected(ErrorCode::Internal, e.to_string()))?;
    let backoff = (state == JobState::Pending).then(|| retry_backoff_ms(attempt_count));
    Ok((state, backoff))
}

/// After a failed attempt: pending with backoff, or dead (`job::next_state`).
/// Returns the time the job may be claimed again (None when dead).
pub(crate) async fn fail_job(
    conn: &mut AsyncPgConnection,
    job_id: Uuid,
    attempt_count: u32,
    max_attempts: u32,
    reason: &str,
) -> Result<Option<OffsetDateTime>, StoreError> {
    let clear_lease = cleared_lease();
    let (state, backoff) = after_attempt(JobEvent::Fail, attempt_count, max_attempts)?;
    let Some(backoff) = backoff else {
        diesel::update(jobs::table.find(job_id))
            .set((
                jobs::state.eq(state.as_str()),
                jobs::reason.eq(reason),
                clear_lease,
            ))
            .execute(conn)
            .await?;
        return Ok(None);
    };
    let not_before: OffsetDateTime = diesel::update(jobs::table.find(job_id))
        .set((
            jobs::state.eq(state.as_str()),
            jobs::reason.eq(reason),
            jobs::not_before.eq(diesel::dsl::sql::<Nullable<Timestamptz>>(&format!(
                "now() + interval '{backoff} milliseconds'"
            ))),
            clear_lease,
        ))
        .returning(jobs::not_before.assume_not_null())
        .get_result(conn)
        .await?;
    Ok(Some(not_before))
}

impl Store {
    /// Renews a lease: only the expiry moves, never the version.
    pub async fn heartbeat(
        &self,
        caller: &Caller,
        runtime_id: Uuid,
        job_id: Uuid,
        owner: &LeaseOwner,
        version: LeaseVersion,
        lease_ms: u64,
    ) -> Result<HeartbeatResponse, StoreError> {
        let mut conn = self.conn().await?;
        owned_runtime(&mut conn, caller.identity_id, runtime_id, false).await?;
        let expires_at: Option<OffsetDateTime> = diesel::update(jobs::table.filter(lease_fence(
            job_id,
            runtime_id,
            owner,
            version_i64(version)?,
        )))
        .set(jobs::lease_expires_at.eq(lease_interval(lease_ms)))
        .returning(jobs::lease_expires_at.assume_not_null())
        .get_result(&mut conn)
        .await
        .optional()?;
        let expires_at = expires_at.ok_or_else(lease_lost)?;
        Ok(HeartbeatResponse {
            lease_ms,
            expires_at: Timestamp(expires_at),
        })
    }

    /// Gives a job back (a worker stopping): pending again at once; the
    /// attempt counts as unfinished and does not count towards maxAttempts;
    /// the budget unit is not refunded.
    pub async fn release(
        &self,
        caller: &Caller,
        runtime_id: Uuid,
        job_id: Uuid,
        owner: &LeaseOwner,
        version: LeaseVersion,
    ) -> Result<(), StoreError> {
        let mut conn = self.conn().await?;
        let owner = owner.clone();
        let agent_id = caller.identity_id;
        crate::metrics::count_when_committed(conn.transaction(
            async |conn| -> Result<_, StoreError> {
                owned_runtime(conn, agent_id, runtime_id, false).await?;
                let version = version_i64(version)?;
                let released = next_state(JobState::Claimed, JobEvent::Release, 0, 0)
                    .map_err(|e| StoreError::rejected(ErrorCode::Internal, e.to_string()))?;
                let released: Option<(String, Uuid, Uuid)> = diesel::update(
                    jobs::table.filter(lease_fence(job_id, runtime_id, &owner, version)),
                )
                .set((
                    jobs::state.eq(released.as_str()),
                    jobs::attempts.eq(jobs::attempts - 1),
                    jobs::not_before.eq(None::<OffsetDateTime>),
                    cleared_lease(),
                ))
                .returning((jobs::job_key, jobs::room_id, jobs::message_id))
                .get_result(conn)
                .await
                .optional()?;
                let (job_key, room_id, message_id) = released.ok_or_else(lease_lost)?;
                diesel::update(attempts::table.filter(attempts::lease_version.eq(version)))
                    .set(attempts::ended.eq("released"))
                    .execute(conn)
                    .await?;
                log(
                    conn,
                    runtime_id,
                    "released",
                    Some((&job_key, room_id, message_id)),
                    json!({}),
                )
                .await?;
                Ok(())
            },
        ))
        .await
    }
}

/// The columns that end a lease (state is set by the caller).
pub(crate) type ClearedLease = (
    diesel::dsl::Eq<jobs::lease_owner, Option<String>>,
    diesel::dsl::Eq<jobs::lease_version, Option<i64>>,
    diesel::dsl::Eq<jobs::lease_expires_at, Option<OffsetDateTime>>,
    diesel::dsl::Eq<jobs::updated_at, diesel::dsl::now>,
);

pub(crate) fn cleared_lease() -> ClearedLease {
    (
        jobs::lease_owner.eq(None::<String>),
        jobs::lease_version.eq(None::<i64>),
        jobs::lease_expires_at.eq(None::<OffsetDateTime>),
        jobs::updated_at.eq(diesel::dsl::now),
    )
}

/// The fence every lease write carries in its own statement: this job of
/// this runtime, claimed by this owner under this version, and not expired
/// by the database clock.
fn lease_fence(
    job_id: Uuid,
    runtime_id: Uuid,
    owner: &LeaseOwner,
    version: i64,
) -> Box<
    dyn BoxableExpression<jobs::table, diesel::pg::Pg, SqlType = Nullable<diesel::sql_types::Bool>>,
> {
    Box::new(
        jobs::id
            .eq(job_id)
            .and(jobs::runtime_id.eq(runtime_id))
            .and(jobs::state.eq(JobState::Claimed.as_str()))
            .and(jobs::lease_owner.eq(owner.as_str().to_owned()))
            .and(jobs::lease_version.eq(version))
            .and(jobs::lease_expires_at.gt(diesel::dsl::now)),
    )
}

pub(crate) fn lease_lost() -> StoreError {
    StoreError::rejected(
        ErrorCode::LeaseLost,
        "the lease has expired or belongs to another claim; the job may be with another worker",
    )
}

pub(crate) fn version_i64(version: LeaseVersion) -> Result<i64, StoreError> {
    i64::try_from(version.0).map_err(|_| lease_lost())
}
