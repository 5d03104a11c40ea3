//! Claims: scan, judge and grant under the runtime's row lock.
//!
//! Claims of one runtime are serialised by its row lock, which makes the
//! concurrency cap and the hourly budget exact across processes. A claim is
//! a bounded number of statements whatever its batch size: the lock, the
//! expiry check (and one write when leases expired), one state read (the
//! database clock, active leases, the budget window), the set-based scan
//! (two statements), one candidate read per round (rounds only repeat past
//! refusals, within a candidate and time budget), one write for every grant
//! and skip with their attempts, budget units and log records, and one
//! read for `retryAt`. Statements that do not need each
//! other's answers are pipelined (diesel-async: sent in one flight, run in
//! order). A claim is then two flights: `BEGIN` with the lock, the expiry
//! check, the state read, the scan and the first candidate round; the
//! grants with `COMMIT` (a pipelined transaction,
//! [`crate::pool::PooledConnection::pipelined_transaction`]). Only expired
//! leases and a run of refusals add flights.
//!
//! The rules are the core's: `ClaimPlan` for how many to grant, the rounds
//! and the spread over rooms, `Policy::judge` per candidate, `ClaimStop`
//! for `morePending`. Each statement is a whole file in `claim/`
//! (`runtime::statements` lists them).

mod candidates;
pub(crate) mod expiry;
mod grant;

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Bool, Nullable, Timestamptz};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use relayger_core::claim_plan::{ClaimInputs, ClaimPlan, first_round_size};
use relayger_core::lease::claim_lock_wait_ms;
use relayger_core::policy::Policy;
use relayger_core::wire::{ClaimResponse, Timestamp};
use time::{Duration, OffsetDateTime};
use uuid::Uuid;

use self::candidates::{Round, judge_candidates};
use self::grant::{GrantTerms, Writes};
use super::granted::JobPlace;
use super::scan;
use super::statements::{CLAIM_STATE, GENERIC_PLANS, IDLE_FACTS, LOCK_RUNTIME};
use crate::pause::{PausePoint, pause};
use crate::pool::{begin, commit_after};
use crate::prepared::CachedExt;
use crate::wake::Wakes;
use crate::{Caller, Store, StoreError};

/// A job's lease as the claim's statements answer it: what the expiry
/// reads of an expired lease, and what a grant wrote.
#[derive(QueryableByName)]
pub(crate) struct JobLease {
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    id: Uuid,
    #[diesel(sql_type = diesel::sql_types::Integer)]
    attempts: i32,
    #[diesel(sql_type = BigInt)]
    lease_version: i64,
}

#[derive(QueryableByName)]
struct ClaimState {
    #[diesel(sql_type = Timestamptz)]
    now: OffsetDateTime,
    #[diesel(sql_type = BigInt)]
    active: i64,
    /// The earliest expiry of the active leases.
    #[diesel(sql_type = Nullable<Timestamptz>)]
    next_expiry: Option<OffsetDateTime>,
    #[diesel(sql_type = BigInt)]
    budget_last: i64,
    #[diesel(sql_type = BigInt)]
    budget_before_window: i64,
}

/// [`CLAIM_STATE`] for the runtime; pipelines like
/// [`expiry::expired_leases`].
fn claim_state(
    mut conn: &AsyncPgConnection,
    runtime_id: Uuid,
) -> impl std::future::Future<Output = QueryResult<ClaimState>> + Send + '_ {
    diesel::sql_query(CLAIM_STATE)
        .bind::<diesel::sql_types::Uuid, _>(runtime_id)
        .cached()
        .get_result(&mut conn)
}

/// The grants of the rolling hour (the claim's own reading of the budget
/// window, [`CLAIM_STATE`]), for the runtime's stats.
pub(super) async fn budget_used(
    conn: &mut AsyncPgConnection,
    runtime_id: Uuid,
) -> Result<i64, StoreError> {
    let state = claim_state(conn, runtime_id).await?;
    Ok(state.budget_last - state.budget_before_window)
}

/// The agent's runtime row, locked as [`super::owned_runtime`] locks it
/// ([`LOCK_RUNTIME`]; `NotFound` when it is not the agent's); pipelines
/// like [`expiry::expired_leases`].
fn lock_runtime(
    mut conn: &AsyncPgConnection,
    agent_id: Uuid,
    runtime_id: Uuid,
) -> impl std::future::Future<Output = QueryResult<super::RuntimeRow>> + Send + '_ {
    diesel::sql_query(LOCK_RUNTIME)
        .bind::<diesel::sql_types::Uuid, _>(runtime_id)
        .bind::<diesel::sql_types::Uuid, _>(agent_id)
        .cached()
        .get_result(&mut conn)
}

/// Makes the rest of the claim's transaction use generic plans for its
/// prepared statements ([`GENERIC_PLANS`]). PostgreSQL plans a prepared
/// statement afresh for its parameters the first five times and keeps the
/// generic plan only while it looks no dearer than those; for a statement
/// that takes an array (`unnest($1)`), the generic plan guesses the array
/// far longer than the few elements a claim passes, looks several times
/// dearer, and the statement is re-planned on every claim (a third of a
/// millisecond of planning a question in `bench p1`). Every claim statement
/// is a primary-key or index lookup whose right plan does not depend on the
/// values, so the generic plan is the one wanted. The setting ends with the
/// transaction; it travels in the claim's first flight, so it costs no
/// round trip.
fn generic_plans(
    mut conn: &AsyncPgConnection,
    lease_ms: u64,
) -> impl std::future::Future<Output = QueryResult<usize>> + Send + '_ {
    // A lease is at most an hour (`MAX_LEASE_MS`), far inside i64.
    let lock_wait_ms = i64::try_from(claim_lock_wait_ms(lease_ms)).unwrap_or(i64::MAX);
    diesel::sql_query(GENERIC_PLANS)
        .bind::<BigInt, _>(lock_wait_ms)
        .cached()
        .execute(&mut conn)
}

#[derive(QueryableByName)]
struct IdleFacts {
    #[diesel(sql_type = Nullable<Timestamptz>)]
    lease_expiry: Option<OffsetDateTime>,
    #[diesel(sql_type = Bool)]
    pending: bool,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    oldest_unit: Option<OffsetDateTime>,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    backoff: Option<OffsetDateTime>,
}

impl Store {
    /// Claims up to `max_jobs` jobs for the runtime under the current policy;
    /// with `count_contact_requests`, also counts the agent's pending
    /// contact requests in the same transaction (the claim response's
    /// header; no round trip or connection of its own).
    pub async fn claim(
        &self,
        caller: &Caller,
        runtime_id: Uuid,
        max_jobs: u32,
        requested_timeout_ms: Option<u64>,
        lease_ms: u64,
        count_contact_requests: bool,
    ) -> Result<Claimed, StoreError> {
        let mut conn = self.conn().await?;
        let caller = caller.clone();
        let claimed = conn
            .pipelined_transaction(async |conn| -> Result<_, StoreError> {
                let agent_id = caller.identity_id;
                // One flight, run in this order: `BEGIN`, the runtime lock, its
                // expired leases, the state read, the contact count, the scan
                // and the first candidate round. Each statement names the agent
                // or reads only, so for someone else's runtime nothing is
                // locked or written and the claim answers "not found".
                let shared: &AsyncPgConnection = conn;
                let first_round_size = first_round_size(max_jobs);
                let contact_requests = async {
                    match count_contact_requests {
                        true => crate::contacts::pending_request_count(shared, agent_id)
                            .await
                            .map(Some),
                        false => Ok(None),
                    }
                };
                let flight = futures_util::try_join!(
                    begin(shared),
                    generic_plans(shared, lease_ms),
                    lock_runtime(shared, agent_id, runtime_id),
                    expiry::expired_leases(shared, runtime_id, agent_id),
                    claim_state(shared, runtime_id),
                    contact_requests,
                    scan::scan(shared, runtime_id, agent_id),
                    candidates::first_round(shared, runtime_id, &caller, first_round_size),
                );
                pause(PausePoint::ScanAfterMembership, runtime_id).await;
                let (begun, _, row, expired, mut state, contact_requests, more_to_scan, first) =
                    flight.map_err(|err| match err {
                        diesel::result::Error::NotFound => StoreError::not_found("no such runtime"),
                        err => err.into(),
                    })?;
                let policy = row.policy()?;
                let mut first = Some(first);
                let mut expired_askers = Vec::new();
                if !expired.is_empty() {
                    expired_askers =
                        expiry::end_expired(conn, runtime_id, &policy, &expired).await?;
                    // The ended leases are no longer active, and their jobs,
                    // pending again, come before the first round's.
                    state = claim_state(conn, runtime_id).await?;
                    first = None;
                }
                let now = state.now;
                let next_expiry = state.next_expiry;
                let plan = ClaimPlan::new(ClaimInputs {
                    max_jobs,
                    concurrency: policy.concurrency,
                    active_leases: state.active,
                    max_calls_per_hour: policy.max_calls_per_hour,
                    budget_used: state.budget_last - state.budget_before_window,
                    in_active_hours: policy.is_active_at(now),
                });
                let judged = judge_candidates(
                    conn,
                    first,
                    Round {
                        runtime_id,
                        caller: &caller,
                        policy: &policy,
                        now,
                        plan: &plan,
                    },
                )
                .await?;
                let unexamined_left = judged.unexamined_left;
                let writes = Writes::new(
                    runtime_id,
                    judged,
                    GrantTerms {
                        requested_timeout_ms,
                        lease_ms,
                        now,
                        budget_last: state.budget_last,
                    },
                )?;
                let mut askers = writes.askers();
                askers.append(&mut expired_askers);
                // The last flight: the grants and skips, the facts for
                // `retryAt`, and `COMMIT`.
                let shared: &AsyncPgConnection = conn;
                let committed = commit_after(shared, begun, async {
                    futures_util::try_join!(writes.write(shared), async {
                        idle_facts(shared, runtime_id)
                            .await
                            .map_err(StoreError::from)
                    })
                })
                .await?;
                Ok(committed.map(|(granted, mut facts)| {
                    let stop = plan.stop(granted.len(), unexamined_left || more_to_scan);
                    let mut work_left = stop.work_left;
                    if granted.is_empty() {
                        work_left |= facts.pending;
                    } else {
                        // A grant too says when something may become
                        // claimable (another process's lease runs out, a
                        // retried job's backoff ends): without it, a worker
                        // whose claim granted learns of that only at its
                        // fallback poll. Its own grants are no such reason.
                        facts.lease_expiry = next_expiry;
                    }
                    let retry_at = retry_time(
                        &facts,
                        &policy,
                        now,
                        &plan,
                        more_to_scan || stop.more_pending(),
                    );
                    let claimed = Claimed {
                        response: ClaimResponse {
                            jobs: granted,
                            retry_at: retry_at.map(Timestamp),
                            lease_ms,
                            more_pending: stop.more_pending(),
                            work_left,
                        },
                        contact_requests,
                    };
                    (claimed, askers)
                }))
            })
            .await?;
        let (claimed, askers) = claimed;
        self.publish_wakes(Wakes::askers(askers));
        self.granted
            .remember(claimed.response.jobs.iter().map(|job| {
                (
                    job.job_id,
                    JobPlace {
                        room_id: job.message.conversation_id,
                        message_id: job.message.message_id,
                    },
                )
            }));
        Ok(claimed)
    }
}

/// [`IDLE_FACTS`] for the runtime; pipelines like
/// [`expiry::expired_leases`].
fn idle_facts(
    mut conn: &AsyncPgConnection,
    runtime_id: Uuid,
) -> impl std::future::Future<Output = QueryResult<IdleFacts>> + Send + '_ {
    diesel::sql_query(IDLE_FACTS)
        .bind::<diesel::sql_types::Uuid, _>(runtime_id)
        .cached()
        .get_result(&mut conn)
}

/// What [`Store::claim`] answers.
#[derive(Debug)]
pub struct Claimed {
    /// The claim response as the API sends it.
    pub response: ClaimResponse,
    /// The agent's pending contact requests, when they were asked for.
    pub contact_requests: Option<u32>,
}

/// When a claim could succeed again without a new signal.
fn retry_time(
    idle: &IdleFacts,
    policy: &Policy,
    now: OffsetDateTime,
    plan: &ClaimPlan,
    look_again_now: bool,
) -> Option<OffsetDateTime> {
    let mut candidates: Vec<OffsetDateTime> = Vec::new();
    if look_again_now {
        candidates.push(now);
    }
    candidates.extend(idle.lease_expiry);
    if idle.pending && plan.free_slots() > 0 {
        if !policy.is_active_at(now) {
            candidates.extend(policy.next_active_start(now));
        } else if plan.budget_left() <= 0 {
            candidates.extend(idle.oldest_unit.map(|t| t + Duration::hours(1)));
        } else {
            candidates.extend(idle.backoff);
        }
    }
    candidates.into_iter().min()
}
