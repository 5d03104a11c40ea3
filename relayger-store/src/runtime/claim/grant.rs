//! A claim's grants and skips, written in one statement
//! ([`GRANT_AND_SKIP`]) sent with the claim's `COMMIT`.
//!
//! Everything the statement writes and the response says is made before
//! it is sent ([`Writes::new`]), so whatever can fail fails before the
//! commit and rolls the claim back. What only the statement knows — each
//! grant's attempt number and lease version — arrives with the commit's
//! answer and is read by conversions that cannot fail, and the response
//! lists exactly the jobs the statement granted.

use std::collections::HashMap;

use diesel::sql_types::{Array, BigInt, Nullable, Text};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use relayger_core::ErrorCode;
use relayger_core::handler_timeout::handler_timeout_ms;
use relayger_core::job::job_key;
use relayger_core::lease::{LeaseOwner, LeaseVersion};
use relayger_core::policy::SkipReason;
use relayger_core::wire::{ClaimedJob, MessageEnvelope};
use serde_json::json;
use time::OffsetDateTime;
use uuid::Uuid;

use super::JobLease;
use super::candidates::Judged;
use crate::StoreError;
use crate::prepared::CachedExt;
use crate::runtime::statements::GRANT_AND_SKIP;

/// What a grant needs besides the candidate.
#[derive(Clone, Copy)]
pub(super) struct GrantTerms {
    pub(super) requested_timeout_ms: Option<u64>,
    pub(super) lease_ms: u64,
    pub(super) now: OffsetDateTime,
    /// The runtime's running grant count so far (the newest unit's `seq`).
    pub(super) budget_last: i64,
}

/// One job to grant, as the response will carry it but for the attempt
/// number and lease version.
struct Grant {
    job_id: Uuid,
    job_key: String,
    owner: LeaseOwner,
    handler_timeout_ms: u64,
    message: MessageEnvelope,
}

/// The claim's grants and skips, ready to write ([`Writes::write`]).
pub(super) struct Writes {
    runtime_id: Uuid,
    lease_ms: u64,
    /// `$5`: [`GrantTerms::lease_ms`] as the statement takes it.
    lease_ms_sql: i64,
    budget_last: i64,
    /// `$2`, `$3` and `$4`: the grants, then the skips.
    ids: Vec<Uuid>,
    owners: Vec<Option<String>>,
    reasons: Vec<Option<&'static str>>,
    /// In candidate order.
    grants: Vec<Grant>,
    skips: Vec<SkipReason>,
    /// The senders of the messages granted or skipped: their questions'
    /// delivery changes.
    askers: Vec<Uuid>,
}

impl Writes {
    /// The writes of `judged`: a lease owner for every grant, and every
    /// number the statement and the response take, or the error that rolls
    /// the claim back.
    pub(super) fn new(
        runtime_id: Uuid,
        judged: Judged,
        terms: GrantTerms,
    ) -> Result<Writes, StoreError> {
        let lease_ms_sql = i64::try_from(terms.lease_ms).map_err(|_| {
            StoreError::rejected(
                ErrorCode::Internal,
                format!("a lease of {} ms is out of range", terms.lease_ms),
            )
        })?;
        let count = judged.grants.len() + judged.skips.len();
        let mut writes = Writes {
            runtime_id,
            lease_ms: terms.lease_ms,
            lease_ms_sql,
            budget_last: terms.budget_last,
            ids: Vec::with_capacity(count),
            owners: Vec::with_capacity(count),
            reasons: Vec::with_capacity(count),
            grants: Vec::with_capacity(judged.grants.len()),
            skips: Vec::with_capacity(judged.skips.len()),
            askers: Vec::with_capacity(count),
        };
        for (row, message) in judged.grants {
            let owner = LeaseOwner::generate()
                .map_err(|e| StoreError::rejected(ErrorCode::Internal, e.to_string()))?;
            let deadline_remaining = message
                .deadline
                .map(|deadline| saturating_i64((deadline.0 - terms.now).whole_milliseconds()));
            writes.askers.push(message.sender.id);
            writes.ids.push(row.job_id);
            writes.owners.push(Some(owner.as_str().to_owned()));
            writes.reasons.push(None);
            writes.grants.push(Grant {
                job_id: row.job_id,
                job_key: job_key(runtime_id, message.conversation_id, message.message_id),
                owner,
                handler_timeout_ms: handler_timeout_ms(
                    terms.requested_timeout_ms,
                    deadline_remaining,
                ),
                message,
            });
        }
        for (row, reason) in judged.skips {
            writes.askers.push(row.sender_id());
            writes.ids.push(row.job_id);
            writes.owners.push(None);
            writes.reasons.push(Some(reason.as_str()));
            writes.skips.push(reason);
        }
        Ok(writes)
    }

    /// The senders of the messages this claim grants or skips.
    pub(super) fn askers(&self) -> Vec<Uuid> {
        self.askers.clone()
    }

    /// Writes the grants and skips in one statement and answers the
    /// granted jobs in candidate order. Nothing to write: no statement. The
    /// statement is sent when the future is first polled, so it pipelines
    /// with the claim's `COMMIT`.
    ///
    /// Only a claim takes a job out of pending, under the runtime's lock, so
    /// the statement finds every candidate still pending and grants it; the
    /// answer is in any case the jobs it granted, never one it did not.
    pub(super) async fn write(
        self,
        mut conn: &AsyncPgConnection,
    ) -> Result<Vec<ClaimedJob>, StoreError> {
        if self.ids.is_empty() {
            return Ok(Vec::new());
        }
        let rows: Vec<JobLease> = diesel::sql_query(GRANT_AND_SKIP)
            .bind::<diesel::sql_types::Uuid, _>(self.runtime_id)
            .bind::<Array<diesel::sql_types::Uuid>, _>(&self.ids)
            .bind::<Array<Nullable<Text>>, _>(&self.owners)
            .bind::<Array<Nullable<Text>>, _>(&self.reasons)
            .bind::<BigInt, _>(self.lease_ms_sql)
            .bind::<BigInt, _>(self.budget_last)
            .cached()
            .load(&mut conn)
            .await?;
        for reason in &self.skips {
            crate::metrics::runtime_event("skipped", &json!({"reason": reason.as_str()}), true);
        }
        let mut rows: HashMap<Uuid, JobLease> = rows.into_iter().map(|r| (r.id, r)).collect();
        let lease_ms = self.lease_ms;
        Ok(self
            .grants
            .into_iter()
            .filter_map(|grant| {
                let row = rows.remove(&grant.job_id)?;
                // Neither is negative: the CHECK constraints on
                // `jobs.attempts` (at least 0) and `jobs.lease_version` (at
                // least 1) refuse the statement otherwise, before the
                // commit. On such values the absolute value is the value.
                let attempt = row.attempts.unsigned_abs();
                let version = LeaseVersion(row.lease_version.unsigned_abs());
                crate::metrics::runtime_event(
                    "claimed",
                    &json!({"attempt": attempt, "version": version.to_string()}),
                    false,
                );
                Some(ClaimedJob {
                    job_id: grant.job_id,
                    job_key: grant.job_key,
                    attempt,
                    owner: grant.owner,
                    version,
                    lease_ms,
                    handler_timeout_ms: grant.handler_timeout_ms,
                    message: grant.message,
                })
            })
            .collect())
    }
}

/// `n` as `i64`, saturated at its bounds: a deadline more than 292 million
/// years away is as far as one that is.
fn saturating_i64(n: i128) -> i64 {
    i64::try_from(n).unwrap_or(if n < 0 { i64::MIN } else { i64::MAX })
}
