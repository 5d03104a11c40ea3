//! External handlers: code the operator brings, run once per job with hard
//! limits, so a stuck or crashing handler costs one attempt and never the
//! worker.
//!
//! - [`NodeModuleHandler`] (`--handler file.mjs|.js`): the module's `handle`
//!   runs in a fresh Node worker thread with a 128 MiB heap limit, hosted by
//!   one `node` process per job.
//! - [`ProcessHandler`] (`--process worker.json`): the operator's program,
//!   one process per job in its own process group, speaking the line ABI of
//!   [`relayger_core::process_abi`] (`docs/process-abi.md`); the thread and
//!   notes its `context` asks for are read first with the worker's client
//!   ([`ProcessHandler::with_client`]), so the process never needs a token.
//!
//! - [`A2aHandler`] (`--a2a URL`): no process of ours; each question's text
//!   goes to an outside A2A agent and its answer comes back (`a2a` module).
//!
//! The first two take a [`HandlerJob`] and a [`CancellationToken`] (SIGINT, lease
//! loss) and always end with a [`HandlerOutcome`]: they enforce the job's
//! timeout themselves, stop the handler on timeout or cancellation (a 1 s
//! grace, then a hard kill), and return only after the handler's processes
//! are gone. A message can never choose the module or the program; both are
//! fixed when the handler is loaded.
//!
//! Neither is a sandbox: the handler runs as the worker's OS user. What they
//! guarantee is that known credential variables
//! ([`is_credential_entry`](relayger_core::process_abi::is_credential_entry),
//! plus any value given to `withhold_values`, e.g. the profile token) never
//! reach it, and that its output never mixes into the worker's stdout: the
//! handler's stdout is a pipe the runner reads, and whatever the handler logs
//! goes to the worker's stderr, one prefixed line at a time.

#[cfg(any(feature = "node", feature = "process"))]
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use relayger_core::process_abi::ProcessConfigError;
#[cfg(any(feature = "node", feature = "process"))]
use relayger_core::{
    process_abi::ProcessRequest,
    sealed::SealedContent,
    wire::{JobResult, MessageEnvelope, Timestamp, Usage},
};
use tokio_util::sync::CancellationToken;
#[cfg(any(feature = "node", feature = "process"))]
use uuid::Uuid;

#[cfg(feature = "a2a")]
mod a2a;
#[cfg(any(feature = "node", feature = "process"))]
mod adapter;
#[cfg(feature = "process")]
mod context;
#[cfg(any(feature = "node", feature = "process"))]
mod executable;
#[cfg(feature = "node")]
mod node;
#[cfg(any(feature = "node", feature = "process"))]
mod output;
#[cfg(feature = "process")]
mod process;
#[cfg(any(feature = "node", feature = "process"))]
mod tree;

#[cfg(feature = "a2a")]
pub use a2a::A2aHandler;
#[cfg(feature = "node")]
pub use node::NodeModuleHandler;
#[cfg(feature = "process")]
pub use process::ProcessHandler;

/// How long a stopped handler gets between the polite signal (abort,
/// SIGTERM) and the hard one (thread terminate, SIGKILL).
#[cfg(any(feature = "node", feature = "process"))]
const STOP_GRACE: Duration = Duration::from_secs(1);

#[cfg(any(feature = "node", feature = "process"))]
/// One job, as an external handler receives it.
#[derive(Debug, Clone)]
pub(crate) struct HandlerJob {
    /// The message that triggered the job.
    pub message: MessageEnvelope,
    /// The opened content of a sealed message the worker's key opens.
    pub opened: Option<SealedContent>,
    /// 1 for the first attempt.
    pub attempt: u32,
    /// Stable across attempts: the idempotency key for external work.
    pub job_key: String,
    /// The runtime the job belongs to.
    pub runtime_id: Uuid,
    /// The question's deadline, if it has one (already folded into
    /// `timeout_ms`; passed on for the handler's information).
    pub deadline: Option<Timestamp>,
    /// The time this attempt has, from when `run` is called.
    pub timeout_ms: u64,
}

#[cfg(any(feature = "node", feature = "process"))]
impl HandlerJob {
    fn request(&self) -> ProcessRequest<'_> {
        ProcessRequest {
            message: &self.message,
            opened: self.opened.as_ref(),
            attempt: self.attempt,
            job_key: &self.job_key,
            runtime_id: self.runtime_id,
            deadline: self.deadline,
            timeout_ms: self.timeout_ms,
            context: None,
        }
    }

    /// The prefix of the handler's forwarded log lines: which handler, which
    /// message (its first 8 hex digits), so concurrent jobs stay apart.
    fn log_prefix(&self, handler: &str) -> String {
        let id = self.message.message_id.simple().to_string();
        format!("[{handler} {}]", &id[..8])
    }
}

#[cfg(any(feature = "node", feature = "process"))]
/// How an external handler's attempt ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HandlerOutcome {
    /// The handler answered: reply, skip, note, usage — or an error it
    /// reported itself (`{error, usage?}`), which fails the attempt with
    /// that reason.
    Completed(JobResult),
    /// The runner ended the attempt. `reason` starts with a snake_case kind:
    /// `timeout`, `cancelled`, `invalid_output: …`, `response_too_large: …`,
    /// `request_too_large: …`, `exit_status: N`, `signal: N`,
    /// `out_of_memory`, `exception: …`, `module_failed: …`,
    /// `spawn_failed: …`, `node_host_failed: …`, `context_failed: …`.
    /// `usage` is whatever the
    /// handler still managed to report (a valid result printed before it was
    /// stopped), else `None`.
    Failed {
        /// Why the attempt failed.
        reason: String,
        /// What the attempt used, if the handler reported it.
        usage: Option<Usage>,
    },
}

#[cfg(any(feature = "node", feature = "process"))]
impl HandlerOutcome {
    fn failed(reason: impl Into<String>) -> HandlerOutcome {
        HandlerOutcome::Failed {
            reason: reason.into(),
            usage: None,
        }
    }

    /// A job that cannot start: already cancelled, or no time left.
    fn before_start(job: &HandlerJob, cancel: &CancellationToken) -> Option<HandlerOutcome> {
        if cancel.is_cancelled() {
            Some(HandlerOutcome::failed(StopReason::Cancelled.as_str()))
        } else if job.timeout_ms == 0 {
            Some(HandlerOutcome::failed(StopReason::Timeout.as_str()))
        } else {
            None
        }
    }
}

/// Why the runner stopped a handler that was still running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StopReason {
    Timeout,
    Cancelled,
}

impl StopReason {
    fn as_str(self) -> &'static str {
        match self {
            StopReason::Timeout => "timeout",
            StopReason::Cancelled => "cancelled",
        }
    }
}

/// Waits for the job's time to run out or for `cancel`, whichever is first.
async fn stop_signal(timeout_ms: u64, cancel: &CancellationToken) -> StopReason {
    tokio::select! {
        () = tokio::time::sleep(Duration::from_millis(timeout_ms)) => StopReason::Timeout,
        () = cancel.cancelled() => StopReason::Cancelled,
    }
}

/// Why a handler could not be loaded. Shown to the operator at start, so
/// each names the file and what to change.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HandlerConfigError {
    /// The file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// `worker.json` breaks the rules of the process ABI.
    #[error("{}: {source}", path.display())]
    Config {
        /// The `worker.json`.
        path: PathBuf,
        /// The field at fault.
        source: ProcessConfigError,
    },
    /// The executable or working directory of `worker.json` is unusable.
    #[error("{}: {problem}", path.display())]
    Process {
        /// The `worker.json`.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// The module file is unusable.
    #[error("handler module {}: {problem}", path.display())]
    Module {
        /// The module.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// No usable Node.js.
    #[error("{0}")]
    Node(String),
    /// The URL of an outside A2A agent is unusable.
    #[error("--a2a {url}: {problem}")]
    AgentUrl {
        /// The URL as given.
        url: String,
        /// What is wrong.
        problem: String,
    },
}

#[cfg(any(feature = "node", feature = "process"))]
/// Values no handler may see, e.g. the profile token: any variable holding
/// one of them is withheld whatever its name. Never printed.
#[derive(Clone, Default)]
struct WithheldValues(Vec<OsString>);

#[cfg(any(feature = "node", feature = "process"))]
impl WithheldValues {
    fn add(&mut self, values: impl IntoIterator<Item = String>) {
        self.0.extend(
            values
                .into_iter()
                .filter(|value| !value.is_empty())
                .map(OsString::from),
        );
    }

    fn allows(&self, value: &OsString) -> bool {
        !self.0.contains(value)
    }
}

#[cfg(any(feature = "node", feature = "process"))]
impl std::fmt::Debug for WithheldValues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "WithheldValues({} hidden)", self.0.len())
    }
}

/// The worker's environment without credential variables: what a Node
/// module handler inherits.
#[cfg(feature = "node")]
fn scrubbed_environment(withheld: &WithheldValues) -> Vec<(OsString, OsString)> {
    use relayger_core::process_abi::is_credential_entry;
    std::env::vars_os()
        .filter(|(name, value)| {
            let credential = match (name.to_str(), value.to_str()) {
                (Some(name), Some(value)) => is_credential_entry(name, value),
                // Not Unicode: cannot be judged, so not passed.
                _ => true,
            };
            !credential && withheld.allows(value)
        })
        .collect()
}

#[cfg(any(feature = "node", feature = "process"))]
/// A handler's free text (an exception, an OS error) as one short line
/// for a failure reason.
fn one_line(text: &str) -> String {
    const MAX_CHARS: usize = 300;
    let flat: String = text
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(MAX_CHARS)
        .collect();
    flat
}
