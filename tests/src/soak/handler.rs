//! `relayger-soak handle`: the soak's job handler, run by the workers
//! through the `--process` ABI (one process per job: one JSON line in, one
//! JSON line out). It sleeps a seeded random time, then replies with the
//! question's text, so the final check can match every reply to its
//! question. A Rust process starts in about a millisecond, which keeps the
//! two-core machine's time for the server, PostgreSQL and the workers.

use std::io::{BufRead, Write};
use std::time::Duration;

use anyhow::Context;
use serde_json::{Value, json};

use super::rng::mix;

/// Where a handler run proves it runs alone: with `locks`, it holds an
/// exclusive lock on `locks/<jobKey>` while it runs (the kernel drops the
/// lock when the process ends, killed or not), and when another run of the
/// same job holds it, both ran at once: a line goes to `concurrent`.
#[derive(Debug, Clone, Default)]
pub struct RunLocks {
    pub locks: Option<std::path::PathBuf>,
    pub concurrent: Option<std::path::PathBuf>,
}

/// Answers the one request on stdin.
pub fn handle_job(seed: u64, max_delay_ms: u64, run_locks: &RunLocks) -> anyhow::Result<()> {
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .context("read the request")?;
    let request: Value = serde_json::from_str(&line).context("parse the request")?;
    let job_key = request["jobKey"].as_str().unwrap_or_default();
    let attempt = request["attempt"].as_u64().unwrap_or_default();
    let _held = hold_job_lock(run_locks, job_key, attempt)?;
    let delay = mix(seed, &format!("{job_key}/{attempt}")) % (max_delay_ms + 1);
    // The handler's work: the time a model call would take.
    std::thread::sleep(Duration::from_millis(delay));
    let response = match request["message"]["text"].as_str() {
        Some(text) if !text.is_empty() => json!({
            "reply": text,
            "usage": {"modelCalls": 0, "inputTokens": 0, "outputTokens": 0},
        }),
        _ => json!({"skip": "no_text"}),
    };
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{response}").context("write the response")?;
    stdout.flush().context("flush the response")
}

/// Takes `locks/<jobKey>`; on a clash notes it in `concurrent`. The open
/// file (and with it the lock) lives as long as the run.
fn hold_job_lock(
    run_locks: &RunLocks,
    job_key: &str,
    attempt: u64,
) -> anyhow::Result<Option<std::fs::File>> {
    let Some(dir) = &run_locks.locks else {
        return Ok(None);
    };
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(job_key))
        .context("open the job's lock file")?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            if let Some(path) = &run_locks.concurrent {
                let mut out = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .context("open the concurrency record")?;
                let line = json!({"jobKey": job_key, "attempt": attempt});
                out.write_all(format!("{line}\n").as_bytes())
                    .context("note a concurrent run")?;
            }
        }
        Err(std::fs::TryLockError::Error(err)) => {
            return Err(err).context("lock the job's lock file");
        }
    }
    Ok(Some(file))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_run_of_a_job_while_the_first_holds_its_lock_is_noted() {
        let dir = crate::temp_dir("handler-locks").expect("temp dir");
        let run_locks = RunLocks {
            locks: Some(dir.clone()),
            concurrent: Some(dir.join("concurrent.ndjson")),
        };
        let noted = || std::fs::read_to_string(dir.join("concurrent.ndjson")).unwrap_or_default();
        let first = hold_job_lock(&run_locks, "job_a", 1).expect("first run");
        assert_eq!(noted(), "", "the first run runs alone");
        let second = hold_job_lock(&run_locks, "job_a", 2).expect("second run");
        assert_eq!(noted().lines().count(), 1, "{}", noted());
        assert!(noted().contains(r#""attempt":2"#), "{}", noted());
        drop((first, second));
        // Once the runs ended (as when killed), the next one runs alone.
        let _third = hold_job_lock(&run_locks, "job_a", 3).expect("third run");
        let _other = hold_job_lock(&run_locks, "job_b", 1).expect("another job");
        assert_eq!(noted().lines().count(), 1, "{}", noted());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
