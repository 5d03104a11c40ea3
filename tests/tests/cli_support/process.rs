//! A long-running `relayger` (e.g. `worker run`) in the background: its
//! stdout lines (NDJSON with `--json`) are awaited one by one, its exit and
//! stderr collected at the end.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use relayger_tests::signal_process;
use serde_json::Value;

use super::CliTest;

impl CliTest {
    /// Starts `relayger ARGS` (e.g. `worker run …`) in the background with
    /// extra environment variables; its stdout lines arrive as events.
    pub(crate) fn spawn(&self, args: &[&str], env: &[(&str, &str)]) -> WorkerProcess {
        let mut command = self.cli.command().expect("relayger command");
        command
            .args(args)
            .envs(env.iter().copied())
            .current_dir(&self.cwd);
        WorkerProcess::spawn(command, &format!("relayger {}", args.join(" ")))
    }

    /// Starts `sh -c 'exec LINE'` in the background: a documented
    /// long-running command line, run as written.
    pub(crate) fn spawn_shell(&self, line: &str, env: &[(&str, &str)]) -> WorkerProcess {
        self.spawn_shell_in(line, env, &self.cwd)
    }

    /// [`spawn_shell`](Self::spawn_shell) in `cwd` (e.g. the repository
    /// root, for a line naming `./examples/…`).
    pub(crate) fn spawn_shell_in(
        &self,
        line: &str,
        env: &[(&str, &str)],
        cwd: &Path,
    ) -> WorkerProcess {
        let mut command = self
            .cli
            .shell_command(&format!("exec {line}"), cwd)
            .expect("sh command");
        command.envs(env.iter().copied());
        WorkerProcess::spawn(command, line)
    }
}

/// How long a worker test waits for an event before failing.
pub(crate) const EVENT_TIMEOUT: Duration = Duration::from_secs(30);

/// A running `relayger` process whose stdout is read line by line (NDJSON
/// with `--json`). Dropping it kills the process.
pub(crate) struct WorkerProcess {
    child: Option<Child>,
    label: String,
    lines: mpsc::Receiver<String>,
    seen: Vec<Value>,
    stderr: Arc<Mutex<String>>,
}

/// How a [`WorkerProcess`] ended.
#[derive(Debug)]
pub(crate) struct WorkerExit {
    /// `None` when killed by a signal.
    pub(crate) code: Option<i32>,
    /// Every line it printed, as JSON where it was JSON.
    pub(crate) events: Vec<Value>,
    pub(crate) stderr: String,
}

impl WorkerProcess {
    pub(crate) fn spawn(mut command: std::process::Command, label: &str) -> WorkerProcess {
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("spawn relayger");
        let stdout = child.stdout.take().expect("stdout");
        let mut stderr_pipe = child.stderr.take().expect("stderr");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let collected = Arc::clone(&stderr);
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr_pipe.read_to_string(&mut text);
            if let Ok(mut all) = collected.lock() {
                all.push_str(&text);
            }
        });
        WorkerProcess {
            child: Some(child),
            label: label.to_owned(),
            lines,
            seen: Vec::new(),
            stderr,
        }
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Every line seen so far.
    pub(crate) fn seen(&self) -> &[Value] {
        &self.seen
    }

    /// The names of the events seen so far.
    pub(crate) fn event_names(&self) -> Vec<String> {
        self.seen
            .iter()
            .map(|event| event["event"].as_str().unwrap_or("?").to_owned())
            .collect()
    }

    /// Waits for the first line from now on that satisfies `matches`.
    pub(crate) fn wait_for(
        &mut self,
        what: &str,
        timeout: Duration,
        matches: impl Fn(&Value) -> bool,
    ) -> Value {
        let until = Instant::now() + timeout;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let value = serde_json::from_str(&line).unwrap_or(Value::String(line));
                    self.seen.push(value.clone());
                    if matches(&value) {
                        return value;
                    }
                }
                Err(err) => panic!(
                    "{}: no {what} within {timeout:?} ({err}); seen: {:#?}; stderr: {}",
                    self.label,
                    self.seen,
                    self.stderr_text()
                ),
            }
        }
    }

    /// The next line within `timeout`, or `None`.
    pub(crate) fn poll_line(&mut self, timeout: Duration) -> Option<Value> {
        let line = self.lines.recv_timeout(timeout).ok()?;
        let value = serde_json::from_str(&line).unwrap_or(Value::String(line));
        self.seen.push(value.clone());
        Some(value)
    }

    /// Waits for the next `{"event": name}` line.
    pub(crate) fn wait_event(&mut self, name: &str) -> Value {
        self.wait_for(name, EVENT_TIMEOUT, |event| event["event"] == name)
    }

    /// Sends a signal ("INT", "TERM", "KILL") to the process.
    pub(crate) fn signal(&self, signal: &str) {
        signal_process(self.pid(), signal).expect("kill");
    }

    /// Whether the process exits within `timeout` (it is left running
    /// otherwise; [`wait_exit`](Self::wait_exit) still collects it).
    pub(crate) fn exits_within(&mut self, timeout: Duration) -> bool {
        let child = self.child.as_mut().expect("running");
        let until = Instant::now() + timeout;
        loop {
            if child.try_wait().expect("try_wait").is_some() {
                return true;
            }
            if Instant::now() >= until {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits for the process to exit (killing it after `timeout`), and
    /// collects the rest of its output.
    pub(crate) fn wait_exit(mut self, timeout: Duration) -> WorkerExit {
        let mut child = self.child.take().expect("running");
        let until = Instant::now() + timeout;
        let status = loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                break status;
            }
            if Instant::now() >= until {
                let _ = child.kill();
                panic!(
                    "{} did not exit within {timeout:?}; seen: {:#?}",
                    self.label, self.seen
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        // The reader ends at end of file.
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(5)) {
            self.seen
                .push(serde_json::from_str(&line).unwrap_or(Value::String(line)));
        }
        // Give the stderr reader a moment to hand over what it read.
        let stderr_until = Instant::now() + Duration::from_secs(5);
        while Arc::strong_count(&self.stderr) > 1 && Instant::now() < stderr_until {
            std::thread::sleep(Duration::from_millis(10));
        }
        WorkerExit {
            code: status.code(),
            events: std::mem::take(&mut self.seen),
            stderr: self.stderr_text(),
        }
    }

    fn stderr_text(&self) -> String {
        self.stderr
            .lock()
            .map(|text| text.clone())
            .unwrap_or_default()
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
