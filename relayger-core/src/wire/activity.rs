//! What the dashboard reads about a runtime's work: its activity over the
//! last hour, one job in full, and a filtered list of its jobs.
//!
//! | route | response |
//! | --- | --- |
//! | `GET /v1/runtimes/{id}/activity` | → [`RuntimeActivity`] |
//! | `GET /v1/runtimes/{id}/jobs` | `?state&room&sender&since&until&limit&after` → [`JobSearchPage`] |
//! | `GET /v1/runtimes/{id}/jobs/{job}` | → [`JobDetail`] (`job`: its jobId, message id or jobKey) |

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{JobView, MessageEnvelope, Timestamp, Usage};
use crate::job::{AttemptEnd, AttemptOutcome};

/// How many minutes [`RuntimeActivity`] covers.
pub const ACTIVITY_MINUTES: u32 = 60;

/// `GET /v1/runtimes/{id}/activity`: one entry per minute of the last hour,
/// oldest first, every minute present (zeros where nothing happened),
/// read from the runtime's attempts and log. A room-restricted token
/// counts only its rooms' jobs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct RuntimeActivity {
    pub minutes: Vec<ActivityMinute>,
}

/// What happened to a runtime's jobs in one minute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ActivityMinute {
    /// The start of the minute.
    pub at: Timestamp,
    /// Leases granted (attempts started).
    pub claimed: u64,
    /// Attempts that completed the job (with a reply or without one).
    pub answered: u64,
    /// Attempts that failed or whose lease ran out.
    pub failed: u64,
    /// Jobs skipped, by the policy at claim time or by the handler.
    pub skipped: u64,
    /// Replies written this minute whose question → reply time is known.
    pub replies: u64,
    /// The median question → reply time of those replies, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_median_ms: Option<u64>,
    /// The longest question → reply time of those replies, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_max_ms: Option<u64>,
}

/// One attempt of a job: one granted lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct AttemptView {
    /// 1 for the first attempt (a retried dead letter counts again from 1).
    pub attempt: u32,
    pub claimed_at: Timestamp,
    /// When it ended; absent while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<Timestamp>,
    /// Why it is over; absent while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<AttemptEnd>,
    /// How a finished attempt ended; absent for one that expired or was
    /// released.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<AttemptOutcome>,
    /// The handler's error of a failed attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// From the claim to the end, in milliseconds; absent while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// What the handler reported; absent when it reported nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// `GET /v1/runtimes/{id}/jobs/{job}`: the job, its question, every
/// attempt (oldest first) and the reply it wrote, if any.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct JobDetail {
    pub job: JobView,
    pub question: MessageEnvelope,
    pub attempts: Vec<AttemptView>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<MessageEnvelope>,
}

/// A job in a list, with its question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct JobSummary {
    pub job: JobView,
    pub question: MessageEnvelope,
}

/// `GET /v1/runtimes/{id}/jobs`: newest job first (by when it was made,
/// then id).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct JobSearchPage {
    pub jobs: Vec<JobSummary>,
    /// The last job's id when more follow: pass it back as `after`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<Uuid>,
}
