//! Shared helpers of the external handler tests: jobs, scratch directories,
//! process liveness, and re-running one test of this binary as a child
//! process ("probe") to observe its real stdout, stderr and environment.
#![allow(dead_code, unreachable_pub)]

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use relayger_core::ids::IdentityNumber;
use relayger_core::wire::{IdentityKind, IdentityRef, MessageEnvelope, Timestamp};
use relayger_worker::{CancellationToken, Handler, HandlerError, HandlerInput, HandlerOutput};
use uuid::Uuid;

/// The variable that turns a probe test on in the child process.
pub const PROBE_ENV: &str = "HANDLERS_TEST_PROBE";

/// A job for `text` with `timeout_ms` to run.
pub fn job(text: &str, timeout_ms: u64) -> HandlerInput {
    let message_id = Uuid::new_v4();
    let message = MessageEnvelope {
        conversation_id: Uuid::new_v4(),
        message_id,
        seq: 7,
        sender: IdentityRef {
            id: Uuid::new_v4(),
            number: IdentityNumber::parse("100001").expect("number"),
            kind: IdentityKind::Person,
        },
        text: Some(text.to_owned()),
        sealed: None,
        ask: true,
        deadline: None,
        reply_to: None,
        by_runtime: false,
        created_at: Timestamp::now(),
    };
    HandlerInput::new(
        message,
        format!("job-{message_id}"),
        Uuid::new_v4(),
        timeout_ms,
    )
}

/// Runs `job` through the public [`Handler`] interface, as the worker does,
/// with `cancel` as its cancellation token.
pub async fn run(
    handler: &impl Handler,
    job: &HandlerInput,
    cancel: CancellationToken,
) -> Result<HandlerOutput, HandlerError> {
    let mut input = job.clone();
    input.cancel = cancel;
    handler.handle(input).await
}

/// Runs a job for `text` with 20 s to run and no cancellation: the plain
/// attempt most tests make.
pub async fn run_text(handler: &impl Handler, text: &str) -> Result<HandlerOutput, HandlerError> {
    run(handler, &job(text, 20_000), CancellationToken::new()).await
}

/// Runs a job with `timeout_ms` that the handler never answers, asserts it
/// failed with `timeout` and no usage, and that it ended within `within`
/// (the timeout plus the grace, below a generous bound for busy machines).
pub async fn assert_times_out(handler: &impl Handler, timeout_ms: u64, within: Range<Duration>) {
    let started = Instant::now();
    let outcome = run(handler, &job("spin", timeout_ms), CancellationToken::new()).await;
    let elapsed = started.elapsed();
    assert_eq!(
        outcome,
        Err(HandlerError {
            code: "timeout".to_owned(),
            usage: None
        })
    );
    assert!(within.contains(&elapsed), "{elapsed:?} not in {within:?}");
}

/// A token cancelled 300 ms from now, while the job runs.
pub fn cancelled_soon() -> CancellationToken {
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        trigger.cancel();
    });
    cancel
}

/// Runs a 60 s job with `cancel` and asserts it failed with `cancelled`
/// far below that timeout: cancellation, not expiry.
pub async fn assert_cancelled_promptly(handler: &impl Handler, cancel: CancellationToken) {
    let started = Instant::now();
    let outcome = run(handler, &job("wait", 60_000), cancel).await;
    assert_eq!(reason_of(&outcome), "cancelled");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
}

/// The line a probe child printed after `marker` (e.g. `PROBE-ENV `).
pub fn probe_line<'a>(stdout: &'a str, marker: &str) -> &'a str {
    stdout
        .lines()
        .find_map(|line| line.split_once(marker).map(|(_, rest)| rest))
        .unwrap_or_else(|| panic!("no {marker:?} line:\n{stdout}"))
}

/// `examples/agents` of the repository.
pub fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/agents")
}

/// A directory of its own under the system temp dir, removed on drop.
#[derive(Debug)]
pub struct ScratchDir(PathBuf);

impl ScratchDir {
    pub fn new() -> ScratchDir {
        let path = std::env::temp_dir().join(format!("relayger-handlers-{}", Uuid::new_v4()));
        std::fs::create_dir_all(&path).expect("create scratch dir");
        ScratchDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Writes `name` with `contents` and returns its path.
    pub fn write(&self, name: &str, contents: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, contents).expect("write scratch file");
        path
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The reply of an answered job, or a panic showing the outcome.
pub fn reply_of(outcome: &Result<HandlerOutput, HandlerError>) -> &str {
    match outcome {
        Ok(output) => output.reply.as_deref().expect("a reply"),
        other => panic!("expected a reply, got {other:?}"),
    }
}

/// The failure reason of a failed attempt, or a panic showing the outcome.
pub fn reason_of(outcome: &Result<HandlerOutput, HandlerError>) -> &str {
    match outcome {
        Err(error) => &error.code,
        other => panic!("expected a failure, got {other:?}"),
    }
}

/// Whether `pid` is a live process. A zombie (dead, not yet reaped by a
/// parent that may never do so, e.g. a container's init) counts as gone.
pub fn process_alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The state follows the parenthesised command name, which may hold spaces.
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.trim_start().chars().next());
    !matches!(state, Some('Z' | 'X') | None)
}

/// Reads the pids a handler script wrote to `path`, waiting a little for
/// the file to appear.
pub fn read_pids(path: &Path) -> Vec<u32> {
    for _ in 0..50 {
        if let Ok(text) = std::fs::read_to_string(path) {
            let pids: Vec<u32> = text
                .split_whitespace()
                .filter_map(|word| word.parse().ok())
                .collect();
            if !pids.is_empty() {
                return pids;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("no pids in {}", path.display());
}

/// Runs the test `name` (`module::test`) of this test binary in a child
/// process with `PROBE_ENV=probe` and the extra variables, and returns what it printed.
/// The child's stdout is exactly what a handler could pollute: its stdout
/// and stderr.
pub fn run_probe(name: &str, probe: &str, env: &[(&str, &str)]) -> (String, String) {
    let exe = std::env::current_exe().expect("test binary");
    let output = Command::new(exe)
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(PROBE_ENV, probe)
        .envs(env.iter().copied())
        .output()
        .expect("run probe");
    assert!(
        output.status.success(),
        "probe {name} failed:\n--- stdout\n{}\n--- stderr\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    (text(&output.stdout), text(&output.stderr))
}

/// The line of a probe child's stderr that ends with `suffix`.
pub fn stderr_line<'a>(stderr: &'a str, suffix: &str) -> &'a str {
    stderr
        .lines()
        .find(|line| line.ends_with(suffix))
        .unwrap_or_else(|| panic!("no line ending {suffix:?} in stderr:\n{stderr}"))
}

/// Whether this process is the probe child for `name`: a probe test
/// does nothing in an ordinary run.
pub fn is_probe(name: &str) -> bool {
    std::env::var(PROBE_ENV).is_ok_and(|probe| probe == name)
}

/// In a probe child: runs a plain job and prints its reply after `marker`
/// on the real stdout, for the parent to read.
pub async fn print_reply(handler: &impl Handler, marker: &str) {
    let outcome = run_text(handler, "q").await;
    println!("{marker}{}", reply_of(&outcome));
}
