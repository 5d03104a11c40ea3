//! Finishing jobs: reply message + note + completion + usage in one
//! transaction, fenced by owner, version and expiry. A retry with the same
//! fingerprint returns the original outcome; another result is refused.
//!
//! One path for one finish and for a batch (`POST …/finishes`), in one
//! transaction whatever the batch size.
//!
//! **One statement a batch** (the usual case): when every job of the batch
//! completes (a reply, a skip or neither; no error, no note) and this
//! instance granted it, the server knows each job's room, message and key
//! ([`super::granted`]), so the whole batch is one statement
//! ([`sql::FINISH_BATCH`], one array element a job): the jobs' fences and
//! fenced updates, then, for the fenced ones, the attempts' ends (each the
//! log record and the job's completion), and the replies, their rooms
//! locked in id order and each bumped once by its number of replies.
//! `BEGIN`, the statement and `COMMIT` go in one flight: **one round trip
//! and one statement** whatever the batch size. A job whose fence matched
//! nothing wrote nothing and is then finished the long way, which tells
//! why.
//!
//! **The long way** (a failed attempt, a note, a job another instance
//! granted, or a fence that matched nothing):
//!
//! 1. per job, the fenced `UPDATE jobs … RETURNING` first: the one fence
//!    (`relayger_lease_fence`: this owner, this version, a lease unexpired
//!    by the database clock once the row is locked), and the agent still a
//!    member of the room. It locks the job row, so no
//!    claim can take the job until the transaction ends;
//! 2. per job, one statement writes the attempt's end, the log record and
//!    the job's completion (fingerprint, answer, reply) on the attempt;
//! 3. last, in room order, one statement per reply takes the room row lock
//!    (`last_seq`), inserts the message and the members'
//!    dirty marks. The room lock is held only for that insert and the commit.
//!
//! The statements are pipelined (diesel-async: sent together, run in
//! order): `BEGIN` and the fences of a batch in one flight, the ends, the
//! replies and `COMMIT` in a second, so a batch costs two round trips
//! whatever its size, unless a job needs a diagnosis or a failed
//! attempt's retry written between them.
//!
//! A reply that waited for its room's lock while the room's members changed
//! (a join, a leave, a `--from now` registration) would wake and mark the
//! members of its stale snapshot; it raises an error instead, which fails
//! the whole transaction, so the `COMMIT` already sent behind it ends it as
//! a rollback. A one-statement batch is then finished the long way; the
//! long way runs once more with the reply rooms locked before the replies
//! ([`RoomLocks::First`]).
//!
//! A job with a note is committed in a transaction of its own, its note
//! written after its reply (see [`commit_with_note`]).
//!
//! Only a job whose fenced update matched nothing is diagnosed (a retry of a
//! finish that committed, a lost lease, lost access, no such job), with one
//! read. A database error in a batch rolls it back and each job is then
//! committed on its own, so one job's failure is never another's.

use diesel::prelude::*;
use diesel::sql_types::{Array, BigInt, Jsonb, Nullable, Text, Uuid as SqlUuid};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use futures_util::future::try_join_all;
use relayger_core::ErrorCode;
use relayger_core::fingerprint::CompletionFingerprint;
use relayger_core::finish_route::FinishRoute;
use relayger_core::job::{AttemptOutcome, Completion, JobState, RuntimeEvent};
use relayger_core::lease::{HeldLease, LeaseFence, LeaseOwner, LeaseVersion};
use relayger_core::policy::Policy;
use relayger_core::wire::{FinishOutcome, FinishResponse, JobResult, Timestamp, Usage};
use serde_json::json;
use uuid::Uuid;

mod sql;

use self::sql::{
    DIAGNOSE, Diagnosis, FENCE_COMPLETE, FENCE_FAIL, FINISH_BATCH, Fenced, FinishedBatch,
    INSERT_REPLY, LOCK_ROOM, MEMBERS_CHANGED, RECORD_END, Wake,
};
use super::granted::{GrantedJobs, JobPlace};
use super::lease::{fail_job, is_canceled, job_canceled, lease_lost, version_i64};
use super::notes::write_note;
use crate::pool::{PooledConnection, begin, commit_after, in_one_flight};
use crate::prepared::CachedExt;
use crate::wake::Wakes;
use crate::{Caller, Store, StoreError};
use relayger_core::job::job_key;

/// One finish of a batch.
#[derive(Debug, Clone)]
pub struct JobFinishInput {
    pub job_id: Uuid,
    pub owner: LeaseOwner,
    pub version: LeaseVersion,
    pub result: JobResult,
}

fn record_usage(usage: Option<Usage>) -> (Option<i64>, Option<i64>, Option<i64>) {
    match usage {
        Some(u) => (
            Some(i64::try_from(u.model_calls).unwrap_or(i64::MAX)),
            Some(i64::try_from(u.input_tokens).unwrap_or(i64::MAX)),
            Some(i64::try_from(u.output_tokens).unwrap_or(i64::MAX)),
        ),
        None => (None, None, None),
    }
}

fn to_json<T: serde::Serialize>(value: &T) -> Result<serde_json::Value, StoreError> {
    serde_json::to_value(value)
        .map_err(|e| StoreError::rejected(ErrorCode::Internal, e.to_string()))
}

fn from_json<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> Result<T, StoreError> {
    serde_json::from_value(value)
        .map_err(|e| StoreError::rejected(ErrorCode::Internal, e.to_string()))
}

/// What the batch knows of the caller.
struct Finisher<'a> {
    caller: &'a Caller,
    runtime_id: Uuid,
}

/// A reply to insert once every job of the batch is fenced (its attempt's
/// end already names it).
struct PendingReply {
    room_id: Uuid,
    reply_to: Uuid,
    reply_message_id: Uuid,
    text: String,
}

/// A job the batch answers.
struct Done {
    response: FinishResponse,
    /// The attempt's end still to record (none for a replay).
    end: Option<EndRecord>,
    /// The reply still to insert.
    reply: Option<PendingReply>,
    /// The job's room when this transaction fenced it (not a replay): its
    /// note is written there.
    fenced_room: Option<Uuid>,
}

/// What one job of a batch comes to once its fence has answered: done
/// (finished now, or a retry's first answer), or refused with the rule's
/// answer (a lost lease, lost access, another result). A database error is
/// the whole transaction's, outside this.
enum Settled {
    Done(Box<Done>),
    Refused(StoreError),
}

impl Done {
    fn replayed(response: FinishResponse) -> Done {
        Done {
            response,
            end: None,
            reply: None,
            fenced_room: None,
        }
    }
}

/// How one job's attempt ends (`RECORD_END`), owned: it is sent with the
/// batch's last flight, after every job is fenced.
struct EndRecord {
    version: i64,
    /// The question's sender: its delivery changes.
    asker: Uuid,
    fingerprint: CompletionFingerprint,
    /// A failed attempt's answer, replayed to a retry with the same
    /// fingerprint (a completion's is made again from its outcome and reply).
    response: Option<serde_json::Value>,
    /// The reply the finish appends: (room, message).
    reply: Option<(Uuid, Uuid)>,
    outcome: AttemptOutcome,
    error: Option<String>,
    usage: Option<Usage>,
    log_kind: RuntimeEvent,
    /// What the metrics count the end by.
    detail: serde_json::Value,
}

/// A completed (not failed) job's state and reason.
fn completed_state(result: &JobResult) -> (JobState, Option<&str>) {
    match (&result.reply, &result.skip) {
        (None, Some(skip)) => (JobState::Skipped, Some(skip.as_str())),
        _ => (JobState::Handled, None),
    }
}

/// How a finish that completes its job (a reply, a skip or neither) ends.
struct Completed {
    /// The answer, with the reply's new message id.
    response: FinishResponse,
    /// The attempt's outcome.
    attempt_outcome: AttemptOutcome,
    /// The log record's kind.
    log_kind: RuntimeEvent,
}

impl Completed {
    fn of(result: &JobResult) -> Completed {
        let reply_message_id = result.reply.as_ref().map(|_| Uuid::now_v7());
        let (completion, log_kind) = match (&result.reply, &result.skip) {
            (Some(_), _) => (Completion::Replied, RuntimeEvent::Replied),
            (None, Some(_)) => (Completion::Skipped, RuntimeEvent::Skipped),
            // A completion without a reply is logged as `replied` with no
            // reply message id.
            (None, None) => (Completion::Handled, RuntimeEvent::Replied),
        };
        Completed {
            response: completion.answer(reply_message_id),
            attempt_outcome: completion.outcome(),
            log_kind,
        }
    }
}

impl Finisher<'_> {
    fn agent_id(&self) -> Uuid {
        self.caller.identity_id
    }

    /// The fenced update for one job (see the module documentation). The
    /// future does not borrow `conn` once made: the batch's fences are
    /// sent in one flight and run in order.
    fn fence<'a>(
        &self,
        mut conn: &'a AsyncPgConnection,
        input: &JobFinishInput,
        version: i64,
    ) -> impl std::future::Future<Output = QueryResult<Option<Fenced>>> + Send + 'a {
        let result = &input.result;
        // $1 job_id, $2 runtime_id, $3 agent_id, $4 owner, $5 version, $6 rooms
        // (both statements); $7 state, $8 reason (a completed job's).
        let query = diesel::sql_query(match &result.error {
            Some(_) => FENCE_FAIL,
            None => FENCE_COMPLETE,
        })
        .bind::<SqlUuid, _>(input.job_id)
        .bind::<SqlUuid, _>(self.runtime_id)
        .bind::<SqlUuid, _>(self.agent_id())
        .bind::<Text, _>(input.owner.as_str())
        .bind::<BigInt, _>(version)
        .bind::<Nullable<Array<SqlUuid>>, _>(self.caller.rooms.clone())
        .into_boxed();
        let query = match &result.error {
            Some(_) => query,
            None => {
                let (state, reason) = completed_state(result);
                query
                    .bind::<Text, _>(state.as_str())
                    .bind::<Nullable<Text>, _>(reason.map(str::to_owned))
            }
        };
        let fenced = query.cached().get_result(&mut conn);
        async move { fenced.await.optional() }
    }

    /// What the fence's answer means for one job: its response, the
    /// attempt's end and the reply still to write, or why it cannot be
    /// finished (a retry of a finish that committed gets its first answer
    /// here, as `Ok`). Only a failed attempt's retry or dead letter is
    /// written here, and a diagnosis read.
    async fn settle(
        &self,
        conn: &mut AsyncPgConnection,
        input: &JobFinishInput,
        version: i64,
        fenced: Option<Fenced>,
    ) -> Result<Settled, StoreError> {
        let result = &input.result;
        let result_value = to_json(result)?;
        let Some(job) = fenced else {
            return self.diagnose(conn, input, version, &result_value).await;
        };
        let key = job_key(self.runtime_id, job.room_id, job.message_id);
        let fingerprint = CompletionFingerprint::compute(&key, &input.owner, &result_value);
        let attempt_count: u32 = crate::error::stored("an attempt count", job.attempts)?;

        // How the attempt ends: the answer, the attempt's outcome, the log
        // record. An error finish's answer is kept for a retry to replay;
        // a finish without a reply completes now.
        let (response, attempt_outcome, kind, detail) = if let Some(error) = &result.error {
            let policy: Policy = from_json(job.policy)?;
            let retry_at = fail_job(
                conn,
                input.job_id,
                attempt_count,
                policy.max_attempts,
                error,
            )
            .await?;
            let (outcome, kind) = match retry_at {
                Some(_) => (FinishOutcome::Failed, RuntimeEvent::Failed),
                None => (FinishOutcome::DeadLetter, RuntimeEvent::DeadLetter),
            };
            let response = FinishResponse {
                outcome,
                reply_message_id: None,
                retry_at: retry_at.map(Timestamp),
            };
            let detail = json!({"attempt": attempt_count, "error": error});
            (response, AttemptOutcome::Failed, kind, detail)
        } else {
            let ending = Completed::of(result);
            let detail = json!({
                "attempt": attempt_count,
                "replyMessageId": ending.response.reply_message_id,
                "skip": result.skip,
            });
            (
                ending.response,
                ending.attempt_outcome,
                ending.log_kind,
                detail,
            )
        };
        let failed = result.error.is_some();
        let end = EndRecord {
            version,
            asker: job.asker,
            fingerprint,
            response: if failed {
                Some(to_json(&response)?)
            } else {
                None
            },
            reply: response
                .reply_message_id
                .map(|reply_message_id| (job.room_id, reply_message_id)),
            outcome: attempt_outcome,
            error: result.error.clone(),
            usage: result.usage,
            log_kind: kind,
            detail,
        };
        if failed {
            return Ok(Settled::Done(Box::new(Done {
                end: Some(end),
                ..Done::replayed(response)
            })));
        }
        let pending = match (&result.reply, response.reply_message_id) {
            (Some(text), Some(reply_message_id)) => Some(PendingReply {
                room_id: job.room_id,
                reply_to: job.message_id,
                reply_message_id,
                text: text.clone(),
            }),
            _ => None,
        };
        Ok(Settled::Done(Box::new(Done {
            response,
            end: Some(end),
            reply: pending,
            fenced_room: Some(job.room_id),
        })))
    }

    /// The answer for a job whose fenced update matched nothing. `Err` only
    /// for the whole request (no such runtime) or a database error.
    async fn diagnose(
        &self,
        conn: &mut AsyncPgConnection,
        input: &JobFinishInput,
        version: i64,
        result_value: &serde_json::Value,
    ) -> Result<Settled, StoreError> {
        let found: Diagnosis = diesel::sql_query(DIAGNOSE)
            .bind::<SqlUuid, _>(input.job_id)
            .bind::<SqlUuid, _>(self.runtime_id)
            .bind::<SqlUuid, _>(self.agent_id())
            .bind::<BigInt, _>(version)
            .cached()
            .get_result(conn)
            .await?;
        if !found.owned {
            return Err(StoreError::not_found("no such runtime"));
        }
        let (Some(room_id), Some(message_id)) = (found.room_id, found.message_id) else {
            return Ok(Settled::Refused(StoreError::not_found("no such job")));
        };
        let key = job_key(self.runtime_id, room_id, message_id);
        let fingerprint = CompletionFingerprint::compute(&key, &input.owner, result_value);
        // A retried error finish: the attempt under this version already
        // ended with an error.
        match (&found.attempt_fingerprint, found.attempt_response) {
            (Some(stored), Some(response)) if stored == fingerprint.as_str() => {
                return Ok(Settled::Done(Box::new(Done::replayed(from_json(
                    response,
                )?))));
            }
            (Some(_), _) => {
                return Ok(Settled::Refused(StoreError::rejected(
                    ErrorCode::FingerprintMismatch,
                    "this attempt already finished with a different result",
                )));
            }
            _ => {}
        }
        // The job's completion answers only a retry under the lease that
        // completed it; any other lease is lost (the owner that another
        // process took the job from included).
        if let (Some(stored), Some(outcome), Some(completed_version)) = (
            &found.completed_fingerprint,
            &found.completed_outcome,
            found.completed_version,
        ) && completed_version == version
        {
            if stored == fingerprint.as_str() {
                let completion = AttemptOutcome::parse(outcome)
                    .and_then(Completion::of)
                    .ok_or_else(|| StoreError::corrupt("a completing outcome", outcome))?;
                return Ok(Settled::Done(Box::new(Done::replayed(
                    completion.answer(found.completed_reply),
                ))));
            }
            return Ok(Settled::Refused(StoreError::rejected(
                ErrorCode::FingerprintMismatch,
                "this job was already completed with a different result",
            )));
        }
        let state = match found.state.as_deref().map(JobState::parse) {
            Some(Some(state)) => state,
            Some(None) | None => return Err(StoreError::corrupt("a job state", &found.state)),
        };
        let held = HeldLease {
            state,
            owner: found.lease_owner.as_deref(),
            version: found
                .lease_version
                .map(|v| u64::try_from(v).map_err(|_| StoreError::corrupt("a lease version", v)))
                .transpose()?,
            expires_at: found.lease_expires_at,
        };
        let presented = LeaseFence {
            owner: input.owner.clone(),
            version: input.version,
        };
        let fenced = presented.admits(&held, found.judged_at);
        if fenced && (!found.member || !self.caller.may_see_room(room_id)) {
            return Ok(Settled::Refused(StoreError::forbidden(
                "the agent no longer has access to this room; nothing was written",
            )));
        }
        if is_canceled(state, found.reason.as_deref()) {
            return Ok(Settled::Refused(job_canceled()));
        }
        Ok(Settled::Refused(lease_lost()))
    }
}

/// [`RECORD_END`] for one attempt; pipelines like [`Finisher::fence`].
fn record_end<'a>(
    mut conn: &'a AsyncPgConnection,
    runtime_id: Uuid,
    end: &EndRecord,
) -> impl std::future::Future<Output = QueryResult<usize>> + Send + 'a {
    let (model_calls, input_tokens, output_tokens) = record_usage(end.usage);
    crate::metrics::runtime_event(end.log_kind.as_str(), &end.detail, false);
    // The parameters as record_end.sql's header names them.
    diesel::sql_query(RECORD_END)
        .bind::<BigInt, _>(end.version) // $1 version
        .bind::<Text, _>(end.outcome.as_str()) // $2 outcome
        .bind::<Nullable<Text>, _>(end.error.clone()) // $3 error
        .bind::<Nullable<BigInt>, _>(model_calls) // $4 model_calls
        .bind::<Nullable<BigInt>, _>(input_tokens) // $5 input_tokens
        .bind::<Nullable<BigInt>, _>(output_tokens) // $6 output_tokens
        .bind::<Text, _>(end.fingerprint.as_str().to_owned()) // $7 fingerprint
        .bind::<Nullable<Jsonb>, _>(end.response.clone()) // $8 response
        .bind::<Nullable<SqlUuid>, _>(end.reply.map(|(room, _)| room)) // $9 reply_room_id
        .bind::<Nullable<SqlUuid>, _>(end.reply.map(|(_, message)| message)) // $10 reply_message_id
        .bind::<Text, _>(end.log_kind.as_str()) // $11 end_event
        .bind::<SqlUuid, _>(runtime_id) // $12 runtime_id
        .cached()
        .execute(&mut conn)
}

/// [`INSERT_REPLY`] for one reply (whom to wake); pipelines like
/// [`Finisher::fence`]. It fails with [`MEMBERS_CHANGED`] when the room's
/// members changed while it waited for the room lock.
fn insert_reply<'a>(
    mut conn: &'a AsyncPgConnection,
    agent_id: Uuid,
    runtime_id: Uuid,
    reply: &PendingReply,
) -> impl std::future::Future<Output = QueryResult<Vec<Uuid>>> + Send + 'a {
    // The parameters as insert_reply.sql's header names them.
    let row = diesel::sql_query(INSERT_REPLY)
        .bind::<SqlUuid, _>(reply.room_id) // $1 room_id
        .bind::<SqlUuid, _>(agent_id) // $2 agent_id
        .bind::<SqlUuid, _>(reply.reply_message_id) // $3 reply_message_id
        .bind::<Text, _>(reply.text.clone()) // $4 reply_text
        .bind::<SqlUuid, _>(reply.reply_to) // $5 reply_to
        .bind::<SqlUuid, _>(runtime_id) // $6 runtime_id
        .cached()
        .get_result::<Wake>(&mut conn);
    async move { Ok(row.await?.wake) }
}

/// [`LOCK_ROOM`] for one room; pipelines like [`Finisher::fence`].
fn lock_room(
    mut conn: &AsyncPgConnection,
    room_id: Uuid,
) -> impl std::future::Future<Output = QueryResult<usize>> + Send + '_ {
    diesel::sql_query(LOCK_ROOM)
        .bind::<SqlUuid, _>(room_id)
        .cached()
        .execute(&mut conn)
}

/// Whether a finish's reply statement found that the room's members changed
/// while it waited for the room lock ([`INSERT_REPLY`]): the transaction
/// failed whole and the finish runs again with its rooms locked first.
fn members_changed(err: &StoreError) -> bool {
    err.is_raised(MEMBERS_CHANGED)
}

/// How a finish's transaction takes its reply rooms' locks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RoomLocks {
    /// Each reply statement takes its room's lock (the usual case).
    InReply,
    /// The rooms are locked before the replies, after a first try found a
    /// room's members changed while its reply waited: holding the lock, the
    /// reply's snapshot of the members is current.
    First,
}

/// The answer of a finish transaction's second try, with
/// [`RoomLocks::First`]: a reply that still finds its room changed found no
/// room.
fn second_try<T>(answer: Result<T, StoreError>) -> Result<T, StoreError> {
    match answer {
        Err(err) if members_changed(&err) => Err(StoreError::not_found("the job's room vanished")),
        other => other,
    }
}

/// The batch's last flight: every attempt's end, then the replies in room
/// order (so two batches never wait on each other's rooms crosswise), each
/// under its room's lock (with [`RoomLocks::First`], the locks go between
/// the ends and the replies) — all sent at once and run in that order, so
/// the caller can send `COMMIT` with them.
async fn write_ends_and_replies(
    conn: &AsyncPgConnection,
    agent_id: Uuid,
    runtime_id: Uuid,
    ends: &[EndRecord],
    mut replies: Vec<PendingReply>,
    locks: RoomLocks,
) -> Result<Wakes, StoreError> {
    replies.sort_by_key(|reply| reply.room_id);
    let mut rooms: Vec<Uuid> = match locks {
        RoomLocks::InReply => Vec::new(),
        RoomLocks::First => replies.iter().map(|reply| reply.room_id).collect(),
    };
    rooms.dedup();
    let (_, _, written) = futures_util::try_join!(
        try_join_all(ends.iter().map(|end| record_end(conn, runtime_id, end))),
        try_join_all(rooms.iter().map(|&room_id| lock_room(conn, room_id))),
        try_join_all(
            replies
                .iter()
                .map(|reply| insert_reply(conn, agent_id, runtime_id, reply))
        ),
    )?;
    let mut wakes = Wakes::default();
    for woken in &written {
        wakes.add(woken);
    }
    for end in ends {
        wakes.add_askers(&[end.asker]);
    }
    Ok(wakes)
}

type JobOutcome = Result<FinishResponse, StoreError>;

/// A job of a finish request left without an answer: a broken invariant
/// of the batch code (every job is answered by its fence, a refusal or a
/// replay), reported as an internal error, never as a lost lease.
fn unanswered() -> StoreError {
    StoreError::rejected(
        ErrorCode::Internal,
        "the finish produced no answer for this job",
    )
}

/// Whether an error is the database's (rolls the batch back) rather than a
/// rule's answer.
fn is_database_error(err: &StoreError) -> bool {
    matches!(err, StoreError::Query(_) | StoreError::Contention(_))
}

impl Store {
    /// Finishes one job (the single finish route): a batch of one.
    pub async fn finish(
        &self,
        caller: &Caller,
        runtime_id: Uuid,
        job_id: Uuid,
        owner: &LeaseOwner,
        version: LeaseVersion,
        result: JobResult,
    ) -> Result<FinishResponse, StoreError> {
        let input = JobFinishInput {
            job_id,
            owner: owner.clone(),
            version,
            result,
        };
        let mut outcomes = self.finish_batch(caller, runtime_id, &[input]).await?;
        outcomes.pop().unwrap_or_else(|| Err(unanswered()))
    }

    /// Finishes the jobs of a batch, one outcome per job in the input's
    /// order: the jobs without a note in one transaction, each with a note
    /// in its own. `Err` only for the whole request (no such runtime, the
    /// database away).
    pub async fn finish_batch(
        &self,
        caller: &Caller,
        runtime_id: Uuid,
        inputs: &[JobFinishInput],
    ) -> Result<Vec<JobOutcome>, StoreError> {
        let mut ids: Vec<Uuid> = inputs.iter().map(|input| input.job_id).collect();
        ids.sort();
        if ids.windows(2).any(|pair| pair[0] == pair[1]) {
            return Err(StoreError::invalid("a job appears twice in one batch"));
        }
        let mut conn = self.conn().await?;
        let (mut plain, noted): (Vec<(usize, &JobFinishInput)>, Vec<_>) =
            inputs.iter().enumerate().partition(|(_, input)| {
                // A note's job goes in a transaction of its own.
                FinishRoute::of(input.result.note.is_some(), false, false)
                    != FinishRoute::OwnTransaction
            });
        let mut outcomes: Vec<Option<JobOutcome>> = (0..inputs.len()).map(|_| None).collect();
        if let Some(quick) = quick_finishes(&self.granted, &plain) {
            match commit_in_one(&mut conn, caller, runtime_id, &quick).await {
                Ok((fenced, wakes)) => {
                    self.publish_wakes(wakes);
                    for (quick, fenced) in quick.into_iter().zip(fenced) {
                        if fenced {
                            quick.count();
                            outcomes[quick.index] = Some(Ok(quick.ending.response));
                        }
                    }
                    // A job whose fence matched nothing wrote nothing: the
                    // long way diagnoses it.
                    plain.retain(|(i, _)| outcomes[*i].is_none());
                }
                Err(err) if is_database_error(&err) => {
                    tracing::debug!(%err, "one-flight finish rolled back; finishing the long way");
                }
                Err(err) => return Err(err),
            }
        }
        if !plain.is_empty() {
            let batch: Vec<&JobFinishInput> = plain.iter().map(|(_, input)| *input).collect();
            match commit_finishes(&mut conn, caller, runtime_id, &batch).await {
                Ok((done, wakes)) => {
                    self.publish_wakes(wakes);
                    for ((i, _), outcome) in plain.iter().zip(done) {
                        outcomes[*i] = Some(outcome);
                    }
                }
                Err(err) if batch.len() > 1 && is_database_error(&err) => {
                    tracing::warn!(%err, jobs = batch.len(), "finish batch rolled back; finishing its jobs one by one");
                    for (i, input) in &plain {
                        outcomes[*i] = Some(
                            match commit_finishes(&mut conn, caller, runtime_id, &[*input]).await {
                                Ok((mut one, wakes)) => {
                                    self.publish_wakes(wakes);
                                    one.pop().unwrap_or_else(|| Err(unanswered()))
                                }
                                Err(err) => Err(err),
                            },
                        );
                    }
                }
                Err(err) => return Err(err),
            }
        }
        for (i, input) in noted {
            let (outcome, wakes) = commit_with_note(&mut conn, caller, runtime_id, input).await;
            self.publish_wakes(wakes);
            outcomes[i] = Some(outcome);
        }
        // A finished job's place is not needed again; a refused one's may
        // be, by its rightful owner.
        self.granted.forget(
            inputs
                .iter()
                .zip(&outcomes)
                .filter(|(_, outcome)| matches!(outcome, Some(Ok(_))))
                .map(|(input, _)| input.job_id),
        );
        Ok(outcomes
            .into_iter()
            .map(|outcome| outcome.unwrap_or_else(|| Err(unanswered())))
            .collect())
    }
}

/// A job of a batch that can be finished in one statement
/// ([`FINISH_BATCH`]): it completes (no error, no note) and this instance
/// granted it, so its room, message and key are known.
struct Quick<'a> {
    /// Its place in the request.
    index: usize,
    input: &'a JobFinishInput,
    version: i64,
    place: JobPlace,
    ending: Completed,
}

impl Quick<'_> {
    /// Counts the finish once it has committed.
    fn count(&self) {
        crate::metrics::runtime_event(
            self.ending.log_kind.as_str(),
            &json!({
                "replyMessageId": self.ending.response.reply_message_id,
                "skip": self.input.result.skip,
            }),
            false,
        );
    }
}

/// Every job of `inputs` (request index, finish) as a [`Quick`] finish, in
/// room order and then job order (so two batches never wait on each
/// other's rooms crosswise), or `None` when the batch's route
/// ([`FinishRoute::of_batch`]) is the long way.
fn quick_finishes<'a>(
    granted: &GrantedJobs,
    inputs: &[(usize, &'a JobFinishInput)],
) -> Option<Vec<Quick<'a>>> {
    let places = granted.places(inputs.iter().map(|(_, input)| input.job_id));
    let route = FinishRoute::of_batch(inputs.iter().map(|(_, input)| {
        FinishRoute::of(
            input.result.note.is_some(),
            input.result.error.is_some(),
            places.is_some(),
        )
    }));
    let places = places.filter(|_| route == FinishRoute::OneStatement)?;
    let mut quick = inputs
        .iter()
        .zip(places)
        .map(|(&(index, input), place)| {
            Some(Quick {
                index,
                input,
                version: version_i64(input.version).ok()?,
                place,
                ending: Completed::of(&input.result),
            })
        })
        .collect::<Option<Vec<_>>>()?;
    quick.sort_by_key(|quick| (quick.place.room_id, quick.input.job_id));
    Some(quick)
}

/// The parameters of [`FINISH_BATCH`], one array element a job, as
/// finish_batch.sql's header names them.
#[derive(Default)]
struct BatchColumns {
    job_ids: Vec<Uuid>,
    owners: Vec<String>,
    versions: Vec<i64>,
    states: Vec<&'static str>,
    reasons: Vec<Option<String>>,
    room_ids: Vec<Uuid>,
    message_ids: Vec<Uuid>,
    outcomes: Vec<&'static str>,
    model_calls: Vec<Option<i64>>,
    input_tokens: Vec<Option<i64>>,
    output_tokens: Vec<Option<i64>>,
    end_events: Vec<&'static str>,
    reply_message_ids: Vec<Option<Uuid>>,
    reply_texts: Vec<Option<String>>,
    fingerprints: Vec<String>,
}

impl BatchColumns {
    fn of(runtime_id: Uuid, quick: &[Quick<'_>]) -> Result<BatchColumns, StoreError> {
        let mut columns = BatchColumns::default();
        for quick in quick {
            let input = quick.input;
            let result = &input.result;
            let key = job_key(runtime_id, quick.place.room_id, quick.place.message_id);
            let fingerprint = CompletionFingerprint::compute(&key, &input.owner, &to_json(result)?);
            let (state, reason) = completed_state(result);
            let (model_calls, input_tokens, output_tokens) = record_usage(result.usage);
            columns.job_ids.push(input.job_id);
            columns.owners.push(input.owner.as_str().to_owned());
            columns.versions.push(quick.version);
            columns.states.push(state.as_str());
            columns.reasons.push(reason.map(str::to_owned));
            columns.room_ids.push(quick.place.room_id);
            columns.message_ids.push(quick.place.message_id);
            columns.outcomes.push(quick.ending.attempt_outcome.as_str());
            columns.model_calls.push(model_calls);
            columns.input_tokens.push(input_tokens);
            columns.output_tokens.push(output_tokens);
            columns.end_events.push(quick.ending.log_kind.as_str());
            columns
                .reply_message_ids
                .push(quick.ending.response.reply_message_id);
            columns.reply_texts.push(result.reply.clone());
            columns.fingerprints.push(fingerprint.as_str().to_owned());
        }
        Ok(columns)
    }
}

/// The batch's transaction when every job can finish in one statement:
/// `BEGIN`, [`FINISH_BATCH`] for all of them, `COMMIT`, in one flight. Per
/// job, whether its fence matched. A reply that found its room's members
/// changed fails it whole (the caller then takes the long way, which locks
/// the room first).
async fn commit_in_one(
    conn: &mut PooledConnection,
    caller: &Caller,
    runtime_id: Uuid,
    quick: &[Quick<'_>],
) -> Result<(Vec<bool>, Wakes), StoreError> {
    let columns = BatchColumns::of(runtime_id, quick)?;
    conn.pipelined_transaction(async |conn| -> Result<_, StoreError> {
        let mut shared: &AsyncPgConnection = conn;
        let c = &columns;
        // The parameters as finish_batch.sql's header names them.
        let statement = diesel::sql_query(FINISH_BATCH)
            .bind::<SqlUuid, _>(runtime_id) // $1 runtime_id
            .bind::<SqlUuid, _>(caller.identity_id) // $2 agent_id
            .bind::<Nullable<Array<SqlUuid>>, _>(caller.rooms.clone()) // $3 rooms
            .bind::<Array<SqlUuid>, _>(&c.job_ids) // $4 job_ids
            .bind::<Array<Text>, _>(&c.owners) // $5 owners
            .bind::<Array<BigInt>, _>(&c.versions) // $6 versions
            .bind::<Array<Text>, _>(&c.states) // $7 states
            .bind::<Array<Nullable<Text>>, _>(&c.reasons) // $8 reasons
            .bind::<Array<SqlUuid>, _>(&c.room_ids) // $9 room_ids
            .bind::<Array<SqlUuid>, _>(&c.message_ids) // $10 message_ids
            .bind::<Array<Text>, _>(&c.outcomes) // $11 outcomes
            .bind::<Array<Nullable<BigInt>>, _>(&c.model_calls) // $12 model_calls
            .bind::<Array<Nullable<BigInt>>, _>(&c.input_tokens) // $13 input_tokens
            .bind::<Array<Nullable<BigInt>>, _>(&c.output_tokens) // $14 output_tokens
            .bind::<Array<Text>, _>(&c.end_events) // $15 end_events
            .bind::<Array<Nullable<SqlUuid>>, _>(&c.reply_message_ids) // $16 reply_message_ids
            .bind::<Array<Nullable<Text>>, _>(&c.reply_texts) // $17 reply_texts
            .bind::<Array<Text>, _>(&c.fingerprints) // $18 fingerprints
            .cached()
            .get_result::<FinishedBatch>(&mut shared);
        let row = in_one_flight(conn, async { statement.await.map_err(StoreError::from) }).await?;
        Ok(row.map(|row| {
            let mut wakes = Wakes::default();
            wakes.add(&row.wake);
            wakes.add_askers(&row.askers);
            let fenced = quick
                .iter()
                .map(|quick| row.fenced.contains(&quick.input.job_id))
                .collect();
            (fenced, wakes)
        }))
    })
    .await
}

/// The batch's transaction for jobs without a note (see the module
/// documentation).
async fn commit_finishes(
    conn: &mut PooledConnection,
    caller: &Caller,
    runtime_id: Uuid,
    inputs: &[&JobFinishInput],
) -> Result<(Vec<JobOutcome>, Wakes), StoreError> {
    match commit_finishes_once(conn, caller, runtime_id, inputs, RoomLocks::InReply).await {
        Err(err) if members_changed(&err) => second_try(
            commit_finishes_once(conn, caller, runtime_id, inputs, RoomLocks::First).await,
        ),
        other => other,
    }
}

/// One try of [`commit_finishes`].
async fn commit_finishes_once(
    conn: &mut PooledConnection,
    caller: &Caller,
    runtime_id: Uuid,
    inputs: &[&JobFinishInput],
    locks: RoomLocks,
) -> Result<(Vec<JobOutcome>, Wakes), StoreError> {
    let finisher = Finisher { caller, runtime_id };
    // Jobs are locked in id order, like every batch: two batches never wait
    // on each other's jobs crosswise.
    let mut order: Vec<usize> = (0..inputs.len()).collect();
    order.sort_by_key(|&i| inputs[i].job_id);
    conn.pipelined_transaction(async |conn| -> Result<_, StoreError> {
        let mut outcomes: Vec<Option<JobOutcome>> = (0..inputs.len()).map(|_| None).collect();
        // A version out of range never reaches the database.
        let mut fenceable = Vec::with_capacity(inputs.len());
        for &i in &order {
            match version_i64(inputs[i].version) {
                Ok(version) => fenceable.push((i, version)),
                Err(refused) => outcomes[i] = Some(Err(refused)),
            }
        }
        // `BEGIN` and every fence in one flight, run in job-id order.
        let shared: &AsyncPgConnection = conn;
        let (begun, fenced) = futures_util::try_join!(
            begin(shared),
            try_join_all(
                fenceable
                    .iter()
                    .map(|&(i, version)| finisher.fence(shared, inputs[i], version)),
            )
        )?;
        let mut ends = Vec::new();
        let mut replies = Vec::new();
        for (&(i, version), fenced) in fenceable.iter().zip(fenced) {
            outcomes[i] = Some(
                match finisher.settle(conn, inputs[i], version, fenced).await? {
                    Settled::Done(done) => {
                        ends.extend(done.end);
                        replies.extend(done.reply);
                        Ok(done.response)
                    }
                    Settled::Refused(refused) => Err(refused),
                },
            );
        }
        // Every job has its answer by now; one without is a bug, and rolls
        // the batch back before anything commits.
        let outcomes: Vec<JobOutcome> = outcomes
            .into_iter()
            .collect::<Option<_>>()
            .ok_or_else(unanswered)?;
        // The ends, the replies and `COMMIT` in the last flight. A reply
        // that found its room's members changed fails the transaction, so
        // the `COMMIT` behind it rolls back instead.
        let last =
            write_ends_and_replies(conn, caller.identity_id, runtime_id, &ends, replies, locks);
        let committed = commit_after(conn, begun, last).await?;
        Ok(committed.map(|wakes| (outcomes, wakes)))
    })
    .await
}

/// A job with a note, in a transaction of its own: the fence, the reply,
/// then the note. The note comes after the reply so that an operator's
/// write of the same note never waits behind a reply that waits for its
/// room; a refused note (a stale version, too many notes…) rolls the job
/// back, and only it.
async fn commit_with_note(
    conn: &mut AsyncPgConnection,
    caller: &Caller,
    runtime_id: Uuid,
    input: &JobFinishInput,
) -> (JobOutcome, Wakes) {
    let committed =
        match commit_with_note_once(conn, caller, runtime_id, input, RoomLocks::InReply).await {
            Err(err) if members_changed(&err) => second_try(
                commit_with_note_once(conn, caller, runtime_id, input, RoomLocks::First).await,
            ),
            other => other,
        };
    match committed {
        Ok((response, wakes)) => (Ok(response), wakes),
        Err(err) => (Err(err), Wakes::default()),
    }
}

/// One try of [`commit_with_note`].
async fn commit_with_note_once(
    conn: &mut AsyncPgConnection,
    caller: &Caller,
    runtime_id: Uuid,
    input: &JobFinishInput,
    locks: RoomLocks,
) -> Result<(FinishResponse, Wakes), StoreError> {
    let finisher = Finisher { caller, runtime_id };
    crate::metrics::count_when_committed(conn.transaction(async |conn| -> Result<_, StoreError> {
        let version = version_i64(input.version)?;
        let fenced = finisher.fence(conn, input, version).await?;
        let done = match finisher.settle(conn, input, version, fenced).await? {
            Settled::Done(done) => *done,
            Settled::Refused(refused) => return Err(refused),
        };
        let wakes = write_ends_and_replies(
            conn,
            caller.identity_id,
            runtime_id,
            done.end.as_slice(),
            done.reply.into_iter().collect(),
            locks,
        )
        .await?;
        if let (Some(room_id), Some(note)) = (done.fenced_room, &input.result.note) {
            write_note(conn, caller, runtime_id, room_id, note).await?;
        }
        Ok((done.response, wakes))
    }))
    .await
}
