//! The persistent listener's runtime: registration, claims, leases,
//! completion, configuration, notes, log and stats.
//!
//! Routes (all `Authorization: Bearer TOKEN`; writes need read + write on an
//! agent identity, reads need read):
//!
//! | route | body → response |
//! | --- | --- |
//! | `POST /v1/runtimes` | [`RegisterRuntimeRequest`] → 201/200 [`Runtime`] (409 `runtime_configuration_conflict`, 409 `runtime_limit`) |
//! | `GET /v1/runtimes` | → [`RuntimeList`] |
//! | `GET /v1/runtimes/{id}` | → [`Runtime`] |
//! | `DELETE /v1/runtimes/{id}` | → [`Done`](super::Done) (409 `runtime_busy` while a lease is active) |
//! | `POST /v1/runtimes/{id}/configure` | [`ConfigureRequest`] → [`Runtime`] (409 `version_conflict` / `runtime_busy`) |
//! | `POST /v1/runtimes/{id}/claim` | [`ClaimRequest`] → [`ClaimResponse`] (+ `Relayger-Contact-Requests` when idle) |
//! | `POST /v1/runtimes/{id}/jobs/{job}/heartbeat` | [`LeaseRequest`] → [`HeartbeatResponse`] (409 `lease_lost`) |
//! | `POST /v1/runtimes/{id}/jobs/{job}/finish` | [`FinishRequest`] → [`FinishResponse`] (409 `lease_lost` / `fingerprint_mismatch`) |
//! | `POST /v1/runtimes/{id}/finishes` | [`FinishBatchRequest`] → [`FinishBatchResponse`] (one result per job) |
//! | `POST /v1/runtimes/{id}/jobs/{job}/release` | [`LeaseRequest`] → [`Done`](super::Done) |
//! | `POST /v1/runtimes/{id}/jobs/{job}/retry` | → [`JobView`] (a dead letter back to pending) |
//! | `GET /v1/runtimes/{id}/dead-letters` | → [`JobList`] |
//! | `GET /v1/runtimes/{id}/log` | `?limit` → [`LogPage`] |
//! | `GET /v1/runtimes/{id}/stats` | → [`RuntimeStats`] |
//! | `GET /v1/runtimes/{id}/activity`, `…/jobs`, `…/jobs/{job}` | the dashboard's reads: see the `activity` module |
//! | `PUT /v1/runtimes/{id}/notes/{room}/{key}` | [`NoteWrite`] → [`Note`] |
//! | `GET /v1/runtimes/{id}/notes/{room}` | `?limit` → [`NoteList`] |
//! | `GET /v1/runtimes/{id}/socket` | WebSocket of [`SocketSignal`](super::SocketSignal) |

use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use super::{MessageEnvelope, Timestamp};
use crate::lease::{LeaseOwner, LeaseVersion};
use crate::policy::Policy;

/// Where a runtime starts on first registration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum StartFrom {
    /// Page through all accessible history.
    #[default]
    Beginning,
    /// Only what arrives after registration.
    Now,
}

impl StartFrom {
    pub fn as_str(self) -> &'static str {
        match self {
            StartFrom::Beginning => "beginning",
            StartFrom::Now => "now",
        }
    }

    pub fn parse(text: &str) -> Option<StartFrom> {
        match text {
            "beginning" => Some(StartFrom::Beginning),
            "now" => Some(StartFrom::Now),
            _ => None,
        }
    }
}

/// `POST /v1/runtimes`: register or re-attach (same name, from and policy).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RegisterRuntimeRequest {
    pub name: String,
    #[serde(default)]
    pub from: StartFrom,
    /// Absent: the default policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<Policy>,
}

/// A runtime record: persistent per (agent, name).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Runtime {
    pub id: Uuid,
    pub name: String,
    pub agent_number: crate::ids::IdentityNumber,
    pub from: StartFrom,
    pub policy: Policy,
    /// Set for a room-restricted token when the policy's `allowedRooms`
    /// names rooms beyond the token's, which are left out of `policy`
    /// (an empty list then does not mean "every room").
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allowed_rooms_hidden: bool,
    /// Configuration version: 1 at registration, +1 per configure.
    pub version: u32,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// Jobs by state.
    pub jobs: JobCounts,
    /// Leases currently active (not expired).
    pub active_leases: u32,
    /// What a starting worker will look at (only in the answer to a
    /// registration, `POST /v1/runtimes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backlog: Option<RuntimeBacklog>,
}

/// What a worker will consider when it starts: the rooms the agent is in
/// and the messages in them past the runtime's checkpoints (every message
/// of a room, whoever sent it; the policy picks the questions among them
/// at claim time). Pending jobs are in `jobs.pending`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct RuntimeBacklog {
    pub rooms: u64,
    pub unscanned_messages: u64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct JobCounts {
    pub pending: u64,
    pub claimed: u64,
    pub handled: u64,
    pub skipped: u64,
    pub dead: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct RuntimeList {
    pub runtimes: Vec<Runtime>,
}

/// `POST /v1/runtimes/{id}/configure`: `version` must be the current one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConfigureRequest {
    pub version: u32,
    pub policy: Policy,
}

/// `POST /v1/runtimes/{id}/claim`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClaimRequest {
    /// At most this many jobs (default 1; never more than the policy's
    /// free concurrency).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_jobs: Option<u32>,
    /// The worker's handler timeout (`--handler-timeout`), capped by the
    /// server at 120 s and by the question's deadline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handler_timeout_ms: Option<u64>,
}

/// The fencing token of one lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LeaseRequest {
    pub owner: LeaseOwner,
    pub version: LeaseVersion,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ClaimedJob {
    pub job_id: Uuid,
    /// Stable per (runtime, message): the idempotency key for external work.
    pub job_key: String,
    /// 1 for the first attempt.
    pub attempt: u32,
    pub owner: LeaseOwner,
    pub version: LeaseVersion,
    pub lease_ms: u64,
    pub handler_timeout_ms: u64,
    pub message: MessageEnvelope,
}

/// `jobs` empty means idle: `retryAt` says when something may become
/// claimable without a new signal (lease expiry, backoff, active-hours
/// window, budget refill), if anything. A claim that grants carries
/// `retryAt` too when something may become claimable later without a
/// signal: another lease of the runtime expires (a job whose owner was cut
/// off or died may be taken over) or a retried job's backoff ends; its own
/// grants are no such reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ClaimResponse {
    pub jobs: Vec<ClaimedJob>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_at: Option<Timestamp>,
    pub lease_ms: u64,
    /// True when claimable work was left pending (the claim spent its
    /// candidate rounds, or granted fewer jobs than asked while more wait):
    /// the worker claims again at once instead of waiting for a signal or
    /// for a job to end.
    #[serde(default)]
    pub more_pending: bool,
    /// True when claimable work was left pending that this claim did not
    /// grant (the requested count, the concurrency cap or the per-room
    /// spread stopped it): the worker claims again when one of its jobs
    /// ends. False: nothing else was waiting, so a job's end alone is no
    /// reason to claim (a signal or `retryAt` is). Absent (an older
    /// server): true.
    #[serde(default = "work_left_unknown")]
    pub work_left: bool,
}

fn work_left_unknown() -> bool {
    true
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct HeartbeatResponse {
    pub lease_ms: u64,
    pub expires_at: Timestamp,
}

/// What a handler reported about its model use. Absent means unknown,
/// which is never counted as zero.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Usage {
    pub model_calls: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// A note written together with the reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NoteInput {
    pub key: String,
    pub text: String,
    /// 0 creates; an update names the current version.
    pub version: u32,
    #[serde(default)]
    pub source_message_ids: Vec<Uuid>,
}

/// A handler's result: `{reply?, skip?, note?, usage?}` or `{error, usage?}`.
/// `reply` and `skip` together are refused (422).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JobResult {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<String>,
    /// The reason for skipping (e.g. "sealed").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<NoteInput>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// A failed attempt: retried with backoff until maxAttempts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `POST …/finish`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FinishRequest {
    pub owner: LeaseOwner,
    pub version: LeaseVersion,
    pub result: JobResult,
}

/// The most finishes one `POST …/finishes` may carry.
pub const MAX_FINISHES_PER_BATCH: usize = 64;

/// `POST /v1/runtimes/{id}/finishes`: the finishes a worker has ready,
/// committed in one transaction, each judged on its own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FinishBatchRequest {
    /// 1 to 64 finishes of distinct jobs.
    pub finishes: Vec<JobFinish>,
}

/// One job's finish in a [`FinishBatchRequest`]: a [`FinishRequest`] with
/// its job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JobFinish {
    pub job_id: Uuid,
    pub owner: LeaseOwner,
    pub version: LeaseVersion,
    pub result: JobResult,
}

/// One result per finish, in the request's order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct FinishBatchResponse {
    pub results: Vec<JobFinishResult>,
}

/// What the single finish route would have answered for this job: its
/// [`FinishResponse`] as `finished`, or its error (`lease_lost`,
/// `fingerprint_mismatch`, …) as `error`. Exactly one of the two is given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct JobFinishResult {
    pub job_id: Uuid,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished: Option<FinishResponse>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<crate::ErrorBody>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum FinishOutcome {
    Replied,
    Skipped,
    /// Completed without a reply (e.g. only a note).
    Handled,
    /// The attempt failed; the job is pending again (with backoff).
    Failed,
    /// The attempt failed and it was the last: the job is a dead letter.
    DeadLetter,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct FinishResponse {
    pub outcome: FinishOutcome,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_message_id: Option<Uuid>,
    /// When a failed job may be claimed again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_at: Option<Timestamp>,
}

/// A job as inspect/dead-letters show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct JobView {
    pub job_id: Uuid,
    pub job_key: String,
    pub conversation_id: Uuid,
    pub message_id: Uuid,
    pub state: crate::job::JobState,
    pub attempts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub updated_at: Timestamp,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct JobList {
    pub jobs: Vec<JobView>,
    /// The last job's id when more follow: pass it back as `after`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<Uuid>,
}

/// One log record; newest first by `id` (not a global time order).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct LogRecord {
    pub id: i64,
    pub at: Timestamp,
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation_id: Option<Uuid>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<Uuid>,
    pub detail: Value,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct LogPage {
    pub records: Vec<LogRecord>,
}

/// Totals of what handlers reported; not an independently verified bill.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct RuntimeStats {
    /// Granted leases.
    pub claims: u64,
    pub attempts: u64,
    pub finished_attempts: u64,
    /// Attempts without a completion report (crashed, expired, released).
    pub unfinished_attempts: u64,
    /// Attempts whose report carried no usage.
    pub unreported_attempts: u64,
    pub reported: Usage,
    pub jobs: JobCounts,
    /// Budget units granted in the rolling hour, of the policy's
    /// `maxCallsPerHour` (what the next claim is judged against).
    #[serde(default)]
    pub budget_used_last_hour: u64,
}

/// `PUT …/notes/{room}/{key}`: version 0 creates; an update names the
/// current version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NoteWrite {
    pub version: u32,
    pub text: String,
    #[serde(default)]
    pub source_message_ids: Vec<Uuid>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Note {
    pub key: String,
    pub conversation_id: Uuid,
    pub text: String,
    pub version: u32,
    pub source_message_ids: Vec<Uuid>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct NoteList {
    pub notes: Vec<Note>,
    /// The last note's key when more follow: pass it back as `after`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}
