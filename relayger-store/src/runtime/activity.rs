//! What the dashboard reads about a runtime's work: its last hour minute by
//! minute, one job with its question, attempts and reply, and a filtered
//! page of its jobs. Reads only: nothing here writes, and nothing on the
//! job path (claim, finish, scan) writes more for it.

use diesel::prelude::*;
use diesel::sql_types::{Array, BigInt, Integer, Nullable, Text, Timestamptz};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use relayger_core::job::{AttemptEnd, AttemptOutcome, JobState, job_key, job_key_ids};
use relayger_core::job_filter::JobFilter;
use relayger_core::lookup::JobRef;
use relayger_core::wire::{
    ACTIVITY_MINUTES, ActivityMinute, AttemptView, JobDetail, JobSummary, JobView, MessageEnvelope,
    Timestamp, Usage,
};
use time::OffsetDateTime;
use uuid::Uuid;

use super::owned_runtime;
use super::statements::{ACTIVITY, JOB_SEARCH};
use crate::error::stored;
use crate::messages::{MessageWithSender, load_envelope};
use crate::prepared::CachedExt;
use crate::rooms::require_member;
use crate::schema::{attempts, jobs};
use crate::{Caller, Store, StoreError};

/// One row of [`ACTIVITY`].
#[derive(QueryableByName)]
struct MinuteRow {
    #[diesel(sql_type = Timestamptz)]
    at: OffsetDateTime,
    #[diesel(sql_type = BigInt)]
    claimed: i64,
    #[diesel(sql_type = BigInt)]
    answered: i64,
    #[diesel(sql_type = BigInt)]
    failed: i64,
    #[diesel(sql_type = BigInt)]
    skipped: i64,
    #[diesel(sql_type = BigInt)]
    replies: i64,
    #[diesel(sql_type = Nullable<BigInt>)]
    latency_median_ms: Option<i64>,
    #[diesel(sql_type = Nullable<BigInt>)]
    latency_max_ms: Option<i64>,
}

/// One row of [`JOB_SEARCH`]: the job and its question.
#[derive(QueryableByName)]
struct FoundJob {
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    job_id: Uuid,
    #[diesel(sql_type = Text)]
    job_state: String,
    #[diesel(sql_type = Integer)]
    job_attempts: i32,
    #[diesel(sql_type = Nullable<Text>)]
    job_reason: Option<String>,
    #[diesel(sql_type = Timestamptz)]
    job_updated_at: OffsetDateTime,
    #[diesel(embed)]
    question: MessageWithSender,
}

/// One attempt as [`attempts`] holds it.
#[derive(Queryable, Selectable)]
#[diesel(table_name = attempts)]
struct AttemptRow {
    attempt: i32,
    claimed_at: OffsetDateTime,
    ended_at: Option<OffsetDateTime>,
    ended: Option<String>,
    outcome: Option<String>,
    error: Option<String>,
    model_calls: Option<i64>,
    input_tokens: Option<i64>,
    output_tokens: Option<i64>,
    reply_room_id: Option<Uuid>,
    reply_message_id: Option<Uuid>,
}

fn count(what: &str, n: i64) -> Result<u64, StoreError> {
    stored(what, n)
}

fn job_state(state: &str) -> Result<JobState, StoreError> {
    JobState::parse(state).ok_or_else(|| StoreError::corrupt("a job state", state))
}

fn attempt_view(row: &AttemptRow) -> Result<AttemptView, StoreError> {
    let ended = row
        .ended
        .as_deref()
        .map(|ended| {
            AttemptEnd::parse(ended).ok_or_else(|| StoreError::corrupt("an attempt's end", ended))
        })
        .transpose()?;
    let outcome = row
        .outcome
        .as_deref()
        .map(|outcome| {
            AttemptOutcome::parse(outcome)
                .ok_or_else(|| StoreError::corrupt("an attempt's outcome", outcome))
        })
        .transpose()?;
    let usage = match (row.model_calls, row.input_tokens, row.output_tokens) {
        (Some(calls), Some(input), Some(output)) => Some(Usage {
            model_calls: count("a model call count", calls)?,
            input_tokens: count("an input token count", input)?,
            output_tokens: count("an output token count", output)?,
        }),
        _ => None,
    };
    Ok(AttemptView {
        attempt: stored("an attempt number", row.attempt)?,
        claimed_at: Timestamp(row.claimed_at),
        ended_at: row.ended_at.map(Timestamp),
        ended,
        outcome,
        error: row.error.clone(),
        duration_ms: row
            .ended_at
            .map(|end| u64::try_from((end - row.claimed_at).whole_milliseconds()).unwrap_or(0)),
        usage,
    })
}

/// The job of `runtime_id` that `job` names (its id, its message's id or
/// its key), in `state` if given: its id and room.
pub(crate) async fn find_job(
    conn: &mut AsyncPgConnection,
    runtime_id: Uuid,
    job: &JobRef,
    state: Option<JobState>,
) -> Result<Option<(Uuid, Uuid)>, StoreError> {
    // One job a (runtime, message) and unique keys: each form names at most
    // one job of the runtime.
    let mut found = jobs::table
        .filter(jobs::runtime_id.eq(runtime_id))
        .select((jobs::id, jobs::room_id))
        .into_boxed();
    if let Some(state) = state {
        found = found.filter(jobs::state.eq(state.as_str()));
    }
    let found = match job {
        JobRef::Id(id) => found.filter(jobs::id.eq(*id).or(jobs::message_id.eq(*id))),
        JobRef::Key(key) => match job_key_ids(key) {
            Some((key_runtime, room_id, message_id)) if key_runtime == runtime_id => found
                .filter(jobs::room_id.eq(room_id))
                .filter(jobs::message_id.eq(message_id)),
            _ => return Ok(None),
        },
    };
    Ok(found.first(conn).await.optional()?)
}

impl Store {
    /// The runtime's last [`ACTIVITY_MINUTES`] minutes, oldest first.
    pub async fn runtime_activity(
        &self,
        caller: &Caller,
        runtime_id: Uuid,
    ) -> Result<Vec<ActivityMinute>, StoreError> {
        let mut conn = self.conn().await?;
        owned_runtime(&mut conn, caller.identity_id, runtime_id, false).await?;
        let rows: Vec<MinuteRow> = diesel::sql_query(ACTIVITY)
            .bind::<diesel::sql_types::Uuid, _>(runtime_id) // $1 runtime_id
            .bind::<diesel::sql_types::Uuid, _>(caller.identity_id) // $2 agent_id
            .bind::<Nullable<Array<diesel::sql_types::Uuid>>, _>(caller.rooms.clone()) // $3 rooms
            .bind::<Integer, _>(ACTIVITY_MINUTES as i32) // $4 minutes
            .cached()
            .load(&mut conn)
            .await?;
        rows.into_iter()
            .map(|row| {
                let latency = |n: Option<i64>| n.map(|ms| count("a latency", ms)).transpose();
                Ok(ActivityMinute {
                    at: Timestamp(row.at),
                    claimed: count("a claim count", row.claimed)?,
                    answered: count("an answered count", row.answered)?,
                    failed: count("a failed count", row.failed)?,
                    skipped: count("a skipped count", row.skipped)?,
                    replies: count("a reply count", row.replies)?,
                    latency_median_ms: latency(row.latency_median_ms)?,
                    latency_max_ms: latency(row.latency_max_ms)?,
                })
            })
            .collect()
    }

    /// One job of the runtime with its question, its attempts (oldest
    /// first) and its reply. A job of a room the caller cannot read (the
    /// token's rooms, a room the agent left) is as absent as an unknown one.
    pub async fn job_detail(
        &self,
        caller: &Caller,
        runtime_id: Uuid,
        job: &JobRef,
    ) -> Result<JobDetail, StoreError> {
        let mut conn = self.conn().await?;
        owned_runtime(&mut conn, caller.identity_id, runtime_id, false).await?;
        let no_such = || StoreError::not_found("no job with that id");
        let (job_id, room_id) = find_job(&mut conn, runtime_id, job, None)
            .await?
            .ok_or_else(no_such)?;
        match require_member(&mut conn, caller, room_id).await {
            Ok(_) => {}
            Err(StoreError::Rejected {
                code: relayger_core::ErrorCode::NotFound,
                ..
            }) => return Err(no_such()),
            Err(err) => return Err(err),
        }
        let (message_id, state, attempt_count, reason, updated_at): (
            Uuid,
            String,
            i32,
            Option<String>,
            OffsetDateTime,
        ) = jobs::table
            .filter(jobs::id.eq(job_id))
            .select((
                jobs::message_id,
                jobs::state,
                jobs::attempts,
                jobs::reason,
                jobs::updated_at,
            ))
            .first(&mut conn)
            .await?;
        let question = load_envelope(&mut conn, room_id, message_id)
            .await?
            .ok_or_else(no_such)?;
        let rows: Vec<AttemptRow> = attempts::table
            .filter(attempts::job_id.eq(job_id))
            .order(attempts::lease_version.asc())
            .select(AttemptRow::as_select())
            .load(&mut conn)
            .await?;
        let reply_of = rows
            .iter()
            .rev()
            .find_map(|row| row.reply_room_id.zip(row.reply_message_id));
        let reply = match reply_of {
            Some((reply_room, reply_id)) if caller.may_see_room(reply_room) => {
                load_envelope(&mut conn, reply_room, reply_id).await?
            }
            _ => None,
        };
        Ok(JobDetail {
            job: JobView {
                job_id,
                job_key: job_key(runtime_id, room_id, message_id),
                conversation_id: room_id,
                message_id,
                state: job_state(&state)?,
                attempts: stored("an attempt count", attempt_count)?,
                reason,
                updated_at: Timestamp(updated_at),
            },
            question,
            attempts: rows.iter().map(attempt_view).collect::<Result<_, _>>()?,
            reply,
        })
    }

    /// A page of the runtime's jobs that `filter` keeps, newest question
    /// first, with their questions; only of rooms the caller can read
    /// (filtered before the limit, so a page is never short for them).
    pub async fn search_jobs(
        &self,
        caller: &Caller,
        runtime_id: Uuid,
        filter: &JobFilter,
        after: Option<Uuid>,
        page_size: u32,
    ) -> Result<(Vec<JobSummary>, Option<Uuid>), StoreError> {
        let mut conn = self.conn().await?;
        owned_runtime(&mut conn, caller.identity_id, runtime_id, false).await?;
        let rows: Vec<FoundJob> = diesel::sql_query(JOB_SEARCH)
            .bind::<diesel::sql_types::Uuid, _>(runtime_id) // $1 runtime_id
            .bind::<diesel::sql_types::Uuid, _>(caller.identity_id) // $2 agent_id
            .bind::<Nullable<Array<diesel::sql_types::Uuid>>, _>(caller.rooms.clone()) // $3 rooms
            .bind::<Nullable<Text>, _>(filter.state.map(|s| s.as_str())) // $4 state
            .bind::<Nullable<diesel::sql_types::Uuid>, _>(filter.room) // $5 room_id
            .bind::<Nullable<Text>, _>(filter.sender.as_ref().map(|n| n.as_str().to_owned())) // $6 sender
            .bind::<Nullable<Timestamptz>, _>(filter.since.map(|t| t.0)) // $7 since
            .bind::<Nullable<Timestamptz>, _>(filter.until.map(|t| t.0)) // $8 until
            .bind::<Nullable<diesel::sql_types::Uuid>, _>(after) // $9 after
            .bind::<BigInt, _>(i64::from(page_size) + 1) // $10 rows
            .cached()
            .load(&mut conn)
            .await?;
        let (rows, next) = relayger_core::paging::cut_page(rows, page_size, |row| row.job_id);
        let jobs = rows
            .into_iter()
            .map(|row| {
                let question: MessageEnvelope = row.question.envelope();
                Ok(JobSummary {
                    job: JobView {
                        job_id: row.job_id,
                        job_key: job_key(runtime_id, question.conversation_id, question.message_id),
                        conversation_id: question.conversation_id,
                        message_id: question.message_id,
                        state: job_state(&row.job_state)?,
                        attempts: stored("an attempt count", row.job_attempts)?,
                        reason: row.job_reason,
                        updated_at: Timestamp(row.job_updated_at),
                    },
                    question,
                })
            })
            .collect::<Result<_, StoreError>>()?;
        Ok((jobs, next))
    }
}
