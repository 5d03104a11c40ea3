//! `--process worker.json`: the operator's program, one process per job.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::Instant;

use relayger_core::process_abi::{
    ContextConfig, ProcessConfig, ProcessRequest, RequestContext, is_credential_entry,
    parse_response_output,
};
use tokio::io::AsyncWriteExt;
use tokio::process::Command;
use tokio_util::sync::CancellationToken;

use super::context::read_context;
use super::executable::{find_on_path, is_executable};
use super::output::{HandlerLog, PIPE_GRACE, forward_log, read_capped};
use super::tree::ProcessTree;
use super::{
    HandlerConfigError, HandlerJob, HandlerOutcome, StopReason, WithheldValues, stop_signal,
};
use crate::client::Client;

/// A `worker.json` loaded and checked: which program runs, where, with
/// which variables and limits. See `docs/process-abi.md`.
#[derive(Debug, Clone)]
pub struct ProcessHandler {
    label: String,
    executable: PathBuf,
    argv: Vec<String>,
    cwd: PathBuf,
    env: Vec<String>,
    max_request_bytes: usize,
    max_response_bytes: usize,
    max_stderr_bytes: usize,
    context: ContextConfig,
    client: Option<Client>,
    withheld: WithheldValues,
}

impl ProcessHandler {
    /// Reads and validates `worker.json`. A relative `executable` with a
    /// path separator and a relative `cwd` are resolved against the file's
    /// directory, a bare program name against the worker's `PATH`; `cwd`
    /// defaults to the file's directory.
    pub fn load(path: &Path) -> Result<ProcessHandler, HandlerConfigError> {
        let read_error = |source| HandlerConfigError::Read {
            path: path.to_owned(),
            source,
        };
        let text = std::fs::read_to_string(path).map_err(read_error)?;
        let config = ProcessConfig::parse(&text).map_err(|source| HandlerConfigError::Config {
            path: path.to_owned(),
            source,
        })?;
        let problem = |problem: String| HandlerConfigError::Process {
            path: path.to_owned(),
            problem,
        };
        let base = std::path::absolute(path)
            .map_err(read_error)?
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let executable = resolve_executable(&base, &config.executable).map_err(problem)?;
        let cwd = match &config.cwd {
            Some(cwd) => base.join(cwd),
            None => base,
        };
        if !cwd.is_dir() {
            return Err(problem(format!(
                "`cwd` {} is not a directory",
                cwd.display()
            )));
        }
        let label = path
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_else(|| "process".to_owned());
        Ok(ProcessHandler {
            label,
            executable,
            argv: config.argv,
            cwd,
            env: config.env,
            max_request_bytes: config.max_request_bytes,
            max_response_bytes: config.max_response_bytes,
            max_stderr_bytes: config.max_stderr_bytes,
            context: config.context,
            client: None,
            withheld: WithheldValues::default(),
        })
    }

    /// Withholds every allowed variable whose value is one of `values`
    /// (pass the profile token), whatever its name.
    pub fn withhold_values(mut self, values: impl IntoIterator<Item = String>) -> Self {
        self.withheld.add(values);
        self
    }

    /// The client the worker reads `context` with (the worker's own, which
    /// holds the token and the agent's key; the handler never gets either).
    /// Needed when `worker.json` asks for context: without it such a job
    /// fails with `context_failed`.
    pub fn with_client(mut self, client: Client) -> Self {
        self.client = Some(client);
        self
    }

    /// Whether `worker.json` asks for context (and so needs
    /// [`with_client`](ProcessHandler::with_client)).
    pub fn reads_context(&self) -> bool {
        !self.context.is_empty()
    }

    /// The program that runs, resolved to an absolute path.
    pub fn executable(&self) -> &Path {
        &self.executable
    }

    /// Runs one job: one process in its own group, one request line on
    /// stdin, one response line expected on stdout, exit status 0. Returns
    /// only after the process group is gone.
    pub(crate) async fn run(&self, job: &HandlerJob, cancel: CancellationToken) -> HandlerOutcome {
        if let Some(outcome) = HandlerOutcome::before_start(job, &cancel) {
            return outcome;
        }
        // Reading the context counts against the attempt's time: the
        // program gets (and is told) what is left.
        let started = Instant::now();
        let context = tokio::select! {
            read = self.read_context(job) => match read {
                Ok(context) => context,
                Err(reason) => return HandlerOutcome::failed(reason),
            },
            reason = stop_signal(job.timeout_ms, &cancel) => {
                return HandlerOutcome::failed(reason.as_str());
            }
        };
        let timeout_ms = match context {
            Some(_) => {
                let spent = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
                job.timeout_ms.saturating_sub(spent)
            }
            // Nothing was read: the program gets the attempt's whole time.
            None => job.timeout_ms,
        };
        if timeout_ms == 0 {
            return HandlerOutcome::failed(StopReason::Timeout.as_str());
        }
        let request = ProcessRequest {
            timeout_ms,
            context: context.as_ref(),
            ..job.request()
        };
        let request = match request.to_line() {
            Ok(line) if line.len() <= self.max_request_bytes => line,
            Ok(line) => {
                return HandlerOutcome::failed(format!(
                    "request_too_large: {} bytes, maxRequestBytes is {}",
                    line.len(),
                    self.max_request_bytes
                ));
            }
            Err(error) => return HandlerOutcome::failed(format!("request_failed: {error}")),
        };
        let mut command = Command::new(&self.executable);
        command
            .args(&self.argv)
            .current_dir(&self.cwd)
            .env_clear()
            .envs(self.environment());
        let program = self.executable.display().to_string();
        let mut piped = match ProcessTree::spawn_piped(&mut command, &program).await {
            Ok(piped) => piped,
            Err(reason) => return HandlerOutcome::failed(reason),
        };
        // The process may exit without reading: a broken pipe is its business.
        let mut stdin = piped.stdin;
        let writer = tokio::spawn(async move {
            let _ = stdin.write_all(&request).await;
            let _ = stdin.shutdown().await;
        });
        let reader = tokio::spawn(read_capped(piped.stdout, self.max_response_bytes));
        let log = HandlerLog::new(job.log_prefix(&self.label), self.max_stderr_bytes);
        let logger = forward_log(piped.stderr, log);

        let (stopped, leader) = tokio::select! {
            status = piped.child.wait() => (None, status.ok()),
            reason = stop_signal(timeout_ms, &cancel) => (Some(reason), None),
        };
        let status = piped.tree.end(&mut piped.child, leader).await;
        writer.abort();
        let stdout = tokio::time::timeout(PIPE_GRACE, reader).await;
        if tokio::time::timeout(PIPE_GRACE, logger).await.is_err() {
            tracing::warn!(handler = %self.label, "handler stderr still open after its process group ended");
        }
        let stdout = match stdout {
            Ok(Ok(bytes)) => bytes,
            _ => Vec::new(),
        };
        self.outcome(stopped, status, &stdout)
    }

    /// The context `worker.json` asks for, `None` when it asks for none.
    async fn read_context(&self, job: &HandlerJob) -> Result<Option<RequestContext>, String> {
        if self.context.is_empty() {
            return Ok(None);
        }
        let Some(client) = &self.client else {
            return Err(
                "context_failed: the worker gave the handler no client to read it with".to_owned(),
            );
        };
        read_context(client, &self.context, job).await.map(Some)
    }

    fn outcome(
        &self,
        stopped: Option<StopReason>,
        status: Option<ExitStatus>,
        stdout: &[u8],
    ) -> HandlerOutcome {
        let parsed = parse_response_output(stdout, self.max_response_bytes);
        let usage = parsed.as_ref().ok().and_then(|result| result.usage);
        let failed = |reason: String| HandlerOutcome::Failed { reason, usage };
        if let Some(reason) = stopped {
            return failed(reason.as_str().to_owned());
        }
        match status {
            Some(status) if status.success() => {}
            Some(status) => return failed(describe_exit(status)),
            None => return failed("exit_status: unknown".to_owned()),
        }
        match parsed {
            Ok(result) => HandlerOutcome::Completed(result),
            Err(error) => HandlerOutcome::failed(error.reason()),
        }
    }

    /// The allowed variables the worker has, minus withheld values.
    /// Credential names were refused when `worker.json` was loaded; a
    /// connection string that carries a password is dropped here.
    fn environment(&self) -> Vec<(OsString, OsString)> {
        self.env
            .iter()
            .filter_map(|name| Some((OsString::from(name), std::env::var_os(name)?)))
            .filter(|(name, value)| {
                let passed = match (name.to_str(), value.to_str()) {
                    (Some(name), Some(text)) => !is_credential_entry(name, text),
                    _ => true,
                };
                passed && self.withheld.allows(value)
            })
            .collect()
    }
}

/// `exit_status: N`, or `signal: N` for a process a signal ended.
fn describe_exit(status: ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return format!("signal: {signal}");
        }
    }
    match status.code() {
        Some(code) => format!("exit_status: {code}"),
        None => "exit_status: unknown".to_owned(),
    }
}

/// A path with a separator is the operator's file (relative to
/// `worker.json`); a bare name is looked up on `PATH` now, once, so a later
/// change of `PATH` cannot change the program.
fn resolve_executable(base: &Path, executable: &str) -> Result<PathBuf, String> {
    let written = Path::new(executable);
    let candidate = if written.components().count() > 1 || written.is_absolute() {
        base.join(written)
    } else {
        find_on_path(executable).ok_or_else(|| {
            format!("`executable` {executable:?} was not found on PATH; write its full path")
        })?
    };
    if !candidate.is_file() {
        return Err(format!(
            "`executable` {} is not a file",
            candidate.display()
        ));
    }
    if !is_executable(&candidate) {
        return Err(format!(
            "`executable` {} is not executable (chmod +x, or name the interpreter \
             as executable and the script in argv)",
            candidate.display()
        ));
    }
    Ok(candidate)
}
