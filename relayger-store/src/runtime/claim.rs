//! Claims, heartbeats, releases, and the expiry of abandoned leases.
//!
//! Every lease write checks job, owner, version and `lease_expires_at >
//! now()` in the same statement, and every lease time is the database's
//! clock. Claims of one runtime are serialised by its row lock, which makes
//! the concurrency cap and the hourly budget exact across processes.

use std::collections::{HashMap, HashSet};

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Nullable, Timestamptz};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use relayger_core::ErrorCode;
use relayger_core::claim_rule::ClaimStop;
use relayger_core::handler_timeout::handler_timeout_ms;
use relayger_core::ids::IdentityNumber;
use relayger_core::job::retry_backoff_ms;
use relayger_core::lease::{LeaseOwner, LeaseVersion};
use relayger_core::policy::{MessageFacts, Policy};
use relayger_core::wire::{ClaimResponse, ClaimedJob, HeartbeatResponse, Timestamp};
use serde_json::json;
use time::{Duration, OffsetDateTime};
use uuid::Uuid;

use super::{log, log_jobs, owned_runtime, scan};
use crate::messages::load_envelope;
use crate::schema::{attempts, blocks, budget_units, identities, jobs, messages, room_members};
use crate::{Caller, Store, StoreError};

/// Scans per claim before answering "look again now".
const SCANS_PER_CLAIM: usize = 4;
/// Candidate jobs one claim may judge (skips included) before it answers
/// `morePending` instead of going on.
const CANDIDATE_BUDGET: i64 = 4096;
/// Wall-clock time one claim may spend judging candidates.
const CLAIM_TIME_BUDGET: std::time::Duration = std::time::Duration::from_millis(250);
/// The most jobs locked in one candidate batch.
const MAX_BATCH: i64 = 512;
/// The most jobs one claim may grant.
pub const MAX_JOBS_PER_CLAIM: u32 = 64;

#[derive(QueryableByName)]
struct DbNow {
    #[diesel(sql_type = Timestamptz)]
    now: OffsetDateTime,
}

pub(crate) async fn db_now(conn: &mut AsyncPgConnection) -> Result<OffsetDateTime, StoreError> {
    let row: DbNow = diesel::sql_query("SELECT now() AS now")
        .get_result(conn)
        .await?;
    Ok(row.now)
}

fn lease_interval(lease_ms: u64) -> diesel::expression::SqlLiteral<Nullable<Timestamptz>> {
    // lease_ms is a validated integer: safe to format into SQL.
    diesel::dsl::sql::<Nullable<Timestamptz>>(&format!(
        "now() + interval '{lease_ms} milliseconds'"
    ))
}

/// A pending job with what the policy needs to judge it.
struct Candidate {
    id: Uuid,
    job_key: String,
    room_id: Uuid,
    message_id: Uuid,
    sender_id: Uuid,
    sender_number: String,
    ask: bool,
    by_runtime: bool,
    deadline: Option<OffsetDateTime>,
    /// The agent and the sender have blocked one another (either way).
    sender_blocked: bool,
}

/// Why the current policy refuses a pending job, if it does.
fn refusal(
    policy: &Policy,
    agent_id: Uuid,
    member: bool,
    candidate: &Candidate,
    now: OffsetDateTime,
) -> Option<&'static str> {
    if !member {
        return Some("access_lost");
    }
    if candidate.sender_blocked {
        return Some("sender_blocked");
    }
    if !policy.room_allowed(&candidate.room_id) {
        return Some("room_not_allowed");
    }
    let allowed_sender = IdentityNumber::parse(&candidate.sender_number)
        .map(|number| policy.sender_allowed(&number))
        .unwrap_or(false);
    if !allowed_sender {
        return Some("sender_not_allowed");
    }
    let facts = MessageFacts {
        from_self: candidate.sender_id == agent_id,
        ask: candidate.ask,
        by_runtime: candidate.by_runtime,
    };
    if !policy.triggers_on(&facts) {
        return Some("not_triggered");
    }
    if candidate.deadline.is_some_and(|deadline| deadline <= now) {
        return Some("deadline_passed");
    }
    None
}

/// Ends every lease of the runtime that has expired and whose job row is not
/// locked by another transaction: the attempt counts as unfinished and
/// failed; the job retries with backoff or, at maxAttempts, becomes a dead
/// letter.
pub(crate) async fn expire_leases(
    conn: &mut AsyncPgConnection,
    runtime_id: Uuid,
    policy: &Policy,
) -> Result<(), StoreError> {
    let expired: Vec<(Uuid, String, Uuid, Uuid, i32, Option<i64>)> = jobs::table
        .filter(jobs::runtime_id.eq(runtime_id))
        .filter(jobs::state.eq("claimed"))
        .filter(jobs::lease_expires_at.le(diesel::dsl::now))
        .select((
            jobs::id,
            jobs::job_key,
            jobs::room_id,
            jobs::message_id,
            jobs::attempts,
            jobs::lease_version,
        ))
        // A job row someone else holds (a finish that is being fenced out,
        // another claim) is left for the next claim instead of holding this
        // one, and the runtime row with it, until that transaction ends.
        .for_update()
        .skip_locked()
        .load(conn)
        .await?;
    for (job_id, job_key, room_id, message_id, attempt_count, version) in expired {
        if let Some(version) = version {
            diesel::update(
                attempts::table
                    .filter(attempts::lease_version.eq(version))
                    .filter(attempts::finished_at.is_null()),
            )
            .set(attempts::ended.eq("expired"))
            .execute(conn)
            .await?;
        }
        let attempt_count = u32::try_from(attempt_count).unwrap_or(0);
        fail_job(
            conn,
            job_id,
            attempt_count,
            policy.max_attempts,
            "lease_expired",
        )
        .await?;
        let kind = if attempt_count >= policy.max_attempts {
            "dead_letter"
        } else {
            "expired"
        };
        log(
            conn,
            runtime_id,
            kind,
            Some((&job_key, room_id, message_id)),
            json!({"attempt": attempt_count, "reason": "lease_expired"}),
        )
        .await?;
    }
    Ok(())
}

/// After a failed or expired attempt: pending with backoff, or dead.
/// Returns the time the job may be claimed again (None when dead).
pub(crate) async fn fail_job(
    conn: &mut AsyncPgConnection,
    job_id: Uuid,
    attempt_count: u32,
    max_attempts: u32,
    reason: &str,
) -> Result<Option<OffsetDateTime>, StoreError> {
    let clear_lease = cleared_lease();
    if attempt_count >= max_attempts {
        diesel::update(jobs::table.find(job_id))
            .set((jobs::state.eq("dead"), jobs::reason.eq(reason), clear_lease))
            .execute(conn)
            .await?;
        return Ok(None);
    }
    let backoff = retry_backoff_ms(attempt_count);
    let not_before: OffsetDateTime = diesel::update(jobs::table.find(job_id))
        .set((
            jobs::state.eq("pending"),
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
    /// Claims up to `max_jobs` jobs for the runtime under the current policy.
    #[allow(clippy::too_many_arguments)]
    pub async fn claim(
        &self,
        caller: &Caller,
        runtime_id: Uuid,
        max_jobs: u32,
        requested_timeout_ms: Option<u64>,
        lease_ms: u64,
    ) -> Result<ClaimResponse, StoreError> {
        let mut conn = self.conn().await?;
        let caller = caller.clone();
        conn.transaction(async |conn| -> Result<_, StoreError> {
            let agent_id = caller.identity_id;
            let row = owned_runtime(conn, agent_id, runtime_id, true).await?;
            let policy = row.policy()?;
            let now = db_now(conn).await?;
            expire_leases(conn, runtime_id, &policy).await?;
            let mut more_to_scan = false;
            for _ in 0..SCANS_PER_CLAIM {
                more_to_scan = scan::scan(conn, runtime_id, agent_id, &policy).await?;
                if !more_to_scan {
                    break;
                }
            }

            let active: i64 = jobs::table
                .filter(jobs::runtime_id.eq(runtime_id))
                .filter(jobs::state.eq("claimed"))
                .count()
                .get_result(conn)
                .await?;
            let free = i64::from(policy.concurrency) - active;
            let window_start = now - Duration::hours(1);
            let used: i64 = budget_units::table
                .filter(budget_units::runtime_id.eq(runtime_id))
                .filter(budget_units::granted_at.gt(window_start))
                .count()
                .get_result(conn)
                .await?;
            let remaining = i64::from(policy.max_calls_per_hour) - used;
            let active_now = policy.is_active_at(now);
            let mut want = i64::from(max_jobs.clamp(1, MAX_JOBS_PER_CLAIM))
                .min(free)
                .min(remaining);
            if !active_now {
                want = 0;
            }

            let mut granted = Vec::new();
            let terms = GrantTerms {
                runtime_id,
                requested_timeout_ms,
                lease_ms,
                now,
            };
            let judged =
                judge_candidates(conn, &caller, &policy, &terms, want, &mut granted).await?;
            let work_left = judged.unexamined_left || more_to_scan;
            let stop = ClaimStop {
                requested: max_jobs.max(1),
                grantable: if active_now { free.min(remaining) } else { 0 },
                granted: u32::try_from(granted.len()).unwrap_or(u32::MAX),
                work_left,
            };
            let retry_at = if granted.is_empty() {
                retry_time(
                    conn,
                    runtime_id,
                    &policy,
                    now,
                    free,
                    remaining,
                    window_start,
                    more_to_scan || stop.more_pending(),
                )
                .await?
            } else {
                None
            };
            Ok(ClaimResponse {
                jobs: granted,
                retry_at: retry_at.map(Timestamp),
                lease_ms,
                more_pending: stop.more_pending(),
            })
        })
        .await
    }

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
        conn.transaction(async |conn| -> Result<_, StoreError> {
            owned_runtime(conn, agent_id, runtime_id, false).await?;
            let version = version_i64(version)?;
            let released: Option<(String, Uuid, Uuid)> = diesel::update(
                jobs::table.filter(lease_fence(job_id, runtime_id, &owner, version)),
            )
            .set((
                jobs::state.eq("pending"),
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
        })
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
            .and(jobs::state.eq("claimed"))
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

async fn grant(
    conn: &mut AsyncPgConnection,
    terms: &GrantTerms,
    candidate: &Candidate,
) -> Result<ClaimedJob, StoreError> {
    let GrantTerms {
        runtime_id,
        requested_timeout_ms,
        lease_ms,
        now,
    } = *terms;
    #[derive(QueryableByName)]
    struct Next {
        #[diesel(sql_type = BigInt)]
        v: i64,
    }
    let next: Next = diesel::sql_query("SELECT nextval('lease_version_seq') AS v")
        .get_result(conn)
        .await?;
    let owner = LeaseOwner::generate()
        .map_err(|e| StoreError::rejected(ErrorCode::Internal, e.to_string()))?;
    let attempt: i32 = diesel::update(jobs::table.find(candidate.id))
        .set((
            jobs::state.eq("claimed"),
            jobs::attempts.eq(jobs::attempts + 1),
            jobs::lease_owner.eq(owner.as_str()),
            jobs::lease_version.eq(next.v),
            jobs::lease_expires_at.eq(lease_interval(lease_ms)),
            jobs::not_before.eq(None::<OffsetDateTime>),
            jobs::updated_at.eq(diesel::dsl::now),
        ))
        .returning(jobs::attempts)
        .get_result(conn)
        .await?;
    diesel::insert_into(attempts::table)
        .values((
            attempts::job_id.eq(candidate.id),
            attempts::runtime_id.eq(runtime_id),
            attempts::attempt.eq(attempt),
            attempts::lease_owner.eq(owner.as_str()),
            attempts::lease_version.eq(next.v),
        ))
        .execute(conn)
        .await?;
    diesel::insert_into(budget_units::table)
        .values(budget_units::runtime_id.eq(runtime_id))
        .execute(conn)
        .await?;
    let version = LeaseVersion(u64::try_from(next.v).unwrap_or(0));
    log(
        conn,
        runtime_id,
        "claimed",
        Some((&candidate.job_key, candidate.room_id, candidate.message_id)),
        json!({"attempt": attempt, "version": version.to_string()}),
    )
    .await?;
    let deadline_remaining = candidate
        .deadline
        .map(|deadline| i64::try_from((deadline - now).whole_milliseconds()).unwrap_or(i64::MAX));
    let message = load_envelope(conn, candidate.room_id, candidate.message_id)
        .await?
        .ok_or_else(|| StoreError::not_found("the job's message vanished"))?;
    Ok(ClaimedJob {
        job_id: candidate.id,
        job_key: candidate.job_key.clone(),
        attempt: u32::try_from(attempt).unwrap_or(0),
        owner,
        version,
        lease_ms,
        handler_timeout_ms: handler_timeout_ms(requested_timeout_ms, deadline_remaining),
        message,
    })
}

/// What a grant needs besides the candidate.
#[derive(Clone, Copy)]
struct GrantTerms {
    runtime_id: Uuid,
    requested_timeout_ms: Option<u64>,
    lease_ms: u64,
    now: OffsetDateTime,
}

/// How the candidate loop ended.
struct Judged {
    /// Pending jobs may remain that this claim did not look at (the budget
    /// ran out or the last batch was full).
    unexamined_left: bool,
}

/// Locks pending jobs oldest first in growing batches and judges them under
/// the current policy: refusals become skips (one statement per reason and
/// one log insert per batch), the rest are granted until `want` is met.
/// Keeps going past refusals until the candidate or time budget is spent,
/// so a run of skips never leaves a real question for a later claim.
async fn judge_candidates(
    conn: &mut AsyncPgConnection,
    caller: &Caller,
    policy: &Policy,
    terms: &GrantTerms,
    want: i64,
    granted: &mut Vec<ClaimedJob>,
) -> Result<Judged, StoreError> {
    let started = std::time::Instant::now();
    let runtime_id = terms.runtime_id;
    let agent_id = caller.identity_id;
    let unrestricted = caller.rooms.is_none();
    let allowed_rooms = caller.rooms.clone().unwrap_or_default();
    let mut examined: i64 = 0;
    let mut batch = want * 2 + 8;
    // Jobs whose message could not be read: never looked at twice.
    let mut passed_over: Vec<Uuid> = Vec::new();
    while want > granted.len() as i64 {
        if examined >= CANDIDATE_BUDGET || started.elapsed() >= CLAIM_TIME_BUDGET {
            return Ok(Judged {
                unexamined_left: true,
            });
        }
        // Lock only job rows (SKIP LOCKED: another claimer's jobs are
        // passed over), then read the messages they point at.
        let locked: Vec<(Uuid, String, Uuid, Uuid)> = jobs::table
            .filter(jobs::runtime_id.eq(runtime_id))
            .filter(
                jobs::room_id
                    .eq_any(&allowed_rooms)
                    .or(unrestricted.into_sql::<diesel::sql_types::Bool>()),
            )
            .filter(jobs::state.eq("pending"))
            .filter(
                jobs::not_before
                    .is_null()
                    .or(jobs::not_before.le(terms.now)),
            )
            .filter(jobs::id.ne_all(&passed_over))
            .order((jobs::created_at, jobs::id))
            .limit(batch)
            .select((jobs::id, jobs::job_key, jobs::room_id, jobs::message_id))
            .for_update()
            .skip_locked()
            .load(conn)
            .await?;
        let full = locked.len() as i64 == batch;
        examined += locked.len() as i64;
        let candidates = candidate_facts(conn, agent_id, locked, &mut passed_over).await?;
        let mut skips: Vec<(&'static str, &Candidate)> = Vec::new();
        let mut judged = 0;
        for (candidate, member) in &candidates {
            if want <= granted.len() as i64 {
                break;
            }
            judged += 1;
            if let Some(reason) = refusal(policy, agent_id, *member, candidate, terms.now) {
                skips.push((reason, candidate));
                continue;
            }
            granted.push(grant(conn, terms, candidate).await?);
        }
        skip_jobs(conn, runtime_id, &skips).await?;
        if judged < candidates.len() {
            // `want` was met with candidates of this batch left over.
            return Ok(Judged {
                unexamined_left: true,
            });
        }
        if !full {
            return Ok(Judged {
                unexamined_left: false,
            });
        }
        batch = (batch * 2).min(MAX_BATCH);
    }
    // `want` was met exactly at the end of a full batch: more may wait.
    Ok(Judged {
        unexamined_left: want > 0,
    })
}

/// The locked jobs as candidates, each with whether the agent is still a
/// member of its room (one query for the whole batch).
async fn candidate_facts(
    conn: &mut AsyncPgConnection,
    agent_id: Uuid,
    locked: Vec<(Uuid, String, Uuid, Uuid)>,
    passed_over: &mut Vec<Uuid>,
) -> Result<Vec<(Candidate, bool)>, StoreError> {
    if locked.is_empty() {
        return Ok(Vec::new());
    }
    let message_ids: Vec<Uuid> = locked.iter().map(|(_, _, _, m)| *m).collect();
    let room_ids: Vec<Uuid> = locked.iter().map(|(_, _, r, _)| *r).collect();
    type Facts = (Uuid, Uuid, Uuid, String, bool, bool, Option<OffsetDateTime>);
    // A message id is unique only within its room: facts are keyed by both.
    let facts: Vec<Facts> = messages::table
        .inner_join(identities::table.on(identities::id.eq(messages::sender_id)))
        .filter(messages::room_id.eq_any(&room_ids))
        .filter(messages::id.eq_any(&message_ids))
        .select((
            messages::room_id,
            messages::id,
            messages::sender_id,
            identities::number,
            messages::ask,
            messages::by_runtime,
            messages::deadline,
        ))
        .load(conn)
        .await?;
    let facts: HashMap<(Uuid, Uuid), Facts> = facts.into_iter().map(|f| ((f.0, f.1), f)).collect();
    let member_of: HashSet<Uuid> = room_members::table
        .filter(room_members::room_id.eq_any(&room_ids))
        .filter(room_members::identity_id.eq(agent_id))
        .filter(room_members::left_at.is_null())
        .select(room_members::room_id)
        .load::<Uuid>(conn)
        .await?
        .into_iter()
        .collect();
    // Senders the agent has blocked or who blocked the agent: a block
    // reaches group rooms the two still share.
    let sender_ids: Vec<Uuid> = facts.values().map(|f| f.2).collect();
    let blocked: HashSet<Uuid> = blocks::table
        .filter(
            blocks::blocker_id
                .eq(agent_id)
                .and(blocks::blocked_id.eq_any(&sender_ids))
                .or(blocks::blocked_id
                    .eq(agent_id)
                    .and(blocks::blocker_id.eq_any(&sender_ids))),
        )
        .select((blocks::blocker_id, blocks::blocked_id))
        .load::<(Uuid, Uuid)>(conn)
        .await?
        .into_iter()
        .map(|(blocker, blocked)| {
            if blocker == agent_id {
                blocked
            } else {
                blocker
            }
        })
        .collect();
    let mut out = Vec::with_capacity(locked.len());
    for (id, job_key, room_id, message_id) in locked {
        let Some((_, _, sender_id, sender_number, ask, by_runtime, deadline)) =
            facts.get(&(room_id, message_id)).cloned()
        else {
            passed_over.push(id);
            continue;
        };
        let candidate = Candidate {
            id,
            job_key,
            room_id,
            message_id,
            sender_id,
            sender_number,
            ask,
            by_runtime,
            deadline,
            sender_blocked: blocked.contains(&sender_id),
        };
        out.push((candidate, member_of.contains(&room_id)));
    }
    Ok(out)
}

/// Records policy refusals as skips: one update per reason, one log insert.
async fn skip_jobs(
    conn: &mut AsyncPgConnection,
    runtime_id: Uuid,
    skips: &[(&'static str, &Candidate)],
) -> Result<(), StoreError> {
    if skips.is_empty() {
        return Ok(());
    }
    let mut by_reason: HashMap<&'static str, Vec<Uuid>> = HashMap::new();
    for (reason, candidate) in skips {
        by_reason.entry(reason).or_default().push(candidate.id);
    }
    for (reason, ids) in by_reason {
        diesel::update(jobs::table.filter(jobs::id.eq_any(ids)))
            .set((
                jobs::state.eq("skipped"),
                jobs::reason.eq(reason),
                jobs::updated_at.eq(diesel::dsl::now),
            ))
            .execute(conn)
            .await?;
    }
    let records: Vec<(&str, Uuid, Uuid, serde_json::Value)> = skips
        .iter()
        .map(|(reason, c)| {
            (
                c.job_key.as_str(),
                c.room_id,
                c.message_id,
                json!({"reason": reason}),
            )
        })
        .collect();
    log_jobs(conn, runtime_id, "skipped", &records).await
}

/// When an idle claim could succeed without a new signal.
#[allow(clippy::too_many_arguments)]
async fn retry_time(
    conn: &mut AsyncPgConnection,
    runtime_id: Uuid,
    policy: &Policy,
    now: OffsetDateTime,
    free: i64,
    remaining: i64,
    window_start: OffsetDateTime,
    look_again_now: bool,
) -> Result<Option<OffsetDateTime>, StoreError> {
    let mut candidates: Vec<OffsetDateTime> = Vec::new();
    if look_again_now {
        candidates.push(now);
    }
    let lease_expiry: Option<OffsetDateTime> = jobs::table
        .filter(jobs::runtime_id.eq(runtime_id))
        .filter(jobs::state.eq("claimed"))
        .select(diesel::dsl::min(jobs::lease_expires_at))
        .first(conn)
        .await?;
    candidates.extend(lease_expiry);
    let pending: i64 = jobs::table
        .filter(jobs::runtime_id.eq(runtime_id))
        .filter(jobs::state.eq("pending"))
        .count()
        .get_result(conn)
        .await?;
    if pending > 0 && free > 0 {
        if !policy.is_active_at(now) {
            candidates.extend(policy.next_active_start(now));
        } else if remaining <= 0 {
            let oldest: Option<OffsetDateTime> = budget_units::table
                .filter(budget_units::runtime_id.eq(runtime_id))
                .filter(budget_units::granted_at.gt(window_start))
                .select(diesel::dsl::min(budget_units::granted_at))
                .first(conn)
                .await?;
            candidates.extend(oldest.map(|t| t + Duration::hours(1)));
        } else {
            let backoff: Option<OffsetDateTime> = jobs::table
                .filter(jobs::runtime_id.eq(runtime_id))
                .filter(jobs::state.eq("pending"))
                .filter(jobs::not_before.gt(now))
                .select(diesel::dsl::min(jobs::not_before))
                .first(conn)
                .await?;
            candidates.extend(backoff);
        }
    }
    Ok(candidates.into_iter().min())
}
