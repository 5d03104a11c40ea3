//! Helpers for the tests of `worker run`: its arguments, stopping it, the
//! outcome of a question, and a job's lease driven by hand.

use serde_json::Value;

use super::{EVENT_TIMEOUT, WorkerExit, WorkerProcess};

/// `--profile PROFILE --json worker run NAME --builtin BUILTIN --from now`:
/// a builtin worker that starts at the newest message.
pub(crate) fn builtin_worker_args<'a>(
    profile: &'a str,
    name: &'a str,
    builtin: &'a str,
) -> Vec<&'a str> {
    let mut args = builtin_worker_args_no_from(profile, name, builtin);
    args.extend(["--from", "now"]);
    args
}

/// [`builtin_worker_args`] without `--from`.
pub(crate) fn builtin_worker_args_no_from<'a>(
    profile: &'a str,
    name: &'a str,
    builtin: &'a str,
) -> Vec<&'a str> {
    worker_args(profile, name, &["--builtin", builtin])
}

/// `--profile PROFILE --json worker run NAME EXTRA…`.
pub(crate) fn worker_args<'a>(profile: &'a str, name: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["--profile", profile, "--json", "worker", "run", name];
    args.extend_from_slice(extra);
    args
}

/// Stops `worker` with SIGINT; it must exit 0. Its exit.
pub(crate) fn stop_worker(worker: WorkerProcess) -> WorkerExit {
    worker.signal("INT");
    let exit = worker.wait_exit(EVENT_TIMEOUT);
    assert_eq!(exit.code, Some(0), "{exit:?}");
    exit
}

/// [`stop_worker`], and no event it wrote may have a name starting with
/// `prefix` (a whole name, or e.g. `contact_` for all of those); its events.
pub(crate) fn stop_worker_without(worker: WorkerProcess, prefix: &str) -> Vec<Value> {
    let events = stop_worker(worker).events;
    assert!(
        events
            .iter()
            .all(|e| !e["event"].as_str().unwrap_or_default().starts_with(prefix)),
        "no `{prefix}…` event: {events:?}"
    );
    events
}

/// [`stop_worker`], and its last event must be `stopped`.
pub(crate) fn stop_worker_cleanly(worker: WorkerProcess) -> WorkerExit {
    let exit = stop_worker(worker);
    assert_eq!(
        exit.events.last().expect("events")["event"],
        "stopped",
        "{exit:?}"
    );
    exit
}

/// Waits for the worker's `replied` event about `message`.
pub(crate) fn wait_replied(worker: &mut WorkerProcess, message: &str) -> Value {
    worker.wait_for(&format!("the reply to {message}"), EVENT_TIMEOUT, |e| {
        e["event"] == "replied" && e["messageId"] == message
    })
}

/// Waits for the worker's outcome about `message`, which must be `replied`.
pub(crate) fn assert_replied(worker: &mut WorkerProcess, message: &str) {
    let outcome = outcome_of(worker, message);
    assert_eq!(outcome["event"], "replied", "{outcome}");
}

/// Waits for the worker's outcome event about `message_id` (`replied`,
/// `skipped`, `failed`, `dead_letter` or `handled`).
pub(crate) fn outcome_of(worker: &mut WorkerProcess, message_id: &str) -> Value {
    worker.wait_for(
        &format!("an outcome for {message_id}"),
        EVENT_TIMEOUT,
        |event| {
            event["messageId"] == message_id
                && ["replied", "skipped", "failed", "dead_letter", "handled"]
                    .contains(&event["event"].as_str().unwrap_or_default())
        },
    )
}

/// The lease of a claimed job, as heartbeat and finish name it.
pub(crate) fn lease_of(job: &relayger_core::wire::ClaimedJob) -> relayger_core::wire::LeaseRequest {
    relayger_core::wire::LeaseRequest {
        owner: job.owner.clone(),
        version: job.version,
    }
}

/// Renews `job`'s lease `heartbeats` times through `client` (each renewal
/// granting `lease_ms`), then finishes it with `reply` through the same
/// client, which must answer `replied`.
pub(crate) async fn heartbeat_then_reply(
    client: &relayger_worker::Client,
    runtime: uuid::Uuid,
    job: &relayger_core::wire::ClaimedJob,
    (heartbeats, lease_ms): (usize, u64),
    reply: &str,
) {
    use relayger_core::wire::{FinishOutcome, FinishRequest, JobResult};
    let lease = lease_of(job);
    for _ in 0..heartbeats {
        let renewed = client
            .runtimes()
            .heartbeat(runtime, job.job_id, &lease)
            .await
            .expect("heartbeat");
        assert_eq!(renewed.lease_ms, lease_ms);
    }
    let finished = client
        .runtimes()
        .finish(
            runtime,
            job.job_id,
            &FinishRequest {
                owner: lease.owner,
                version: lease.version,
                result: JobResult {
                    reply: Some(reply.to_owned()),
                    ..JobResult::default()
                },
            },
        )
        .await
        .expect("finish");
    assert_eq!(finished.outcome, FinishOutcome::Replied);
}

/// Writes, into `dir`, a `--process` handler that always fails
/// (`worker.json` running `fail.sh`) and `policy.json` with maxAttempts 1:
/// each question it takes becomes a dead letter at once.
pub(crate) fn write_failing_process_handler(dir: &std::path::Path) {
    std::fs::write(
        dir.join("fail.sh"),
        "read -r line\necho '{\"error\":\"the model is unavailable\"}'\n",
    )
    .expect("script");
    std::fs::write(
        dir.join("worker.json"),
        r#"{"executable": "sh", "argv": ["fail.sh"], "env": ["PATH"]}"#,
    )
    .expect("worker.json");
    std::fs::write(dir.join("policy.json"), r#"{"maxAttempts": 1}"#).expect("policy");
}
