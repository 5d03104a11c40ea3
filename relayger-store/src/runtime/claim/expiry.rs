//! The expiry of abandoned leases, under the runtime's row lock: by every
//! claim (in its first flight) and by a configure. The attempt counts as
//! unfinished and failed; the job retries with backoff or, at maxAttempts,
//! becomes a dead letter (`job::next_state`).

use diesel::prelude::*;
use diesel::sql_types::{Array, BigInt, Nullable, Text};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use relayger_core::ErrorCode;
use relayger_core::job::{JobEvent, JobState};
use relayger_core::policy::Policy;
use serde_json::json;
use uuid::Uuid;

use super::JobLease;
use crate::StoreError;
use crate::prepared::CachedExt;
use crate::runtime::lease::after_attempt;
use crate::runtime::statements::{END_EXPIRED, EXPIRED_LEASES};

/// The runtime's expired leases whose job rows no other transaction holds,
/// locked ([`EXPIRED_LEASES`]); none unless the runtime is the agent's. The
/// future does not borrow `conn` once made, so it can be polled together
/// with other statements on the same connection (they are pipelined: sent
/// in one flight, run in order).
pub(crate) fn expired_leases(
    mut conn: &AsyncPgConnection,
    runtime_id: Uuid,
    agent_id: Uuid,
) -> impl std::future::Future<Output = QueryResult<Vec<JobLease>>> + Send + '_ {
    diesel::sql_query(EXPIRED_LEASES)
        .bind::<diesel::sql_types::Uuid, _>(runtime_id)
        .bind::<diesel::sql_types::Uuid, _>(agent_id)
        .cached()
        .load(&mut conn)
}

/// Ends every lease of the runtime that has expired and whose job row is not
/// locked by another transaction. One statement when nothing expired, two
/// otherwise, however many did.
pub(crate) async fn expire_leases(
    conn: &mut AsyncPgConnection,
    runtime_id: Uuid,
    agent_id: Uuid,
    policy: &Policy,
) -> Result<Vec<Uuid>, StoreError> {
    let expired = expired_leases(conn, runtime_id, agent_id).await?;
    end_expired(conn, runtime_id, policy, &expired).await
}

/// Ends `expired` ([`expired_leases`]'s rows, still locked) with
/// [`END_EXPIRED`]: nothing to do when it is empty, else one statement.
pub(crate) async fn end_expired(
    conn: &mut AsyncPgConnection,
    runtime_id: Uuid,
    policy: &Policy,
    expired: &[JobLease],
) -> Result<Vec<Uuid>, StoreError> {
    if expired.is_empty() {
        return Ok(Vec::new());
    }
    let mut ids = Vec::with_capacity(expired.len());
    let mut versions = Vec::with_capacity(expired.len());
    let mut states = Vec::with_capacity(expired.len());
    let mut backoffs = Vec::with_capacity(expired.len());
    let mut kinds = Vec::with_capacity(expired.len());
    for lease in expired {
        let attempt_count = u32::try_from(lease.attempts).map_err(|_| {
            out_of_range(format!("job {} has {} attempts", lease.id, lease.attempts))
        })?;
        let (state, backoff) =
            after_attempt(JobEvent::LeaseExpired, attempt_count, policy.max_attempts)?;
        let backoff = backoff
            .map(|ms| i64::try_from(ms).map_err(|_| out_of_range(format!("a backoff of {ms} ms"))))
            .transpose()?;
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
        backoffs.push(backoff);
        kinds.push(kind);
    }
    let askers = diesel::sql_query(END_EXPIRED)
        .bind::<diesel::sql_types::Uuid, _>(runtime_id)
        .bind::<Array<diesel::sql_types::Uuid>, _>(&ids)
        .bind::<Array<BigInt>, _>(&versions)
        .bind::<Array<Text>, _>(&states)
        .bind::<Array<Nullable<BigInt>>, _>(&backoffs)
        .bind::<Array<Text>, _>(&kinds)
        .cached()
        .load::<Asker>(conn)
        .await?;
    Ok(askers.into_iter().map(|row| row.asker).collect())
}

/// The sender of an expired job's question: its delivery changed.
#[derive(QueryableByName)]
struct Asker {
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    asker: Uuid,
}

/// A number that does not fit where the expiry writes it: refused before
/// anything of the expiry is written, so the claim rolls back.
fn out_of_range(what: String) -> StoreError {
    StoreError::rejected(
        ErrorCode::Internal,
        format!("an expired lease cannot be ended: {what} is out of range"),
    )
}
