//! Lease upkeep: heartbeats and releases (the expiry of abandoned leases is
//! the claim's: `claim/expiry.rs`).
//!
//! Every lease write after a claim goes through the one fence,
//! `relayger_lease_fence` (a migration defines it; relayger-core's
//! `lease::LeaseFence` states the rule), in the statement that writes:
//! job, owner, version, and an expiry later than the database clock at the
//! moment the job row is locked. Every lease time is the database's clock.

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Nullable, Text, Timestamptz};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use relayger_core::ErrorCode;
use relayger_core::job::{JobEvent, JobState, RuntimeEvent, next_state, retry_backoff_ms};
use relayger_core::lease::{LeaseOwner, LeaseVersion};
use relayger_core::policy::SkipReason;
use relayger_core::wire::{HeartbeatResponse, Timestamp};
use serde_json::json;
use time::OffsetDateTime;
use uuid::Uuid;

use super::owned_runtime;
use crate::prepared::CachedExt;
use crate::schema::jobs;
use crate::wake::Wakes;
use crate::{Caller, Store, StoreError};

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

use super::statements::{HEARTBEAT, RELEASE};

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
        let lease_ms_sql = i64::try_from(lease_ms)
            .map_err(|_| StoreError::invalid("the lease length is out of range"))?;
        let renewed: Option<Renewed> = diesel::sql_query(HEARTBEAT)
            .bind::<diesel::sql_types::Uuid, _>(job_id) // $1 job_id
            .bind::<diesel::sql_types::Uuid, _>(runtime_id) // $2 runtime_id
            .bind::<Text, _>(owner.as_str()) // $3 owner
            .bind::<BigInt, _>(version_i64(version)?) // $4 version
            .bind::<BigInt, _>(lease_ms_sql) // $5 lease_ms
            .cached()
            .get_result(&mut conn)
            .await
            .optional()?;
        let Some(renewed) = renewed else {
            return Err(refused(&mut conn, runtime_id, job_id).await);
        };
        Ok(HeartbeatResponse {
            lease_ms,
            expires_at: Timestamp(renewed.lease_expires_at),
        })
    }

    /// Gives a job back (a worker stopping): pending again at once; the
    /// attempt counts as unfinished and does not count towards maxAttempts;
    /// the budget unit is not refunded. One statement.
    pub async fn release(
        &self,
        caller: &Caller,
        runtime_id: Uuid,
        job_id: Uuid,
        owner: &LeaseOwner,
        version: LeaseVersion,
    ) -> Result<(), StoreError> {
        let mut conn = self.conn().await?;
        owned_runtime(&mut conn, caller.identity_id, runtime_id, false).await?;
        let released = next_state(JobState::Claimed, JobEvent::Release, 0, 0)
            .map_err(|e| StoreError::rejected(ErrorCode::Internal, e.to_string()))?;
        let released: Option<Released> = diesel::sql_query(RELEASE)
            .bind::<diesel::sql_types::Uuid, _>(job_id) // $1 job_id
            .bind::<diesel::sql_types::Uuid, _>(runtime_id) // $2 runtime_id
            .bind::<Text, _>(owner.as_str()) // $3 owner
            .bind::<BigInt, _>(version_i64(version)?) // $4 version
            .bind::<Text, _>(released.as_str()) // $5 state
            .cached()
            .get_result(&mut conn)
            .await
            .optional()?;
        let Some(released) = released else {
            return Err(refused(&mut conn, runtime_id, job_id).await);
        };
        self.publish_wakes(Wakes::askers(vec![released.asker]));
        crate::metrics::runtime_event(RuntimeEvent::Released.as_str(), &json!({}), false);
        Ok(())
    }
}

#[derive(QueryableByName)]
struct Released {
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    asker: Uuid,
}

#[derive(QueryableByName)]
struct Renewed {
    #[diesel(sql_type = Timestamptz)]
    lease_expires_at: OffsetDateTime,
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

pub(crate) fn lease_lost() -> StoreError {
    StoreError::rejected(
        ErrorCode::LeaseLost,
        "the lease has expired or belongs to another claim; the job may be with another worker",
    )
}

/// The answer to a lease write on a job its asker canceled.
pub(crate) fn job_canceled() -> StoreError {
    StoreError::rejected(
        ErrorCode::JobCanceled,
        "the question was canceled by its asker; stop the handler, nothing of it is written",
    )
}

/// A job that ended because its asker canceled the question.
pub(crate) fn is_canceled(state: JobState, reason: Option<&str>) -> bool {
    state == JobState::Skipped && reason == Some(SkipReason::Canceled.as_str())
}

/// Why a heartbeat or release matched nothing: the job was canceled, or
/// the lease is lost.
async fn refused(conn: &mut AsyncPgConnection, runtime_id: Uuid, job_id: Uuid) -> StoreError {
    let found: Result<Option<(String, Option<String>)>, _> = jobs::table
        .filter(jobs::id.eq(job_id))
        .filter(jobs::runtime_id.eq(runtime_id))
        .select((jobs::state, jobs::reason))
        .first(conn)
        .await
        .optional();
    match found {
        Ok(Some((state, reason)))
            if JobState::parse(&state)
                .is_some_and(|state| is_canceled(state, reason.as_deref())) =>
        {
            job_canceled()
        }
        Ok(_) => lease_lost(),
        Err(err) => err.into(),
    }
}

pub(crate) fn version_i64(version: LeaseVersion) -> Result<i64, StoreError> {
    i64::try_from(version.0).map_err(|_| lease_lost())
}
