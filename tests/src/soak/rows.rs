//! The rows the final check reads, straight from the runtime tables.

use diesel::QueryableByName;
use diesel::sql_types::{Array, BigInt, Bool, Integer, Nullable, Text, Uuid as SqlUuid};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use uuid::Uuid;

/// A question and its job (none if it was never scanned).
#[derive(QueryableByName, Debug)]
pub(crate) struct QuestionRow {
    #[diesel(sql_type = SqlUuid)]
    pub(crate) message_id: Uuid,
    #[diesel(sql_type = Nullable<Text>)]
    pub(crate) text: Option<String>,
    #[diesel(sql_type = Nullable<SqlUuid>)]
    pub(crate) job_id: Option<Uuid>,
    #[diesel(sql_type = Nullable<Text>)]
    pub(crate) job_key: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    pub(crate) state: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    pub(crate) reason: Option<String>,
    #[diesel(sql_type = Nullable<Integer>)]
    pub(crate) attempts: Option<i32>,
}

#[derive(QueryableByName, Debug)]
pub(crate) struct ReplyRow {
    #[diesel(sql_type = SqlUuid)]
    pub(crate) id: Uuid,
    #[diesel(sql_type = SqlUuid)]
    pub(crate) reply_to: Uuid,
    #[diesel(sql_type = SqlUuid)]
    pub(crate) sender_id: Uuid,
    #[diesel(sql_type = Nullable<Text>)]
    pub(crate) text: Option<String>,
    #[diesel(sql_type = Nullable<SqlUuid>)]
    pub(crate) runtime_id: Option<Uuid>,
}

#[derive(QueryableByName, Debug)]
pub(crate) struct CompletionRow {
    #[diesel(sql_type = SqlUuid)]
    pub(crate) job_id: Uuid,
    #[diesel(sql_type = BigInt)]
    pub(crate) lease_version: i64,
    #[diesel(sql_type = Nullable<SqlUuid>)]
    pub(crate) reply_message_id: Option<Uuid>,
}

#[derive(QueryableByName, Debug)]
pub(crate) struct AttemptRow {
    #[diesel(sql_type = SqlUuid)]
    pub(crate) job_id: Uuid,
    #[diesel(sql_type = Text)]
    pub(crate) job_key: String,
    #[diesel(sql_type = Integer)]
    pub(crate) attempt: i32,
    #[diesel(sql_type = Text)]
    pub(crate) lease_owner: String,
    #[diesel(sql_type = BigInt)]
    pub(crate) lease_version: i64,
    /// Milliseconds since the Unix epoch, by the database clock (the same
    /// machine's clock as the soak's outage times).
    #[diesel(sql_type = BigInt)]
    pub(crate) claimed_ms: i64,
    #[diesel(sql_type = Bool)]
    pub(crate) finished: bool,
    #[diesel(sql_type = Nullable<Text>)]
    pub(crate) outcome: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    pub(crate) ended: Option<String>,
    /// When it finished or ended, by the database clock (ms).
    #[diesel(sql_type = Nullable<BigInt>)]
    pub(crate) ended_ms: Option<i64>,
}

/// The runtime's own audit trail of one job.
#[derive(QueryableByName, Debug)]
pub(crate) struct LogRow {
    #[diesel(sql_type = Text)]
    pub(crate) kind: String,
    #[diesel(sql_type = Text)]
    pub(crate) job_key: String,
    #[diesel(sql_type = Nullable<Integer>)]
    pub(crate) attempt: Option<i32>,
    #[diesel(sql_type = Nullable<Text>)]
    pub(crate) version: Option<String>,
}

#[derive(Debug)]
pub(crate) struct Rows {
    pub(crate) questions: Vec<QuestionRow>,
    pub(crate) replies: Vec<ReplyRow>,
    pub(crate) completions: Vec<CompletionRow>,
    pub(crate) attempts: Vec<AttemptRow>,
    pub(crate) log: Vec<LogRow>,
}

pub(crate) async fn load(
    conn: &mut AsyncPgConnection,
    runtime_id: Uuid,
    question_ids: &[Uuid],
) -> anyhow::Result<Rows> {
    let questions = diesel::sql_query(
        "SELECT m.id AS message_id, m.text, j.id AS job_id, 'job_' || replace(j.runtime_id::text, '-', '') || '_' || replace(j.room_id::text, '-', '') || '_' || replace(j.message_id::text, '-', '') AS job_key, j.state, j.reason,
                j.attempts
         FROM messages m
         LEFT JOIN jobs j ON j.message_id = m.id AND j.runtime_id = $1
         WHERE m.id = ANY($2)",
    )
    .bind::<SqlUuid, _>(runtime_id)
    .bind::<Array<SqlUuid>, _>(question_ids)
    .load(conn)
    .await?;
    let replies = diesel::sql_query(
        "SELECT id, reply_to, sender_id, text, runtime_id FROM messages WHERE reply_to = ANY($1)",
    )
    .bind::<Array<SqlUuid>, _>(question_ids)
    .load(conn)
    .await?;
    let completions = diesel::sql_query(
        "SELECT a.job_id, a.lease_version, a.reply_message_id
         FROM attempts a
         WHERE a.runtime_id = $1 AND a.outcome IN ('replied', 'skipped', 'handled')",
    )
    .bind::<SqlUuid, _>(runtime_id)
    .load(conn)
    .await?;
    let attempts = diesel::sql_query(
        "SELECT a.job_id, 'job_' || replace(j.runtime_id::text, '-', '') || '_' || replace(j.room_id::text, '-', '') || '_' || replace(j.message_id::text, '-', '') AS job_key, a.attempt, a.lease_owner, a.lease_version,
                (extract(epoch FROM a.claimed_at) * 1000)::bigint AS claimed_ms,
                a.finished_at IS NOT NULL AS finished, a.outcome, a.ended,
                (extract(epoch FROM coalesce(a.finished_at, a.ended_at)) * 1000)::bigint AS ended_ms
         FROM attempts a JOIN jobs j ON j.id = a.job_id
         WHERE a.runtime_id = $1",
    )
    .bind::<SqlUuid, _>(runtime_id)
    .load(conn)
    .await?;
    let log = diesel::sql_query(
        "SELECT kind, job_key, attempt, version FROM (
             SELECT a.claimed_at AS at, 4 * a.lease_version + 1 AS id, 'claimed' AS kind,
                    'job_' || replace(j.runtime_id::text, '-', '') || '_' || replace(j.room_id::text, '-', '') || '_' || replace(j.message_id::text, '-', '') AS job_key, a.attempt, lpad(a.lease_version::text, 20, '0') AS version
             FROM attempts a JOIN jobs j ON j.id = a.job_id
             WHERE a.runtime_id = $1
             UNION ALL
             SELECT a.ended_at, 4 * a.lease_version + 2, a.end_event, 'job_' || replace(j.runtime_id::text, '-', '') || '_' || replace(j.room_id::text, '-', '') || '_' || replace(j.message_id::text, '-', '') AS job_key, a.attempt, NULL
             FROM attempts a JOIN jobs j ON j.id = a.job_id
             WHERE a.runtime_id = $1 AND a.end_event IS NOT NULL
         ) records
         ORDER BY at, id",
    )
    .bind::<SqlUuid, _>(runtime_id)
    .load(conn)
    .await?;
    Ok(Rows {
        questions,
        replies,
        completions,
        attempts,
        log,
    })
}
