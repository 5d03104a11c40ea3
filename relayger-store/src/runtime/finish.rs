//! Finishing a job: reply message + note + completion + usage in
//! one transaction, fenced by owner, version and expiry. A retry with the
//! same fingerprint returns the original outcome; another result is refused.

use diesel::prelude::*;
use diesel::sql_types::{Bool, Timestamptz};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use relayger_core::ErrorCode;
use relayger_core::fingerprint::CompletionFingerprint;
use relayger_core::lease::{LeaseOwner, LeaseVersion};
use relayger_core::wire::{FinishOutcome, FinishResponse, JobResult, Timestamp, Usage};
use serde_json::json;
use time::OffsetDateTime;
use uuid::Uuid;

use super::claim::{cleared_lease, fail_job, lease_lost, version_i64};
use super::notes::write_note;
use super::{log, owned_runtime};
use crate::messages::{InsertMessage, insert_message};
use crate::rooms::{member_ids, require_member};
use crate::schema::{attempts, completions, jobs, rooms};
use crate::wake::Wakes;
use crate::{Caller, Store, StoreError};

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

/// How an attempt ended, as recorded on its row.
struct AttemptEnd<'a> {
    outcome: &'a str,
    error: Option<&'a str>,
    usage: Option<Usage>,
    /// For an error finish (which leaves no completion): the fingerprint and
    /// the response a retry of the same finish gets back.
    replay: Option<(&'a str, &'a FinishResponse)>,
}

async fn finish_attempt(
    conn: &mut AsyncPgConnection,
    version: i64,
    end: AttemptEnd<'_>,
) -> Result<(), StoreError> {
    let (model_calls, input_tokens, output_tokens) = record_usage(end.usage);
    let (fingerprint, response) = match end.replay {
        Some((fingerprint, response)) => (
            Some(fingerprint),
            Some(
                serde_json::to_value(response)
                    .map_err(|e| StoreError::rejected(ErrorCode::Internal, e.to_string()))?,
            ),
        ),
        None => (None, None),
    };
    diesel::update(attempts::table.filter(attempts::lease_version.eq(version)))
        .set((
            attempts::finished_at.eq(diesel::dsl::now),
            attempts::outcome.eq(end.outcome),
            attempts::ended.eq("finished"),
            attempts::error.eq(end.error),
            attempts::model_calls.eq(model_calls),
            attempts::input_tokens.eq(input_tokens),
            attempts::output_tokens.eq(output_tokens),
            attempts::fingerprint.eq(fingerprint),
            attempts::finish_response.eq(response),
        ))
        .execute(conn)
        .await?;
    Ok(())
}

#[derive(QueryableByName)]
struct Unexpired {
    #[diesel(sql_type = Bool)]
    unexpired: bool,
}

/// Whether a lease expiring at `expires_at` is still running by the database
/// clock at this statement (`clock_timestamp()`, not the transaction's
/// `now()`).
async fn unexpired_now(
    conn: &mut AsyncPgConnection,
    expires_at: Option<OffsetDateTime>,
) -> Result<bool, StoreError> {
    let Some(expires_at) = expires_at else {
        return Ok(false);
    };
    let row: Unexpired = diesel::sql_query("SELECT clock_timestamp() < $1 AS unexpired")
        .bind::<Timestamptz, _>(expires_at)
        .get_result(conn)
        .await?;
    Ok(row.unexpired)
}

/// A retried error finish: the attempt under this lease version already
/// ended with an error. The same finish gets the original response back
/// (`failed` with its `retryAt`, or `dead_letter`); another result is refused.
async fn replayed_error_finish(
    conn: &mut AsyncPgConnection,
    job_id: Uuid,
    version: i64,
    fingerprint: &CompletionFingerprint,
) -> Result<Option<FinishResponse>, StoreError> {
    let stored: Option<(Option<String>, Option<serde_json::Value>)> = attempts::table
        .filter(attempts::job_id.eq(job_id))
        .filter(attempts::lease_version.eq(version))
        .select((attempts::fingerprint, attempts::finish_response))
        .first(conn)
        .await
        .optional()?;
    match stored {
        Some((Some(stored), Some(response))) if stored == fingerprint.as_str() => {
            serde_json::from_value(response)
                .map(Some)
                .map_err(|e| StoreError::rejected(ErrorCode::Internal, e.to_string()))
        }
        Some((Some(_), _)) => Err(StoreError::rejected(
            ErrorCode::FingerprintMismatch,
            "this attempt already finished with a different result",
        )),
        _ => Ok(None),
    }
}

impl Store {
    pub async fn finish(
        &self,
        caller: &Caller,
        runtime_id: Uuid,
        job_id: Uuid,
        owner: &LeaseOwner,
        version: LeaseVersion,
        result: JobResult,
    ) -> Result<FinishResponse, StoreError> {
        let mut conn = self.conn().await?;
        let caller = caller.clone();
        let owner = owner.clone();
        let mut wakes = Wakes::default();
        let response = conn.transaction(async |conn| -> Result<_, StoreError> {
            let agent_id = caller.identity_id;
            let runtime = owned_runtime(conn, agent_id, runtime_id, false).await?;
            let policy = runtime.policy()?;
            type JobRow = (String, Uuid, Uuid, String, i32, Option<String>, Option<i64>, Option<OffsetDateTime>);
            let job: Option<JobRow> = jobs::table
                .filter(jobs::id.eq(job_id))
                .filter(jobs::runtime_id.eq(runtime_id))
                .select((
                    jobs::job_key,
                    jobs::room_id,
                    jobs::message_id,
                    jobs::state,
                    jobs::attempts,
                    jobs::lease_owner,
                    jobs::lease_version,
                    jobs::lease_expires_at,
                ))
                .for_no_key_update()
                .first(conn)
                .await
                .optional()?;
            let (job_key, room_id, message_id, state, attempt_count, lease_owner, lease_version, expires_at) =
                job.ok_or_else(|| StoreError::not_found("no such job"))?;

            let result_value = serde_json::to_value(&result)
                .map_err(|e| StoreError::invalid(e.to_string()))?;
            let fingerprint = CompletionFingerprint::compute(&job_key, &owner, &result_value);
            let version = version_i64(version)?;
            if let Some(response) = replayed_error_finish(conn, job_id, version, &fingerprint).await? {
                return Ok(response);
            }
            let completed: Option<(String, serde_json::Value)> = completions::table
                .find(job_id)
                .select((completions::fingerprint, completions::outcome))
                .first(conn)
                .await
                .optional()?;
            if let Some((stored, outcome)) = completed {
                if stored == fingerprint.as_str() {
                    return serde_json::from_value(outcome)
                        .map_err(|e| StoreError::rejected(ErrorCode::Internal, e.to_string()));
                }
                return Err(StoreError::rejected(
                    ErrorCode::FingerprintMismatch,
                    "this job was already completed with a different result",
                ));
            }

            // The fence: this owner, this version, a lease unexpired now
            // that the job is locked (not when the transaction began: the
            // lock may have been waited for past the expiry).
            let fenced = state == "claimed"
                && lease_owner.as_deref() == Some(owner.as_str())
                && lease_version == Some(version);
            if !fenced || !unexpired_now(conn, expires_at).await? {
                return Err(lease_lost());
            }
            // Access is judged again at finish: a revoked membership rolls back.
            if require_member(conn, &caller, room_id).await.is_err() {
                return Err(StoreError::forbidden(
                    "the agent no longer has access to this room; nothing was written",
                ));
            }
            let job_ref = Some((job_key.as_str(), room_id, message_id));
            let attempt_count = u32::try_from(attempt_count).unwrap_or(0);

            if let Some(error) = &result.error {
                let retry_at = fail_job(conn, job_id, attempt_count, policy.max_attempts, error).await?;
                let outcome = if retry_at.is_some() { FinishOutcome::Failed } else { FinishOutcome::DeadLetter };
                let kind = if retry_at.is_some() { "failed" } else { "dead_letter" };
                let response = FinishResponse {
                    outcome,
                    reply_message_id: None,
                    retry_at: retry_at.map(Timestamp),
                };
                finish_attempt(conn, version, AttemptEnd {
                    outcome: "failed",
                    error: Some(error),
                    usage: result.usage,
                    replay: Some((fingerprint.as_str(), &response)),
                })
                .await?;
                log(conn, runtime_id, kind, job_ref, json!({"attempt": attempt_count, "error": error})).await?;
                return Ok(response);
            }

            let mut reply_message_id = None;
            if let Some(reply) = &result.reply {
                let last_seq: i64 = rooms::table
                    .find(room_id)
                    .select(rooms::last_seq)
                    .for_no_key_update()
                    .first(conn)
                    .await?;
                // The room lock may have been waited for too.
                if !unexpired_now(conn, expires_at).await? {
                    return Err(lease_lost());
                }
                let members = member_ids(conn, room_id).await?;
                let envelope = insert_message(
                    conn,
                    InsertMessage {
                        id: Uuid::now_v7(),
                        room_id,
                        seq: last_seq + 1,
                        sender_id: agent_id,
                        text: Some(reply.clone()),
                        sealed: None,
                        ask: false,
                        deadline: None,
                        reply_to: Some(message_id),
                        runtime_id: Some(runtime_id),
                    },
                    &members,
                    &mut wakes,
                )
                .await?;
                reply_message_id = Some(envelope.message_id);
            }
            if let Some(note) = &result.note {
                write_note(conn, &caller, runtime_id, room_id, note).await?;
            }
            let (outcome, state, attempt_outcome) = match (&result.reply, &result.skip) {
                (Some(_), _) => (FinishOutcome::Replied, "handled", "replied"),
                (None, Some(_)) => (FinishOutcome::Skipped, "skipped", "skipped"),
                (None, None) => (FinishOutcome::Handled, "handled", "handled"),
            };
            let response = FinishResponse {
                outcome,
                reply_message_id,
                retry_at: None,
            };
            diesel::insert_into(completions::table)
                .values((
                    completions::job_id.eq(job_id),
                    completions::fingerprint.eq(fingerprint.as_str()),
                    completions::lease_version.eq(version),
                    completions::reply_message_id.eq(reply_message_id),
                    completions::reply_room_id.eq(reply_message_id.map(|_| room_id)),
                    completions::outcome.eq(serde_json::to_value(&response).unwrap_or_default()),
                ))
                .execute(conn)
                .await?;
            finish_attempt(conn, version, AttemptEnd {
                outcome: attempt_outcome,
                error: None,
                usage: result.usage,
                replay: None,
            })
            .await?;
            diesel::update(jobs::table.find(job_id))
                .set((
                    jobs::state.eq(state),
                    jobs::reason.eq(result.skip.as_deref()),
                    cleared_lease(),
                ))
                .execute(conn)
                .await?;
            let kind = match outcome {
                FinishOutcome::Skipped => "skipped",
                _ => "replied",
            };
            log(
                conn,
                runtime_id,
                kind,
                job_ref,
                json!({"attempt": attempt_count, "replyMessageId": reply_message_id, "skip": result.skip}),
            )
            .await?;
            Ok(response)
        })
        .await?;
        self.publish_wakes(wakes);
        Ok(response)
    }
}
