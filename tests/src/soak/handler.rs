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

/// Answers the one request on stdin.
pub fn handle_job(seed: u64, max_delay_ms: u64) -> anyhow::Result<()> {
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .context("read the request")?;
    let request: Value = serde_json::from_str(&line).context("parse the request")?;
    let job_key = request["jobKey"].as_str().unwrap_or_default();
    let attempt = request["attempt"].as_u64().unwrap_or_default();
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
