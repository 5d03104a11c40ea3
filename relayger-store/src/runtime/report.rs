//! What operators read: the log, stats, dead letters, and the manual retry.

use diesel::prelude::*;
use diesel::sql_types::{Array, BigInt, Nullable};
use diesel_async::{AsyncConnection, RunQueryDsl};
use relayger_core::ErrorCode;
use relayger_core::job::{JobState, job_key};
use relayger_core::limits::log_page_size;
use relayger_core::lookup::JobRef;
use relayger_core::room_view::visible_log_detail;
use relayger_core::wire::{JobView, LogRecord, RuntimeStats, Timestamp, Usage};
use serde_json::json;
use time::OffsetDateTime;
use uuid::Uuid;

use super::activity::find_job;
use super::statements::LOG_PAGE;
use super::{job_counts, log, owned_runtime};
use crate::error::stored;
use crate::prepared::CachedExt;
use crate::rooms::require_member;
use crate::schema::{jobs, room_members};
use crate::{Caller, Store, StoreError};

/// A job as the dead-letter routes show it.
#[derive(Queryable, Selectable)]
#[diesel(table_name = jobs)]
struct JobRow {
    id: Uuid,
    runtime_id: Uuid,
    room_id: Uuid,
    message_id: Uuid,
    state: String,
    attempts: i32,
    reason: Option<String>,
    updated_at: OffsetDateTime,
}

fn job_view(row: JobRow) -> Result<JobView, StoreError> {
    Ok(JobView {
        job_id: row.id,
        job_key: job_key(row.runtime_id, row.room_id, row.message_id),
        conversation_id: row.room_id,
        message_id: row.message_id,
        state: JobState::parse(&row.state)
            .ok_or_else(|| StoreError::corrupt("a job state", &row.state))?,
        attempts: stored("an attempt count", row.attempts)?,
        reason: row.reason,
        updated_at: Timestamp(row.updated_at),
    })
}

/// Current memberships of one identity.
type CurrentMembers = diesel::dsl::Filter<
    diesel::dsl::Filter<room_members::table, diesel::dsl::Eq<room_members::identity_id, Uuid>>,
    diesel::dsl::IsNull<room_members::left_at>,
>;

/// The rooms `agent_id` is a member of now, as a subquery.
fn current_rooms(
    agent_id: Uuid,
) -> diesel::dsl::Select<CurrentMembers, diesel::dsl::Nullable<room_members::room_id>> {
    room_members::table
        .filter(room_members::identity_id.eq(agent_id))
        .filter(room_members::left_at.is_null())
        .select(room_members::room_id.nullable())
}

/// One record of [`LOG_PAGE`].
#[derive(QueryableByName)]
struct LogRow {
    #[diesel(sql_type = BigInt)]
    id: i64,
    #[diesel(sql_type = diesel::sql_types::Timestamptz)]
    at: OffsetDateTime,
    #[diesel(sql_type = diesel::sql_types::Text)]
    kind: String,
    #[diesel(sql_type = Nullable<diesel::sql_types::Uuid>)]
    room_id: Option<Uuid>,
    #[diesel(sql_type = Nullable<diesel::sql_types::Uuid>)]
    message_id: Option<Uuid>,
    #[diesel(sql_type = diesel::sql_types::Jsonb)]
    detail: serde_json::Value,
}

impl Store {
    /// Newest first by record id, at most 100, only records of rooms the
    /// token may see and the agent is still in (records without a room are
    /// always visible). Both filters run before the limit, so a page is
    /// never short because of records it may not show.
    pub async fn runtime_log(
        &self,
        caller: &Caller,
        runtime_id: Uuid,
        limit: Option<i64>,
    ) -> Result<Vec<LogRecord>, StoreError> {
        let mut conn = self.conn().await?;
        owned_runtime(&mut conn, caller.identity_id, runtime_id, false).await?;
        let records: Vec<LogRow> = diesel::sql_query(LOG_PAGE)
            .bind::<diesel::sql_types::Uuid, _>(runtime_id) // $1 runtime_id
            .bind::<diesel::sql_types::Uuid, _>(caller.identity_id) // $2 agent_id
            .bind::<Nullable<Array<diesel::sql_types::Uuid>>, _>(caller.rooms.clone()) // $3 rooms
            .bind::<BigInt, _>(log_page_size(limit)) // $4 page_size
            .cached()
            .load(&mut conn)
            .await?;
        Ok(records
            .into_iter()
            .map(|row| LogRecord {
                id: row.id,
                at: Timestamp(row.at),
                detail: visible_log_detail(&row.kind, row.detail, caller.is_room_restricted()),
                kind: row.kind,
                job_key: row
                    .room_id
                    .zip(row.message_id)
                    .map(|(room, message)| job_key(runtime_id, room, message)),
                conversation_id: row.room_id,
                message_id: row.message_id,
            })
            .collect())
    }

    /// Claims, attempts and reported usage. Unknown usage is never counted
    /// as zero: attempts without a report are counted as unreported. A
    /// room-restricted token sees only its rooms' attempts, jobs and budget
    /// units (so its figures need not add up to the runtime's).
    pub async fn runtime_stats(
        &self,
        caller: &Caller,
        runtime_id: Uuid,
    ) -> Result<RuntimeStats, StoreError> {
        let mut conn = self.conn().await?;
        owned_runtime(&mut conn, caller.identity_id, runtime_id, false).await?;
        /// Every attempt of the runtime, counted and summed in one scan.
        #[derive(QueryableByName)]
        struct Totals {
            #[diesel(sql_type = diesel::sql_types::BigInt)]
            all_attempts: i64,
            #[diesel(sql_type = diesel::sql_types::BigInt)]
            finished: i64,
            #[diesel(sql_type = diesel::sql_types::BigInt)]
            unreported: i64,
            #[diesel(sql_type = diesel::sql_types::BigInt)]
            model_calls: i64,
            #[diesel(sql_type = diesel::sql_types::BigInt)]
            input_tokens: i64,
            #[diesel(sql_type = diesel::sql_types::BigInt)]
            output_tokens: i64,
            #[diesel(sql_type = diesel::sql_types::BigInt)]
            granted_last_hour: i64,
        }
        let totals: Totals = diesel::sql_query(
            "SELECT count(*) AS all_attempts,
                    count(finished_at) AS finished,
                    count(*) FILTER (WHERE model_calls IS NULL) AS unreported,
                    COALESCE(sum(model_calls), 0)::bigint AS model_calls,
                    COALESCE(sum(input_tokens), 0)::bigint AS input_tokens,
                    COALESCE(sum(output_tokens), 0)::bigint AS output_tokens,
                    count(*) FILTER (WHERE claimed_at > now() - interval '1 hour') AS granted_last_hour
             FROM attempts a
             WHERE runtime_id = $1
               AND ($2::uuid[] IS NULL
                    OR EXISTS (SELECT 1 FROM jobs j WHERE j.id = a.job_id AND j.room_id = ANY ($2)))",
        )
        .bind::<diesel::sql_types::Uuid, _>(runtime_id)
        .bind::<Nullable<Array<diesel::sql_types::Uuid>>, _>(caller.rooms.as_deref())
        .get_result(&mut conn)
        .await?;
        let budget_used = match &caller.rooms {
            // The same window, read the same way, as the claim judges the
            // budget with.
            None => super::claim::budget_used(&mut conn, runtime_id).await?,
            // Only the grants of the token's rooms: the runtime's budget
            // counts every room's.
            Some(_) => totals.granted_last_hour,
        };
        let (jobs, _) = job_counts(&mut conn, &[runtime_id], caller.rooms.as_deref())
            .await?
            .remove(&runtime_id)
            .unwrap_or_default();
        let count = |what: &str, n: i64| -> Result<u64, StoreError> { stored(what, n) };
        Ok(RuntimeStats {
            claims: count("a claim count", totals.all_attempts)?,
            attempts: count("an attempt count", totals.all_attempts)?,
            finished_attempts: count("a finished attempt count", totals.finished)?,
            unfinished_attempts: count(
                "an unfinished attempt count",
                totals.all_attempts - totals.finished,
            )?,
            unreported_attempts: count("an unreported attempt count", totals.unreported)?,
            reported: Usage {
                model_calls: count("a model call total", totals.model_calls)?,
                input_tokens: count("an input token total", totals.input_tokens)?,
                output_tokens: count("an output token total", totals.output_tokens)?,
            },
            jobs,
            budget_used_last_hour: count("a budget count", budget_used)?,
        })
    }

    /// Dead letters, newest first, with their reasons; only of rooms the
    /// token may see and the agent is still in (filtered before the limit).
    pub async fn dead_letters(
        &self,
        caller: &Caller,
        runtime_id: Uuid,
        after: Option<Uuid>,
        page_size: u32,
    ) -> Result<(Vec<JobView>, Option<Uuid>), StoreError> {
        let mut conn = self.conn().await?;
        owned_runtime(&mut conn, caller.identity_id, runtime_id, false).await?;
        // Newest dead letter first, in the order of `jobs_dead_idx`; a page
        // continues after the job `after` names (by its time and id).
        let mut query = jobs::table
            .filter(jobs::runtime_id.eq(runtime_id))
            .filter(jobs::state.eq(JobState::Dead.as_str()))
            .filter(
                jobs::room_id
                    .nullable()
                    .eq_any(current_rooms(caller.identity_id)),
            )
            .order((jobs::updated_at.desc(), jobs::id.desc()))
            .limit(i64::from(page_size) + 1)
            .select(JobRow::as_select())
            .into_boxed();
        if let Some(after) = after {
            query = query.filter(
                diesel::dsl::sql::<diesel::sql_types::Bool>(
                    "(jobs.updated_at, jobs.id) < (SELECT a.updated_at, a.id FROM jobs a WHERE a.id = ",
                )
                .bind::<diesel::sql_types::Uuid, _>(after)
                .sql(" AND a.runtime_id = ")
                .bind::<diesel::sql_types::Uuid, _>(runtime_id)
                .sql(")"),
            );
        }
        if let Some(rooms) = &caller.rooms {
            query = query.filter(jobs::room_id.eq_any(rooms.clone()));
        }
        let rows: Vec<JobRow> = query.load(&mut conn).await?;
        let (rows, next) = relayger_core::paging::cut_page(rows, page_size, |row| row.id);
        let jobs = rows.into_iter().map(job_view).collect::<Result<_, _>>()?;
        Ok((jobs, next))
    }

    /// Revives one dead letter by hand: pending again with a fresh attempt
    /// count. Dead letters are never revived automatically.
    pub async fn retry_dead_letter(
        &self,
        caller: &Caller,
        runtime_id: Uuid,
        job: &JobRef,
    ) -> Result<JobView, StoreError> {
        let mut conn = self.conn().await?;
        let agent_id = caller.identity_id;
        let (view, asker) = crate::metrics::count_when_committed(conn.transaction(
            async |conn| -> Result<_, StoreError> {
                owned_runtime(conn, agent_id, runtime_id, false).await?;
                let no_such =
                    || StoreError::rejected(ErrorCode::NotFound, "no dead letter with that id");
                // A dead letter of a room the caller cannot reach (a token
                // restricted elsewhere, a membership or contact that ended) is
                // as absent here as it is from the dead-letter list.
                let (job_id, room_id) = find_job(conn, runtime_id, job, Some(JobState::Dead))
                    .await?
                    .ok_or_else(no_such)?;
                match require_member(conn, caller, room_id).await {
                    Ok(_) => {}
                    Err(StoreError::Rejected {
                        code: ErrorCode::NotFound,
                        ..
                    }) => return Err(no_such()),
                    Err(err) => return Err(err),
                }
                let row: Option<JobRow> = diesel::update(
                    jobs::table
                        .filter(jobs::id.eq(job_id))
                        .filter(jobs::runtime_id.eq(runtime_id))
                        .filter(jobs::state.eq(JobState::Dead.as_str())),
                )
                .set((
                    jobs::state.eq(JobState::Pending.as_str()),
                    jobs::attempts.eq(0),
                    jobs::reason.eq(None::<String>),
                    jobs::not_before.eq(None::<OffsetDateTime>),
                    jobs::updated_at.eq(diesel::dsl::now),
                ))
                .returning(JobRow::as_returning())
                .get_result(conn)
                .await
                .optional()?;
                let row = row.ok_or_else(no_such)?;
                let view = job_view(row)?;
                log(
                    conn,
                    runtime_id,
                    "retried",
                    Some((view.conversation_id, view.message_id)),
                    json!({}),
                )
                .await?;
                let asker: Uuid = crate::schema::messages::table
                    .filter(crate::schema::messages::room_id.eq(view.conversation_id))
                    .filter(crate::schema::messages::id.eq(view.message_id))
                    .select(crate::schema::messages::sender_id)
                    .first(conn)
                    .await?;
                Ok((view, asker))
            },
        ))
        .await?;
        // Failed → queued again: the asker's delivery changed.
        self.publish_wakes(crate::wake::Wakes::askers(vec![asker]));
        Ok(view)
    }
}
