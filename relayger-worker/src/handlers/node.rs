//! `--handler file.mjs|.js`: the operator's module in a fresh Node worker
//! thread per job.
//!
//! Each job starts one `node` process running the embedded host script
//! (`node_host.mjs`), which creates one worker thread with a 128 MiB heap
//! limit, calls the module's `handle` and reports back. One process per job
//! (rather than one long-lived host) costs a Node start-up (tens of
//! milliseconds) but means nothing a module leaves behind — timers,
//! globals, a half-dead thread, child processes — can reach the next job,
//! and a host that misbehaves is ended like any process handler: its whole
//! process group, SIGTERM then SIGKILL.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use relayger_core::process_abi::{
    DEFAULT_MAX_RESPONSE_BYTES, DEFAULT_MAX_STDERR_BYTES, parse_result_value,
};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::process::Command;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::executable::find_on_path;
use super::output::{HandlerLog, PIPE_GRACE, forward_log, read_lines};
use super::tree::ProcessTree;
use super::{
    HandlerConfigError, HandlerJob, HandlerOutcome, STOP_GRACE, StopReason, WithheldValues,
    one_line, scrubbed_environment, stop_signal,
};

/// The resident memory of a whole handler process (the host, the module's
/// thread, its heap, Buffers, typed arrays and native memory): the host
/// checks it every 10 ms and ends the job past it (`out_of_memory: …`).
/// The 128 MiB heap limit alone does not bound Buffers.
pub(crate) const NODE_MAX_RSS_BYTES: u64 = 384 * 1024 * 1024;
/// The host script, run with `node --input-type=module --eval`.
const NODE_HOST: &str = include_str!("node_host.mjs");
/// The oldest Node with everything the host relies on.
const MIN_NODE_MAJOR: u32 = 20;
/// After asking the host to stop, how long it may take: the grace it gives
/// the module, the thread's termination and the report. Past this the host
/// itself is treated as stuck and its process group is ended.
const HOST_STOP_WAIT: Duration = STOP_GRACE.saturating_add(Duration::from_secs(2));

/// A module handler: a checked `.mjs`/`.js` file and the Node that runs it.
#[derive(Debug, Clone)]
pub struct NodeModuleHandler {
    label: String,
    module: PathBuf,
    node: PathBuf,
    withheld: WithheldValues,
}

impl NodeModuleHandler {
    /// Checks the module (an existing `.mjs` or `.js` file) and finds Node
    /// 20 or newer on `PATH`.
    pub fn load(path: &Path) -> Result<NodeModuleHandler, HandlerConfigError> {
        let node = find_on_path("node");
        NodeModuleHandler::load_with_node(path, node)
    }

    fn load_with_node(
        path: &Path,
        node: Option<PathBuf>,
    ) -> Result<NodeModuleHandler, HandlerConfigError> {
        let problem = |problem: &str| HandlerConfigError::Module {
            path: path.to_owned(),
            problem: problem.to_owned(),
        };
        let extension = path.extension().and_then(|ext| ext.to_str());
        if !matches!(extension, Some("mjs" | "js")) {
            return Err(problem("must be a .mjs or .js file exporting `handle`"));
        }
        let module = std::fs::canonicalize(path)
            .map_err(|error| problem(&format!("cannot be read: {error}")))?;
        if !module.is_file() {
            return Err(problem("is not a file"));
        }
        let node = node.ok_or_else(|| {
            HandlerConfigError::Node(format!(
                "node was not found on PATH; --handler needs Node.js {MIN_NODE_MAJOR} or newer \
                 (install it from https://nodejs.org or your package manager), \
                 or use --process for other languages"
            ))
        })?;
        check_node_version(&node)?;
        let label = module
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_else(|| "module".to_owned());
        Ok(NodeModuleHandler {
            label,
            module,
            node,
            withheld: WithheldValues::default(),
        })
    }

    /// Withholds every variable whose value is one of `values` (pass the
    /// profile token), whatever its name.
    pub fn withhold_values(mut self, values: impl IntoIterator<Item = String>) -> Self {
        self.withheld.add(values);
        self
    }

    /// The module, as an absolute path.
    pub fn module(&self) -> &Path {
        &self.module
    }

    /// Runs one job in a fresh worker thread. On timeout or cancellation the
    /// module's `signal` aborts and the thread is terminated if it has not
    /// ended within [`STOP_GRACE`]. Returns only after the host process (and
    /// anything it started) is gone.
    pub(crate) async fn run(&self, job: &HandlerJob, cancel: CancellationToken) -> HandlerOutcome {
        if let Some(outcome) = HandlerOutcome::before_start(job, &cancel) {
            return outcome;
        }
        let nonce = Uuid::new_v4().simple().to_string();
        let start = json!({
            "nonce": nonce,
            "modulePath": self.module,
            "graceMs": STOP_GRACE.as_millis(),
            "maxRssBytes": NODE_MAX_RSS_BYTES,
            "request": job.request(),
        });
        let Ok(mut start) = serde_json::to_vec(&start) else {
            return HandlerOutcome::failed("request_failed: the job is not JSON");
        };
        start.push(b'\n');
        let mut command = Command::new(&self.node);
        command
            .args(["--input-type=module", "--eval", NODE_HOST])
            .env_clear()
            .envs(scrubbed_environment(&self.withheld));
        let mut piped = match ProcessTree::spawn_piped(&mut command, "node").await {
            Ok(piped) => piped,
            Err(reason) => return HandlerOutcome::failed(reason),
        };
        // stdin stays open: it carries the stop command, and its end tells
        // the host that the worker is gone.
        let _ = piped.stdin.write_all(&start).await;

        let prefix = job.log_prefix(&self.label);
        let mut stray = HandlerLog::new(prefix.clone(), DEFAULT_MAX_STDERR_BYTES);
        let marker = format!("{nonce} ");
        let stdout = piped.stdout;
        let reports = tokio::spawn(async move {
            let mut report = None;
            read_lines(stdout, MAX_REPORT_LINE, |line, whole| {
                match line.strip_prefix(marker.as_bytes()) {
                    Some(json) if report.is_none() => report = Some(read_report(json, whole)),
                    // Written to fd 1 by the module itself: a log line.
                    _ => stray.line(line, whole),
                }
            })
            .await;
            report
        });
        let logger = forward_log(
            piped.stderr,
            HandlerLog::new(prefix, DEFAULT_MAX_STDERR_BYTES),
        );

        let (stopped, mut leader) = tokio::select! {
            status = piped.child.wait() => (None, status.ok()),
            reason = stop_signal(job.timeout_ms, &cancel) => (Some(reason), None),
        };
        if let Some(reason) = stopped {
            let command = format!("{}\n", json!({ "stop": reason.as_str() }));
            let _ = piped.stdin.write_all(command.as_bytes()).await;
            leader = tokio::time::timeout(HOST_STOP_WAIT, piped.child.wait())
                .await
                .ok()
                .and_then(Result::ok);
        }
        drop(piped.stdin);
        let status = piped.tree.end(&mut piped.child, leader).await;
        let report = match tokio::time::timeout(PIPE_GRACE, reports).await {
            Ok(Ok(report)) => report,
            _ => None,
        };
        let _ = tokio::time::timeout(PIPE_GRACE, logger).await;
        outcome(stopped, status, report)
    }
}

/// The host's report line may carry a whole result.
const MAX_REPORT_LINE: usize = DEFAULT_MAX_RESPONSE_BYTES + 1024;

/// What the host reports, once per job.
#[derive(Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum HostReport {
    /// `handle` settled with a value; absent when it returned `undefined`.
    Returned {
        value: Option<Value>,
    },
    /// `JSON.stringify` refused the value (a cycle, a BigInt).
    Unserializable {
        message: String,
    },
    /// The import failed or has no `handle` (`import`), or `handle` threw
    /// (`handle`).
    Threw {
        phase: String,
        message: String,
    },
    OutOfMemory,
    /// The whole process went over [`NODE_MAX_RSS_BYTES`].
    #[serde(rename_all = "camelCase")]
    MemoryLimit {
        rss_bytes: u64,
        limit_bytes: u64,
    },
    /// The thread ended without a result (the module called `process.exit`).
    Exited {
        code: i64,
    },
    /// Stopped on request; `late` is a result that arrived during the grace.
    Stopped {
        late: Option<Value>,
    },
}

fn read_report(json: &[u8], whole: bool) -> Result<HostReport, String> {
    if !whole {
        return Err(format!(
            "response_too_large: the result is more than {DEFAULT_MAX_RESPONSE_BYTES} bytes"
        ));
    }
    serde_json::from_slice(json).map_err(|error| format!("node_host_failed: bad report: {error}"))
}

fn outcome(
    stopped: Option<StopReason>,
    status: Option<ExitStatus>,
    report: Option<Result<HostReport, String>>,
) -> HandlerOutcome {
    if let Some(reason) = stopped {
        let usage = match report {
            Some(Ok(HostReport::Stopped { late: Some(value) }))
            | Some(Ok(HostReport::Returned { value: Some(value) })) => parse_result_value(value)
                .ok()
                .and_then(|result| result.usage),
            _ => None,
        };
        return HandlerOutcome::Failed {
            reason: reason.as_str().to_owned(),
            usage,
        };
    }
    let report = match report {
        Some(Ok(report)) => report,
        Some(Err(reason)) => return HandlerOutcome::failed(reason),
        None => {
            let status = status.map_or("unknown".to_owned(), |status| status.to_string());
            return HandlerOutcome::failed(format!("node_host_failed: no report, {status}"));
        }
    };
    match report {
        HostReport::Returned { value: Some(value) } => match parse_result_value(value) {
            Ok(result) => HandlerOutcome::Completed(result),
            Err(error) => HandlerOutcome::failed(error.reason()),
        },
        HostReport::Returned { value: None } => HandlerOutcome::failed(
            "invalid_output: handle returned undefined; return an object such as {reply} or {skip}",
        ),
        HostReport::Unserializable { message } => HandlerOutcome::failed(format!(
            "invalid_output: the result is not JSON: {}",
            one_line(&message)
        )),
        HostReport::Threw { phase, message } => {
            let kind = if phase == "import" {
                "module_failed"
            } else {
                "exception"
            };
            HandlerOutcome::failed(format!("{kind}: {}", one_line(&message)))
        }
        HostReport::OutOfMemory => HandlerOutcome::failed("out_of_memory"),
        HostReport::MemoryLimit {
            rss_bytes,
            limit_bytes,
        } => HandlerOutcome::failed(format!(
            "out_of_memory: the handler's process used {} MiB, over its limit of {} MiB \
             (Buffers and other memory outside the JavaScript heap count too)",
            rss_bytes / (1024 * 1024),
            limit_bytes / (1024 * 1024)
        )),
        HostReport::Exited { code } => HandlerOutcome::failed(format!(
            "exit_status: {code} (the module ended its thread without a result)"
        )),
        HostReport::Stopped { .. } => HandlerOutcome::failed("node_host_failed: stopped unasked"),
    }
}

/// Runs `node --version` and refuses anything older than
/// [`MIN_NODE_MAJOR`], naming what was found.
fn check_node_version(node: &Path) -> Result<(), HandlerConfigError> {
    let output = std::process::Command::new(node)
        .arg("--version")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .map_err(|error| {
            HandlerConfigError::Node(format!("{} does not run: {error}", node.display()))
        })?;
    let version = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    match node_major(&version) {
        Some(major) if major >= MIN_NODE_MAJOR => Ok(()),
        _ => Err(HandlerConfigError::Node(format!(
            "{} is Node.js {version:?}; --handler needs Node.js {MIN_NODE_MAJOR} or newer \
             (install it from https://nodejs.org or your package manager)",
            node.display()
        ))),
    }
}

/// `v20.11.1` → 20.
fn node_major(version: &str) -> Option<u32> {
    version.strip_prefix('v')?.split('.').next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_versions() {
        let table = [
            ("v20.11.1", Some(20)),
            ("v22.0.0", Some(22)),
            ("v18.19.0", Some(18)),
            ("20.1.0", None),
            ("", None),
        ];
        for (text, major) in table {
            assert_eq!(node_major(text), major, "{text}");
        }
    }

    #[test]
    fn missing_node_names_what_to_install() {
        let module =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/agents/message-handler.mjs");
        let error = NodeModuleHandler::load_with_node(&module, None).expect_err("no node");
        let text = error.to_string();
        assert!(text.contains("node was not found on PATH"), "{text}");
        assert!(text.contains("Node.js 20 or newer"), "{text}");
    }
}
