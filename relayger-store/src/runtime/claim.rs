//! Claims: scan, judge and grant under the runtime's row lock.
//!
//! Claims of one runtime are serialised by its row lock, which makes the
//! concurrency cap and the hourly budget exact across processes. A claim is
//! a bounded number of statements whatever its batch size: the lock, the
//! expiry check (and one write when leases expired), one state read (the
//! database clock, active leases, the budget window), the set-based scan
//! (two statements), one candidate read per round (rounds only repeat past
//! refusals, within a candidate and time budget), one write for every grant
//! and skip with their attempts, budget units and log records, and for an
//! idle answer one read for `retryAt`. Statements that do not need each
//! other's answers are pipelined (diesel-async: sent in one flight, run in
//! order). A claim is then two flights: `BEGIN` with the lock, the expiry
//! check, the state read, the scan and the first candidate round; the
//! grants with `COMMIT` (a pipelined transaction,
//! [`crate::pool::PooledConnection::pipelined_transaction`]). Only expired
//! leases and a run of refusals add flights.
//! The rules are the core's: `Policy::judge` per candidate, `ClaimStop` for
//! `morePending`.

use std::collections::HashMap;
use std::sync::LazyLock;

use diesel::prelude::*;
use diesel::sql_types::{Array, BigInt, Bool, Nullable, Text, Timestamptz};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use relayger_core::ErrorCode;
use relayger_core::claim_rule::ClaimStop;
use relayger_core::handler_timeout::handler_timeout_ms;
use relayger_core::lease::{LeaseOwner, LeaseVersion};
use relayger_core::limits::{JOBS_PER_ROOM, claim_size};
use relayger_core::policy::{JobFacts, MessageFacts, Policy, SkipReason};
use relayger_core::wire::{ClaimResponse, ClaimedJob, MessageEnvelope, Timestamp};
use serde_json::json;
use time::{Duration, OffsetDateTime};
use uuid::Uuid;

use super::granted::JobPlace;
use super::{lease, scan, with_states};
use crate::messages::MessageWithSender;
use crate::pause::{PausePoint, pause};
use crate::pool::{begin, commit_after};
use crate::prepared::CachedExt;
use crate::{Caller, Store, StoreError};

/// Candidate jobs one claim may judge (skips included) before it answers
/// `morePending` instead of going on.
const CANDIDATE_BUDGET: i64 = 4096;
/// Wall-clock time one claim may spend judging candidates.
const CLAIM_TIME_BUDGET: std::time::Duration = std::time::Duration::from_millis(250);
/// The most jobs locked in one candidate round.
const MAX_BATCH: i64 = 512;
/// Candidates the first round locks beyond the jobs wanted.
const FIRST_ROUND_MARGIN: i64 = 8;

#[derive(QueryableByName)]
struct ClaimState {
    #[diesel(sql_type = Timestamptz)]
    now: OffsetDateTime,
    #[diesel(sql_type = BigInt)]
    active: i64,
    #[diesel(sql_type = BigInt)]
    budget_last: i64,
    #[diesel(sql_type = BigInt)]
    budget_before_window: i64,
}

/// The database clock, the active leases (at most the concurrency cap, a
/// partial-index range) and the budget window as two index lookups: each
/// unit carries the runtime's running grant count (`seq`), so the units of
/// the rolling hour are the newest `seq` minus the newest `seq` before it.
static CLAIM_STATE: LazyLock<String> = LazyLock::new(|| {
    with_states(
        "SELECT now() AS now,
             (SELECT count(*) FROM jobs WHERE runtime_id = $1 AND state = {claimed}) AS active,
             COALESCE((SELECT seq FROM budget_units WHERE runtime_id = $1
                       ORDER BY seq DESC LIMIT 1), 0) AS budget_last,
             COALESCE((SELECT seq FROM budget_units WHERE runtime_id = $1
                       AND granted_at <= now() - interval '1 hour'
                       ORDER BY granted_at DESC, seq DESC LIMIT 1), 0) AS budget_before_window",
    )
});

/// [`CLAIM_STATE`] for the runtime; pipelines like
/// [`lease::expired_leases`].
fn claim_state(
    mut conn: &AsyncPgConnection,
    runtime_id: Uuid,
) -> impl std::future::Future<Output = QueryResult<ClaimState>> + Send + '_ {
    diesel::sql_query(CLAIM_STATE.as_str())
        .bind::<diesel::sql_types::Uuid, _>(runtime_id)
        .cached()
        .get_result(&mut conn)
}

/// The agent's runtime row, locked as [`owned_runtime`] locks it
/// (`NotFound` when it is not the agent's); pipelines like
/// [`lease::expired_leases`].
fn owned_runtime_locked(
    mut conn: &AsyncPgConnection,
    agent_id: Uuid,
    runtime_id: Uuid,
) -> impl std::future::Future<Output = QueryResult<super::RuntimeRow>> + Send + '_ {
    crate::schema::runtimes::table
        .filter(crate::schema::runtimes::id.eq(runtime_id))
        .filter(crate::schema::runtimes::agent_id.eq(agent_id))
        .select(super::RuntimeRow::as_select())
        .for_no_key_update()
        .first(&mut conn)
}

/// Makes the rest of the claim's transaction use generic plans for its
/// prepared statements. PostgreSQL plans a prepared statement afresh for its
/// parameters the first five times and keeps the generic plan only while it
/// looks no dearer than those; for a statement that takes an array
/// (`unnest($1)`), the generic plan guesses the array far longer than the
/// few elements a claim passes, looks several times dearer, and the
/// statement is re-planned on every claim (a third of a millisecond of planning a question in
/// `bench p1`). Every claim statement is a primary-key or index lookup whose
/// right plan does not depend on the values, so the generic plan is the one
/// wanted. `SET LOCAL` ends with the transaction, so it holds through a
/// transaction pooler too; it travels in the claim's first flight, so it
/// costs no round trip.
fn generic_plans(
    mut conn: &AsyncPgConnection,
) -> impl std::future::Future<Output = QueryResult<usize>> + Send + '_ {
    diesel::sql_query("SET LOCAL plan_cache_mode = force_generic_plan")
        .cached()
        .execute(&mut conn)
}

/// A locked pending job with its message and what the policy needs.
#[derive(QueryableByName)]
struct CandidateRow {
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    job_id: Uuid,
    #[diesel(sql_type = Text)]
    job_key: String,
    #[diesel(sql_type = Timestamptz)]
    job_created_at: OffsetDateTime,
    #[diesel(sql_type = Bool)]
    member: bool,
    #[diesel(sql_type = Bool)]
    sender_blocked: bool,
    #[diesel(embed)]
    message: MessageWithSender,
}

/// One round of candidates, oldest first after the last one seen, locked
/// (SKIP LOCKED: another claimer's jobs are passed over) with their
/// message, whether the agent is still a member of the room and whether the
/// agent and the sender have blocked one another (a block reaches group
/// rooms the two still share). The first round is sent before the claim
/// knows the policy and the active leases, so with `$7` it takes at most
/// `$7` more than the runtime's free lease slots, and none when there are
/// none ([`first_round_limit`]): a claim of a runtime at its cap locks
/// nothing.
static CANDIDATES: LazyLock<String> = LazyLock::new(|| {
    with_states(
        "SELECT j.id AS job_id, j.job_key, j.created_at AS job_created_at,
             EXISTS (SELECT 1 FROM room_members rm WHERE rm.room_id = j.room_id
                     AND rm.identity_id = $2 AND rm.left_at IS NULL) AS member,
             EXISTS (SELECT 1 FROM blocks b
                     WHERE (b.blocker_id = $2 AND b.blocked_id = m.sender_id)
                        OR (b.blocked_id = $2 AND b.blocker_id = m.sender_id)) AS sender_blocked,
             m.id, m.room_id, m.seq, m.sender_id, m.text, m.sealed, m.ask, m.deadline,
             m.reply_to, m.by_runtime, m.created_at, i.number, i.kind
         FROM jobs j
         JOIN messages m ON m.room_id = j.room_id AND m.id = j.message_id
         JOIN identities i ON i.id = m.sender_id
         WHERE j.runtime_id = $1 AND j.state = {pending}
           AND (j.not_before IS NULL OR j.not_before <= now())
           AND ($3::uuid[] IS NULL OR j.room_id = ANY($3::uuid[]))
           AND ($4::timestamptz IS NULL OR (j.created_at, j.id) > ($4::timestamptz, $5::uuid))
         ORDER BY j.created_at, j.id
         LIMIT (SELECT CASE WHEN $7::bigint IS NULL THEN $6
                            WHEN free.n <= 0 THEN 0
                            ELSE LEAST($6, free.n + $7) END
                FROM (SELECT (SELECT (policy->>'concurrency')::bigint FROM runtimes WHERE id = $1)
                             - (SELECT count(*) FROM jobs
                                WHERE runtime_id = $1 AND state = {claimed}) AS n) free)
         FOR UPDATE OF j SKIP LOCKED",
    )
});

#[derive(QueryableByName)]
struct GrantedRow {
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    id: Uuid,
    #[diesel(sql_type = diesel::sql_types::Integer)]
    attempts: i32,
    #[diesel(sql_type = BigInt)]
    lease_version: i64,
}

/// Every grant and skip of the claim in one statement: the job rows, one
/// attempt and one budget unit per grant, and the log records. The jobs
/// are found by `j.id = ANY($2)` as well as by the join: the generic plan
/// guesses `unnest` at ten rows, and with only the join it hashed them
/// against a sequential scan of every job of every runtime while the table
/// held about a thousand rows (0.29 ms a claim in `bench p1`, growing with
/// the table); with it, the primary key finds them at any size.
pub(super) static GRANT_AND_SKIP: LazyLock<String> = LazyLock::new(|| {
    with_states(
        "WITH input AS (
             SELECT * FROM unnest($2::uuid[], $3::text[], $4::text[]) AS t(id, owner, reason)
         ),
         granted AS (
             UPDATE jobs j SET state = {claimed}, attempts = j.attempts + 1,
                 lease_owner = input.owner, lease_version = nextval('lease_version_seq'),
                 lease_expires_at = now() + $5::bigint * interval '1 millisecond',
                 not_before = NULL, updated_at = now()
             FROM input WHERE j.id = input.id AND j.id = ANY($2::uuid[]) AND input.owner IS NOT NULL
             RETURNING j.id, j.job_key, j.room_id, j.message_id, j.attempts, j.lease_owner,
                       j.lease_version
         ),
         skipped AS (
             UPDATE jobs j SET state = {skipped}, reason = input.reason, updated_at = now()
             FROM input WHERE j.id = input.id AND j.id = ANY($2::uuid[]) AND input.reason IS NOT NULL
             RETURNING j.job_key, j.room_id, j.message_id, input.reason
         ),
         new_attempts AS (
             INSERT INTO attempts (job_id, runtime_id, attempt, lease_owner, lease_version)
             SELECT id, $1, attempts, lease_owner, lease_version FROM granted
         ),
         stamp AS (SELECT clock_timestamp() AS at),
         units AS (
             INSERT INTO budget_units (runtime_id, seq, granted_at)
             SELECT $1, $6 + row_number() OVER (ORDER BY g.lease_version), stamp.at
             FROM granted g CROSS JOIN stamp
         ),
         logged AS (
             INSERT INTO runtime_log (runtime_id, kind, job_key, room_id, message_id, detail)
             SELECT $1, 'claimed', job_key, room_id, message_id,
                    jsonb_build_object('attempt', attempts,
                                       'version', lpad(lease_version::text, 20, '0'))
             FROM granted
             UNION ALL
             SELECT $1, 'skipped', job_key, room_id, message_id,
                    jsonb_build_object('reason', reason)
             FROM skipped
         )
         SELECT id, attempts, lease_version FROM granted",
    )
});

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

/// What an idle claim needs for `retryAt`: the next lease expiry, whether
/// anything is pending, the oldest unit in the budget window (by its
/// `seq`), the next backoff end.
static IDLE_FACTS: LazyLock<String> = LazyLock::new(|| {
    with_states(
        "SELECT
             (SELECT min(lease_expires_at) FROM jobs
              WHERE runtime_id = $1 AND state = {claimed}) AS lease_expiry,
             EXISTS (SELECT 1 FROM jobs WHERE runtime_id = $1 AND state = {pending}) AS pending,
             (SELECT granted_at FROM budget_units WHERE runtime_id = $1 AND seq = $2) AS oldest_unit,
             (SELECT min(not_before) FROM jobs
              WHERE runtime_id = $1 AND state = {pending} AND not_before > now()) AS backoff",
    )
});

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
                let first_batch = first_batch(max_jobs);
                let contact_requests = async {
                    match count_contact_requests {
                        true => crate::contacts::pending_request_count(shared, agent_id)
                            .await
                            .map(Some),
                        false => Ok(None),
                    }
                };
                let (begun, _, row, expired, mut state, contact_requests, more_to_scan, first) =
                    futures_util::try_join!(
                        begin(shared),
                        generic_plans(shared),
                        owned_runtime_locked(shared, agent_id, runtime_id),
                        lease::expired_leases(shared, runtime_id, agent_id),
                        claim_state(shared, runtime_id),
                        contact_requests,
                        scan::scan(shared, runtime_id, agent_id),
                        candidates(shared, runtime_id, &caller, None, first_batch, true),
                    )
                    .map_err(|err| match err {
                        diesel::result::Error::NotFound => StoreError::not_found("no such runtime"),
                        err => err.into(),
                    })?;
                pause(PausePoint::ScanAfterMembership, runtime_id).await;
                let policy = row.policy()?;
                let mut first = Some(FirstRound {
                    limit: first_round_limit(first_batch, &policy, state.active),
                    rows: first,
                });
                if !expired.is_empty() {
                    lease::end_expired(conn, runtime_id, &policy, &expired).await?;
                    // The ended leases are no longer active, and their jobs,
                    // pending again, come before the first round's.
                    state = claim_state(conn, runtime_id).await?;
                    first = None;
                }
                let now = state.now;

                let free = i64::from(policy.concurrency) - state.active;
                let used = state.budget_last - state.budget_before_window;
                let remaining = i64::from(policy.max_calls_per_hour) - used;
                let active_now = policy.is_active_at(now);
                let mut want = i64::from(claim_size(max_jobs)).min(free).min(remaining);
                if !active_now {
                    want = 0;
                }

                let judged = judge_candidates(
                    conn,
                    first,
                    Round {
                        runtime_id,
                        caller: &caller,
                        policy: &policy,
                        now,
                    },
                    want,
                )
                .await?;
                // The last flight: the grants and skips, the idle facts when
                // nothing is granted, and `COMMIT`.
                let shared: &AsyncPgConnection = conn;
                let idle = judged.grants.is_empty();
                let terms = GrantTerms {
                    requested_timeout_ms,
                    lease_ms,
                    now,
                    budget_last: state.budget_last,
                };
                let committed = commit_after(shared, begun, async {
                    futures_util::try_join!(
                        grant_and_skip(shared, runtime_id, &judged, terms),
                        async {
                            match idle {
                                true => {
                                    idle_facts(shared, runtime_id, state.budget_before_window + 1)
                                        .await
                                        .map(Some)
                                        .map_err(StoreError::from)
                                }
                                false => Ok(None),
                            }
                        },
                    )
                })
                .await?;
                Ok(committed.map(|(granted, idle)| {
                    let stop = ClaimStop {
                        requested: max_jobs.max(1),
                        grantable: if active_now { free.min(remaining) } else { 0 },
                        granted: u32::try_from(granted.len()).unwrap_or(u32::MAX),
                        work_left: judged.unexamined_left || more_to_scan,
                    };
                    let mut work_left = stop.work_left;
                    let retry_at = idle.and_then(|idle| {
                        work_left |= idle.pending;
                        retry_time(
                            &idle,
                            &policy,
                            now,
                            free,
                            remaining,
                            more_to_scan || stop.more_pending(),
                        )
                    });
                    Claimed {
                        response: ClaimResponse {
                            jobs: granted,
                            retry_at: retry_at.map(Timestamp),
                            lease_ms,
                            more_pending: stop.more_pending(),
                            work_left,
                        },
                        contact_requests,
                    }
                }))
            })
            .await?;
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

/// [`IDLE_FACTS`] for the runtime, the budget window's oldest unit being
/// `oldest_seq`; pipelines like [`lease::expired_leases`].
fn idle_facts(
    mut conn: &AsyncPgConnection,
    runtime_id: Uuid,
    oldest_seq: i64,
) -> impl std::future::Future<Output = QueryResult<IdleFacts>> + Send + '_ {
    diesel::sql_query(IDLE_FACTS.as_str())
        .bind::<diesel::sql_types::Uuid, _>(runtime_id)
        .bind::<BigInt, _>(oldest_seq)
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

/// What a grant needs besides the candidate.
#[derive(Clone, Copy)]
struct GrantTerms {
    requested_timeout_ms: Option<u64>,
    lease_ms: u64,
    now: OffsetDateTime,
    /// The runtime's running grant count so far (the newest unit's `seq`).
    budget_last: i64,
}

/// The candidates a claim judged.
struct Judged {
    /// To grant, oldest first, each with its message.
    grants: Vec<(CandidateRow, MessageEnvelope)>,
    /// Refused by the policy.
    skips: Vec<(CandidateRow, SkipReason)>,
    /// Pending jobs may remain that this claim did not grant or refuse (the
    /// budget ran out, `want` was met, the last round was full, or the
    /// per-room spread passed some over).
    unexamined_left: bool,
}

/// What every candidate round of one claim shares.
#[derive(Clone, Copy)]
struct Round<'a> {
    runtime_id: Uuid,
    caller: &'a Caller,
    policy: &'a Policy,
    now: OffsetDateTime,
}

/// One round of [`CANDIDATES`] after `after`, at most `batch` (and for the
/// `first` round at most [`FIRST_ROUND_MARGIN`] more than the free lease
/// slots); pipelines like [`lease::expired_leases`].
fn candidates<'a>(
    mut conn: &'a AsyncPgConnection,
    runtime_id: Uuid,
    caller: &Caller,
    after: Option<(OffsetDateTime, Uuid)>,
    batch: i64,
    first: bool,
) -> impl std::future::Future<Output = QueryResult<Vec<CandidateRow>>> + Send + 'a {
    diesel::sql_query(CANDIDATES.as_str())
        .bind::<diesel::sql_types::Uuid, _>(runtime_id)
        .bind::<diesel::sql_types::Uuid, _>(caller.identity_id)
        .bind::<Nullable<Array<diesel::sql_types::Uuid>>, _>(caller.rooms.clone())
        .bind::<Nullable<Timestamptz>, _>(after.map(|(at, _)| at))
        .bind::<Nullable<diesel::sql_types::Uuid>, _>(after.map(|(_, id)| id))
        .bind::<BigInt, _>(batch)
        .bind::<Nullable<BigInt>, _>(first.then_some(FIRST_ROUND_MARGIN))
        .cached()
        .load(&mut conn)
}

/// The first candidate round's size: the jobs asked for (as the claim
/// will grant at most) and a few more for refusals.
fn first_batch(max_jobs: u32) -> i64 {
    (i64::from(claim_size(max_jobs)) + FIRST_ROUND_MARGIN).min(MAX_BATCH)
}

/// The most rows the first round took, as its statement computed it from
/// the same policy and active leases: a round that took this many is full.
fn first_round_limit(first_batch: i64, policy: &Policy, active: i64) -> i64 {
    match i64::from(policy.concurrency) - active {
        free if free <= 0 => 0,
        free => first_batch.min(free + FIRST_ROUND_MARGIN),
    }
}

/// The first candidate round, read in the claim's first flight.
struct FirstRound {
    rows: Vec<CandidateRow>,
    /// The most rows it could have taken.
    limit: i64,
}

/// Locks pending jobs oldest first in growing rounds — the `first` read
/// in the claim's first flight, or none when it no longer counts — and
/// judges them under the current policy (`Policy::judge`): refusals become
/// skips, the rest are granted until `want` is met, at most
/// [`JOBS_PER_ROOM`] a room. Keeps going past refusals until the candidate
/// or time budget is spent, so a run of skips never leaves a real question
/// for a later claim.
async fn judge_candidates(
    conn: &mut AsyncPgConnection,
    mut first: Option<FirstRound>,
    round: Round<'_>,
    want: i64,
) -> Result<Judged, StoreError> {
    let mut judged = Judged {
        grants: Vec::new(),
        skips: Vec::new(),
        unexamined_left: false,
    };
    if want <= 0 {
        // The first round's rows stay pending (locked until the commit).
        return Ok(judged);
    }
    let want = usize::try_from(want).unwrap_or(usize::MAX);
    let started = std::time::Instant::now();
    let agent_id = round.caller.identity_id;
    let mut per_room: HashMap<Uuid, usize> = HashMap::new();
    let mut after: Option<(OffsetDateTime, Uuid)> = None;
    let mut examined: i64 = 0;
    // Every candidate of a round is locked (a write per row) until the
    // claim commits, so a round takes only a few more than wanted: a run
    // of refusals or full rooms goes on to a larger round.
    let mut batch = (i64::try_from(want).unwrap_or(MAX_BATCH) + FIRST_ROUND_MARGIN).min(MAX_BATCH);
    loop {
        let (rows, full) = match first.take() {
            Some(FirstRound { rows, limit }) => {
                batch = batch.max(limit);
                let full = rows.len() as i64 >= limit;
                (rows, full)
            }
            None => {
                if examined >= CANDIDATE_BUDGET || started.elapsed() >= CLAIM_TIME_BUDGET {
                    judged.unexamined_left = true;
                    return Ok(judged);
                }
                let rows =
                    candidates(conn, round.runtime_id, round.caller, after, batch, false).await?;
                let full = rows.len() as i64 == batch;
                (rows, full)
            }
        };
        examined += rows.len() as i64;
        let mut rows = rows.into_iter();
        for row in rows.by_ref() {
            after = Some((row.job_created_at, row.job_id));
            let message = row.message.clone().envelope();
            let facts = JobFacts {
                member: row.member,
                sender_blocked: row.sender_blocked,
                room_id: message.conversation_id,
                sender: Some(message.sender.number.clone()),
                message: MessageFacts {
                    from_self: message.sender.id == agent_id,
                    ask: message.ask,
                    by_runtime: message.by_runtime,
                },
                deadline: message.deadline.map(|deadline| deadline.0),
            };
            if let Err(reason) = round.policy.judge(&facts, round.now) {
                judged.skips.push((row, reason));
                continue;
            }
            let in_room = per_room.entry(message.conversation_id).or_default();
            if *in_room >= JOBS_PER_ROOM {
                // Left pending (and locked until this claim commits).
                judged.unexamined_left = true;
                continue;
            }
            *in_room += 1;
            judged.grants.push((row, message));
            if judged.grants.len() >= want {
                break;
            }
        }
        if judged.grants.len() >= want {
            // `want` was met: candidates of this round left over, or a full
            // round, mean more may wait.
            judged.unexamined_left |= rows.next().is_some() || full;
            return Ok(judged);
        }
        if !full {
            return Ok(judged);
        }
        batch = (batch * 2).min(MAX_BATCH);
    }
}

/// Writes the claim's grants and skips in one statement and answers the
/// granted jobs in candidate order. Nothing to write: no statement. The
/// statement is sent when the future is first polled, so it pipelines with
/// the claim's `COMMIT`; its check that every locked candidate was granted
/// (it cannot fail while the rows are locked) therefore answers after the
/// commit, and such jobs would come back when their leases expire.
async fn grant_and_skip(
    mut conn: &AsyncPgConnection,
    runtime_id: Uuid,
    judged: &Judged,
    terms: GrantTerms,
) -> Result<Vec<ClaimedJob>, StoreError> {
    if judged.grants.is_empty() && judged.skips.is_empty() {
        return Ok(Vec::new());
    }
    let count = judged.grants.len() + judged.skips.len();
    let mut ids = Vec::with_capacity(count);
    let mut owners: Vec<Option<String>> = Vec::with_capacity(count);
    let mut reasons: Vec<Option<&str>> = Vec::with_capacity(count);
    let mut granted_owners = HashMap::with_capacity(judged.grants.len());
    for (row, _) in &judged.grants {
        let owner = LeaseOwner::generate()
            .map_err(|e| StoreError::rejected(ErrorCode::Internal, e.to_string()))?;
        ids.push(row.job_id);
        owners.push(Some(owner.as_str().to_owned()));
        reasons.push(None);
        granted_owners.insert(row.job_id, owner);
    }
    for (row, reason) in &judged.skips {
        ids.push(row.job_id);
        owners.push(None);
        reasons.push(Some(reason.as_str()));
    }
    let lease_ms = i64::try_from(terms.lease_ms).unwrap_or(i64::MAX);
    let rows: Vec<GrantedRow> = diesel::sql_query(GRANT_AND_SKIP.as_str())
        .bind::<diesel::sql_types::Uuid, _>(runtime_id)
        .bind::<Array<diesel::sql_types::Uuid>, _>(&ids)
        .bind::<Array<Nullable<Text>>, _>(&owners)
        .bind::<Array<Nullable<Text>>, _>(&reasons)
        .bind::<BigInt, _>(lease_ms)
        .bind::<BigInt, _>(terms.budget_last)
        .cached()
        .load(&mut conn)
        .await?;
    for (_, reason) in &judged.skips {
        crate::metrics::runtime_event("skipped", &json!({"reason": reason.as_str()}), true);
    }
    let mut rows: HashMap<Uuid, GrantedRow> = rows.into_iter().map(|r| (r.id, r)).collect();
    let mut granted = Vec::with_capacity(judged.grants.len());
    for (row, message) in &judged.grants {
        let (Some(done), Some(owner)) =
            (rows.remove(&row.job_id), granted_owners.remove(&row.job_id))
        else {
            return Err(StoreError::rejected(
                ErrorCode::Internal,
                "a locked candidate was not granted",
            ));
        };
        let version = LeaseVersion(u64::try_from(done.lease_version).unwrap_or(0));
        crate::metrics::runtime_event(
            "claimed",
            &json!({"attempt": done.attempts, "version": version.to_string()}),
            false,
        );
        let deadline_remaining = message.deadline.map(|deadline| {
            i64::try_from((deadline.0 - terms.now).whole_milliseconds()).unwrap_or(i64::MAX)
        });
        granted.push(ClaimedJob {
            job_id: row.job_id,
            job_key: row.job_key.clone(),
            attempt: u32::try_from(done.attempts).unwrap_or(0),
            owner,
            version,
            lease_ms: terms.lease_ms,
            handler_timeout_ms: handler_timeout_ms(terms.requested_timeout_ms, deadline_remaining),
            message: message.clone(),
        });
    }
    Ok(granted)
}

/// When an idle claim could succeed without a new signal.
fn retry_time(
    idle: &IdleFacts,
    policy: &Policy,
    now: OffsetDateTime,
    free: i64,
    remaining: i64,
    look_again_now: bool,
) -> Option<OffsetDateTime> {
    let mut candidates: Vec<OffsetDateTime> = Vec::new();
    if look_again_now {
        candidates.push(now);
    }
    candidates.extend(idle.lease_expiry);
    if idle.pending && free > 0 {
        if !policy.is_active_at(now) {
            candidates.extend(policy.next_active_start(now));
        } else if remaining <= 0 {
            candidates.extend(idle.oldest_unit.map(|t| t + Duration::hours(1)));
        } else {
            candidates.extend(idle.backoff);
        }
    }
    candidates.into_iter().min()
}
