//! What a running worker reports: [`WorkerEvent`]s, serialized as
//! `{"event":"snake_case_name", …camelCase fields}` (the CLI's `--json`
//! prints one a line; the JavaScript SDK's `onEvent` gets the same objects).

use std::fmt;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::ids::IdentityNumber;
use crate::policy::Policy;
use crate::wire::{StartFrom, Timestamp};

/// One thing that happened in a worker. Fields are named after the wire
/// fields they repeat (`jobKey`, `messageId` of the question, …).
#[allow(missing_docs)]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "event",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
#[non_exhaustive]
pub enum WorkerEvent {
    /// Registered (or re-attached) and about to claim.
    Started {
        runtime_id: Uuid,
        name: String,
        agent_number: IdentityNumber,
        /// The runtime's configuration version.
        version: u32,
        from: StartFrom,
        concurrency: u32,
        /// `connected`, `unavailable` (the fallback poll covers it until a
        /// reconnect works) or `disabled`.
        socket: SocketState,
        /// The rooms the agent is in (the runtime considers every one that
        /// the policy's `allowedRooms` admits).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rooms: Option<u64>,
        /// Messages in those rooms past the runtime's checkpoints: with
        /// `from: beginning` on a first start, the whole history.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        unscanned_messages: Option<u64>,
        /// Jobs already waiting (from earlier scans).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pending_jobs: Option<u64>,
        /// The policy in effect (normalised, defaults filled in).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        policy: Option<Policy>,
    },
    /// A job was leased to this worker.
    Claimed {
        job_id: Uuid,
        job_key: String,
        conversation_id: Uuid,
        message_id: Uuid,
        attempt: u32,
        handler_timeout_ms: u64,
    },
    /// The reply was committed.
    Replied {
        job_key: String,
        message_id: Uuid,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reply_message_id: Option<Uuid>,
    },
    /// The handler chose not to answer.
    Skipped {
        job_key: String,
        message_id: Uuid,
        reason: String,
    },
    /// Completed without a reply (e.g. only a note).
    Handled { job_key: String, message_id: Uuid },
    /// The attempt failed; the server retries it later (`retryAt`) unless
    /// the lease was lost (`lease_lost`: another owner may have it) or
    /// could not be renewed in time (`lease_expired`: the handler was
    /// cancelled before the server's expiry, after which the job is
    /// retried).
    Failed {
        job_key: String,
        message_id: Uuid,
        error: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry_at: Option<Timestamp>,
    },
    /// The attempt failed and was the last: a dead letter (`runtimes
    /// dead-letters`, `runtimes retry`).
    DeadLetter {
        job_key: String,
        message_id: Uuid,
        error: String,
    },
    /// Given back on shutdown: pending again for any process.
    Released { job_key: String, message_id: Uuid },
    /// The asker canceled the question while this worker held it: the
    /// handler's signal was aborted and nothing of it is written.
    Canceled { job_key: String, message_id: Uuid },
    /// The number of pending incoming contact requests changed.
    ContactRequests { count: u32 },
    /// `accept_contacts`: a request was accepted.
    ContactAccepted { number: IdentityNumber },
    /// `accept_contacts`: a request could not be accepted (withdrawn,
    /// blocked meanwhile, …: `number` and `code`), or the pending requests
    /// could not be listed (`code` and `message`); the worker keeps running
    /// and tries again on a later claim.
    ContactError {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        number: Option<IdentityNumber>,
        code: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    /// The runtime socket is open again after a break.
    SocketConnected,
    /// The runtime socket broke; reconnecting with backoff, the fallback
    /// poll covers the gap.
    SocketDisconnected { error: String },
    /// The server could not be reached (or answered 5xx); trying again.
    Unavailable {
        during: String,
        error: String,
        retry_in_ms: u64,
    },
    /// The worker stopped; the last event.
    Stopped {
        reason: StopReason,
        /// For `handler_did_not_stop`: the stuck job.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        job_key: Option<String>,
        /// For `error`: the error code.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
}

impl WorkerEvent {
    /// The event's name, as in `{"event": …}`.
    pub fn name(&self) -> &'static str {
        match self {
            WorkerEvent::Started { .. } => "started",
            WorkerEvent::Claimed { .. } => "claimed",
            WorkerEvent::Replied { .. } => "replied",
            WorkerEvent::Skipped { .. } => "skipped",
            WorkerEvent::Handled { .. } => "handled",
            WorkerEvent::Failed { .. } => "failed",
            WorkerEvent::DeadLetter { .. } => "dead_letter",
            WorkerEvent::Released { .. } => "released",
            WorkerEvent::Canceled { .. } => "canceled",
            WorkerEvent::ContactRequests { .. } => "contact_requests",
            WorkerEvent::ContactAccepted { .. } => "contact_accepted",
            WorkerEvent::ContactError { .. } => "contact_error",
            WorkerEvent::SocketConnected => "socket_connected",
            WorkerEvent::SocketDisconnected { .. } => "socket_disconnected",
            WorkerEvent::Unavailable { .. } => "unavailable",
            WorkerEvent::Stopped { .. } => "stopped",
        }
    }
}

/// The runtime socket's state when the worker started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum SocketState {
    /// Open: signals wake the worker at once.
    Connected,
    /// Could not be opened; reconnecting with backoff while the fallback
    /// poll covers the gap.
    Unavailable,
    /// Not used (`use_socket: false`): only timers wake the worker.
    Disabled,
}

/// Why a worker stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum StopReason {
    /// The cancellation token fired (SIGINT in the CLI): in-flight jobs
    /// were cancelled and released.
    Interrupted,
    /// A cancelled handler did not return within one second.
    HandlerDidNotStop,
    /// The server refused to go on (configuration conflict, revoked
    /// token, deleted runtime, …).
    Error,
}

impl StopReason {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Interrupted => "interrupted",
            StopReason::HandlerDidNotStop => "handler_did_not_stop",
            StopReason::Error => "error",
        }
    }
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_serialize_as_ndjson_objects() {
        let table = [
            (
                WorkerEvent::ContactRequests { count: 3 },
                r#"{"event":"contact_requests","count":3}"#,
            ),
            (
                WorkerEvent::Stopped {
                    reason: StopReason::Interrupted,
                    job_key: None,
                    code: None,
                    message: None,
                },
                r#"{"event":"stopped","reason":"interrupted"}"#,
            ),
            (
                WorkerEvent::ContactAccepted {
                    number: "100000007".parse().expect("number"),
                },
                r#"{"event":"contact_accepted","number":"100000007"}"#,
            ),
            (
                WorkerEvent::Skipped {
                    job_key: "k".into(),
                    message_id: Uuid::nil(),
                    reason: "sealed".into(),
                },
                r#"{"event":"skipped","jobKey":"k","messageId":"00000000-0000-0000-0000-000000000000","reason":"sealed"}"#,
            ),
            (
                WorkerEvent::SocketConnected,
                r#"{"event":"socket_connected"}"#,
            ),
            (
                WorkerEvent::ContactError {
                    number: Some("100000007".parse().expect("number")),
                    code: "not_found".into(),
                    message: None,
                },
                r#"{"event":"contact_error","number":"100000007","code":"not_found"}"#,
            ),
            (
                WorkerEvent::ContactError {
                    number: None,
                    code: "unavailable".into(),
                    message: Some("connection refused".into()),
                },
                r#"{"event":"contact_error","code":"unavailable","message":"connection refused"}"#,
            ),
        ];
        for (event, json) in table {
            assert_eq!(serde_json::to_string(&event).expect("json"), json);
            assert_eq!(
                serde_json::from_str::<WorkerEvent>(json).expect("parse"),
                event
            );
            let value: serde_json::Value = serde_json::from_str(json).expect("json");
            assert_eq!(value["event"], event.name());
        }
    }
}
