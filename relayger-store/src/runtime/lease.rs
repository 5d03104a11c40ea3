//! Lease upkeep: heartbeats, releases, and the expiry of abandoned leases.
//!
//! Every lease write after a claim goes through the one fence,
//! `relayger_lease_fence` (a migration defines it; relayger-core's
//! `lease::LeaseFence` states the rule), in the statement that writes:
//! job, owner, version, and an expiry later than the database clock at the
//! moment the job row is locked. Every lease time is the database's clock.

use std::sync::LazyLock;

use diesel::prelude::*;
use diesel::sql_types::{Array, BigInt, Integer, Nullable, Text, Timestamptz};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use relayger_core::ErrorCode;
use relayger_core::job::{JobEvent, JobState, RuntimeEvent, next_state, retry_backoff_ms};
use relayger_core::lease::{LeaseOwner, LeaseVersion};
use relayger_core::policy::Policy;
use relayger_core::wire::{HeartbeatResponse, Timestamp};
use serde_json::json;
use time::OffsetDateTime;
use uuid::Uuid;

use super::{owned_runtime, with_states};
use crate::prepared::CachedExt;
use crate::schema::jobs;
use crate::{Caller, Store, StoreError};

/// The state a claimed job takes after `event` (a failure or an expired
/// lease) with `attempt_count` attempts made, and the backoff before it may
/// be claimed again (none for a dead letter).
fn after_attempt(
    event: JobEvent,
    attempt_count: u32,
    max_attempts: u32,
) -> Result<(JobState, Option<u64>), StoreError> {
    let state = next_state(JobState::Claimed, event, attempt_count, max_attempts)
        .map_err(|e| StoreError::rejected(ErrorCode::Internal, e.to_string()))?;
    let backoff = (state == JobState::Pending).then(|| retry_backoff_ms(attempt_count));
    Ok((state, backoff))
}

#[derive(QueryableByName)]
pub(crate) struct ExpiredLease {
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    id: Uuid,
    #[diesel(sql_type = Integer)]
    attempts: i32,
    #[diesel(sql_type = BigInt)]
    lease_version: i64,
}

/// A job row someone else holds (a finish that is being fenced out,
/// another claim) is left for the next claim instead of holding this one,
/// and the runtime row with it, until that transaction ends.
///
/// Only a runtime of the agent `$2`: a claim sends this in the same flight
/// as its runtime lock (see [`expired_leases`]), before it knows whether the
/// runtime is the caller's.
static EXPIRED: LazyLock<String> = LazyLock::new(|| {
    with_states(
        "SELECT id, attempts, lease_version FROM jobs
         WHERE runtime_id = $1 AND state = {claimed} AND lease_expires_at <= now()
           AND EXISTS (SELECT 1 FROM runtimes WHERE id = $1 AND agent_id = $2)
         FOR UPDATE OF jobs SKIP LOCKED",
    )
});

/// The runtime's expired leases whose job rows no other transaction holds,
/// locked ([`EXPIRED`]). The future does not borrow `conn` once made, so it
/// can be polled together with other statements on the same connection
/// (they are pipelined: sent in one flight, run in order).
pub(crate) fn expired_leases(
    mut conn: &AsyncPgConnection,
    runtime_id: Uuid,
    agent_id: Uuid,
) -> impl std::future::Future<Output = QueryResult<Vec<ExpiredLease>>> + Send + '_ {
    diesel::sql_query(EXPIRED.as_str())
        .bind::<diesel::sql_types::Uuid, _>(runtime_id)
        .bind::<diesel::sql_types::Uuid, _>(agent_id)
        .cached()
        .load(&mut conn)
}

/// Ends the expired attempts, moves their jobs on and logs them, for all
/// expired leases at once. Rows are found by `= ANY` of the input arrays
/// as well as by the join, so a generic plan (the claim forces them) takes
/// the indexes rather than hashing the input against a scan of the table
/// (see `GRANT_AND_SKIP` in `claim.rs`).
pub(super) const END_EXPIRED: &str = "WITH input AS (
         SELECT * FROM unnest($2::uuid[], $3::bigint[], $4::text[], $5::bigint[], $6::text[])
             AS t(id, version, state, backoff_ms, kind)
     ),
     ended AS (
         UPDATE attempts a SET ended = 'expired'
         FROM input WHERE a.lease_version = input.version AND a.lease_version = ANY($3::bigint[])
             AND a.finished_at IS NULL
     ),
     moved AS (
         UPDATE jobs j SET state = input.state, reason = 'lease_expired',
             not_before = CASE WHEN input.backoff_ms IS NULL THEN j.not_before
                          ELSE now() + input.backoff_ms * interval '1 millisecond' END,
             lease_owner = NULL, lease_version = NULL, lease_expires_at = NULL,
             updated_at = now()
         FROM input WHERE j.id = input.id AND j.id = ANY($2::uuid[])
         RETURNING j.job_key, j.room_id, j.message_id, j.attempts, input.kind
     )
     INSERT INTO runtime_log (runtime_id, kind, job_key, room_id, message_id, detail)
     SELECT $1, kind, job_key, room_id, message_id,
            jsonb_build_object('attempt', attempts, 'reason', 'lease_expired')
     FROM moved";

/// Ends every lease of the runtime that has expired and whose job row is not
/// locked by another transaction: the attempt counts as unfinished and
/// failed; the job retries with backoff or, at maxAttempts, becomes a dead
/// letter (`job::next_state`). One statement when nothing expired, two
/// otherwise, however many did.
pub(crate) async fn expire_leases(
    conn: &mut AsyncPgConnection,
    runtime_id: Uuid,
    agent_id: Uuid,
    policy: &Policy,
) -> Result<(), StoreError> {
    let expired = expired_leases(conn, runtime_id, agent_id).await?;
    end_expired(conn, runtime_id, policy, &expired).await
}

/// Ends `expired` ([`expired_leases`]'s rows, still locked): nothing to do
/// when it is empty, else one statement.
pub(crate) async fn end_expired(
    conn: &mut AsyncPgConnection,
    runtime_id: Uuid,
    policy: &Policy,
    expired: &[ExpiredLease],
) -> Result<(), StoreError> {
    if expired.is_empty() {
        return Ok(());
    }
    let mut ids = Vec::with_capacity(expired.len());
    let mut versions = Vec::with_capacity(expired.len());
    let mut states = Vec::with_capacity(expired.len());
    let mut backoffs = Vec::with_capacity(expired.len());
    let mut kinds = Vec::with_capacity(expired.len());
    for lease in expired {
        let attempt_count = u32::try_from(lease.attempts).unwrap_or(0);
        let (state, backoff) =
            after_attempt(JobEvent::LeaseExpired, attempt_count, policy.max_attempts)?;
        let kind = if state == JobState::Dead {
            "dead_letter"
        } else {
            "expired"
        };
        crate::metrics::runtime_event(
            kind,
            &json!({"attempt": lease.attempts, "reason": "lease_expired"}),
            false,
        );
        ids.push(lease.id);
        versions.push(lease.lease_version);
        states.push(state.as_str());
        backoffs.push(backoff.map(|ms| i64::try_from(ms).unwrap_or(i64::MAX)));
        kinds.push(kind);
    }
    diesel::sql_query(END_EXPIRED)
        .bind::<diesel::sql_types::Uuid, _>(runtime_id)
        .bind::<Array<diesel::sql_types::Uuid>, _>(&ids)
        .bind::<Array<BigInt>, _>(&versions)
        .bind::<Array<Text>, _>(&states)
        .bind::<Array<Nullable<BigInt>>, _>(&backoffs)
        .bind::<Array<Text>, _>(&kinds)
        .cached()
        .execute(conn)
        .await?;
    Ok(())
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

/// A heartbeat through the fence (`relayger_lease_fence`): the new expiry,
/// or no row when the lease is not the caller's or has ended.
const HEARTBEAT: &str = include_str!("lease/heartbeat.sql");

/// A release through the fence: the log record's id, or no row (nothing
/// written) when the lease is not the caller's or has ended.
const RELEASE: &str = include_str!("lease/release.sql");

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
        let renewed = renewed.ok_or_else(lease_lost)?;
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
        let logged = diesel::sql_query(RELEASE)
            .bind::<diesel::sql_types::Uuid, _>(job_id) // $1 job_id
            .bind::<diesel::sql_types::Uuid, _>(runtime_id) // $2 runtime_id
            .bind::<Text, _>(owner.as_str()) // $3 owner
            .bind::<BigInt, _>(version_i64(version)?) // $4 version
            .bind::<Text, _>(released.as_str()) // $5 state
            .cached()
            .execute(&mut conn)
            .await?;
        if logged == 0 {
            return Err(lease_lost());
        }
        crate::metrics::runtime_event(RuntimeEvent::Released.as_str(), &json!({}), false);
        Ok(())
    }
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

pub(crate) fn version_i64(version: LeaseVersion) -> Result<i64, StoreError> {
    i64::try_from(version.0).map_err(|_| lease_lost())
}
