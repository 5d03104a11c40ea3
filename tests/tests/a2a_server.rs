//! Relayger agents asked over A2A by the official clients — the Python
//! `a2a-sdk` and the JavaScript `@a2a-js/sdk`, installed by the test
//! support (`relayger_tests::a2a_sdks`) — against the real server and real
//! workers: card discovery, a send answered COMPLETED by a `--builtin
//! uppercase` worker, a stream that shows WORKING then COMPLETED, a handler
//! that throws (maxAttempts 1) ending FAILED, a non-contact refused, and a
//! cancel ending CANCELED with the handler aborted. The clients' scripts
//! are `tests/a2a/sdk_client.{py,mjs}`; the README's example is
//! `examples/a2a/ask.py`.

use crate::cli_support;

use std::path::Path;
use std::process::{Command, Stdio};

use cli_support::{
    CliTest, EVENT_TIMEOUT, ServerSettings, WorkerProcess, builtin_worker_args, stop_worker, text,
    worker_args,
};
use relayger_tests::a2a_sdks::{javascript_script, python_sdk, repo_root, scripts_dir};
use serde_json::Value;

/// Short leases: a cancel reaches a working handler at its next heartbeat.
const LEASE_MS: u64 = 1500;

/// Waits on its signal, then answers what must never be written.
const PATIENT_MODULE: &str = r#"export async function handle({ signal }) {
  await new Promise((resolve) => {
    if (signal.aborted) resolve();
    signal.addEventListener('abort', resolve, { once: true });
  });
  return { reply: 'too late' };
}
"#;

/// The server, the asker's and a stranger's tokens, three agents (each
/// the asker's contact) and their workers.
struct World {
    t: CliTest,
    asker_token: String,
    stranger_token: String,
    uppercase: String,
    failing: String,
    patient: String,
    workers: Vec<WorkerProcess>,
}

fn token(t: &CliTest, profile: &str) -> String {
    text(
        &t.json(&[
            "--profile",
            profile,
            "tokens",
            "create",
            "--scopes",
            "read,write",
        ])["secret"],
    )
}

/// `profile`'s worker `name` with `args`, started.
fn worker(t: &CliTest, profile: &str, name: &str, args: &[&str]) -> WorkerProcess {
    let mut worker = t.spawn(&worker_args(profile, name, args), &[]);
    worker.wait_event("started");
    worker
}

impl World {
    async fn start(label: &str, all_agents: bool) -> World {
        let t = CliTest::start_with(label, ServerSettings::lease(LEASE_MS, false)).await;
        let asker = text(&t.register("asker", "Asker", false)["number"]);
        t.register("stranger", "Stranger", false);
        let agent = |profile: &str, name: &str| {
            let number = text(&t.register(profile, name, true)["number"]);
            t.befriend(("asker", &asker), (profile, &number));
            number
        };
        let uppercase = agent("uppercase", "Uppercase");
        let mut workers = Vec::new();
        let mut upper_worker = t.spawn(&builtin_worker_args("uppercase", "up", "uppercase"), &[]);
        upper_worker.wait_event("started");
        workers.push(upper_worker);
        let (mut failing, mut patient) = (String::new(), String::new());
        if all_agents {
            failing = agent("failing", "Failing");
            patient = agent("patient", "Patient");
            std::fs::write(
                t.cwd().join("throw.mjs"),
                "export async function handle() { throw new Error('boom'); }\n",
            )
            .expect("write");
            std::fs::write(t.cwd().join("policy.json"), r#"{"maxAttempts": 1}"#).expect("write");
            std::fs::write(t.cwd().join("patient.mjs"), PATIENT_MODULE).expect("write");
            workers.push(worker(
                &t,
                "failing",
                "thrower",
                &[
                    "--from",
                    "now",
                    "--handler",
                    "./throw.mjs",
                    "--policy",
                    "./policy.json",
                ],
            ));
            workers.push(worker(
                &t,
                "patient",
                "waiter",
                &[
                    "--from",
                    "now",
                    "--handler",
                    "./patient.mjs",
                    "--handler-timeout",
                    "60000",
                ],
            ));
        }
        World {
            asker_token: token(&t, "asker"),
            stranger_token: token(&t, "stranger"),
            t,
            uppercase,
            failing,
            patient,
            workers,
        }
    }

    /// Runs `program ARGS` in `cwd` with the world's numbers and tokens;
    /// its stdout's JSON.
    fn run_client(&self, mut command: Command, cwd: &Path) -> Value {
        let output = command
            .current_dir(cwd)
            .stdin(Stdio::null())
            .envs([
                ("RELAYGER_URL", self.t.url()),
                ("ASKER_TOKEN", self.asker_token.as_str()),
                ("STRANGER_TOKEN", self.stranger_token.as_str()),
                ("UPPERCASE_NUMBER", self.uppercase.as_str()),
                ("FAILING_NUMBER", self.failing.as_str()),
                ("PATIENT_NUMBER", self.patient.as_str()),
            ])
            .output()
            .expect("run the A2A client");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "the A2A client failed\n--- stdout\n{stdout}\n--- stderr\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_str(stdout.trim())
            .unwrap_or_else(|err| panic!("the client printed no JSON ({err}): {stdout}"))
    }

    /// What an official client saw in every scenario, checked.
    fn check(mut self, seen: &Value, language: &str) {
        // For the record (`--no-capture`).
        eprintln!("the {language} client saw: {seen}");
        let t = &self.t;
        assert_eq!(seen["card"]["name"], "Uppercase", "{seen}");
        assert_eq!(
            seen["card"]["url"],
            format!("{}/a2a/{}", t.url(), self.uppercase),
            "{seen}"
        );
        assert_eq!(seen["card"]["binding"], "JSONRPC");
        assert_eq!(seen["card"]["streaming"], true);

        let upper = format!("HELLO FROM {}", language.to_uppercase());
        assert_eq!(seen["send"]["state"], "TASK_STATE_COMPLETED", "{seen}");
        assert_eq!(seen["send"]["reply"], upper.as_str(), "{seen}");
        assert_eq!(seen["send"]["artifact"], upper.as_str(), "{seen}");
        assert_eq!(seen["get"], "TASK_STATE_COMPLETED", "{seen}");

        let states: Vec<&str> = seen["stream"]["states"]
            .as_array()
            .expect("states")
            .iter()
            .map(|s| s.as_str().expect("state"))
            .collect();
        let working = states.iter().position(|s| *s == "TASK_STATE_WORKING");
        let completed = states.iter().position(|s| *s == "TASK_STATE_COMPLETED");
        assert!(
            matches!((working, completed), (Some(w), Some(c)) if w < c),
            "WORKING then COMPLETED: {states:?}"
        );
        assert_eq!(states.last(), Some(&"TASK_STATE_COMPLETED"), "{states:?}");
        assert_eq!(
            seen["stream"]["reply"],
            format!("STREAM FROM {}", language.to_uppercase()),
            "{seen}"
        );

        assert_eq!(seen["failing"]["state"], "TASK_STATE_FAILED", "{seen}");
        assert_eq!(seen["failing"]["reason"], "attempts_exhausted", "{seen}");
        assert!(
            !seen.to_string().contains("boom'"),
            "no handler text: {seen}"
        );

        assert_eq!(seen["cancel"]["answer"], "TASK_STATE_CANCELED", "{seen}");
        let watched = seen["cancel"]["watched"].as_array().expect("watched");
        assert!(
            watched.contains(&Value::from("TASK_STATE_WORKING")),
            "{seen}"
        );
        assert_eq!(
            watched.last(),
            Some(&Value::from("TASK_STATE_CANCELED")),
            "{seen}"
        );
        // The patient handler's signal aborted: its worker says canceled.
        let task = text(&seen["cancel"]["taskId"]);
        let mut patient = self.workers.pop().expect("the patient worker");
        let told = patient.wait_for("the cancel", EVENT_TIMEOUT, |e| {
            e["messageId"] == task.as_str() && e["event"] != "claimed"
        });
        assert_eq!(told["event"], "canceled", "{told}");
        let events = stop_worker(patient).events;
        assert!(
            !events.iter().any(|e| e["messageId"] == task.as_str()
                && (e["event"] == "replied" || e["event"] == "failed")),
            "the canceled handler neither replied nor failed: {events:?}"
        );

        let refused = text(&seen["stranger"]);
        assert!(
            refused.contains("404"),
            "a non-contact is refused: {refused}"
        );
        for worker in self.workers {
            stop_worker(worker);
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_python_sdk_asks_relayger_agents() {
    let python = python_sdk().expect("the Python A2A SDK");
    let w = World::start("a2a-python", true).await;
    let mut command = Command::new(python);
    command.arg(scripts_dir().join("sdk_client.py"));
    let seen = w.run_client(command, w.t.cwd());
    w.check(&seen, "python");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_javascript_sdk_asks_relayger_agents() {
    let w = World::start("a2a-javascript", true).await;
    let script = javascript_script(w.t.cwd(), "sdk_client.mjs").expect("the JavaScript A2A SDK");
    let mut command = Command::new("node");
    command.arg(script);
    let seen = w.run_client(command, w.t.cwd());
    w.check(&seen, "javascript");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_readme_example_asks_an_uppercase_agent() {
    let python = python_sdk().expect("the Python A2A SDK");
    let w = World::start("a2a-example", false).await;
    let output = Command::new(python)
        .arg(repo_root().join("examples/a2a/ask.py"))
        .args([w.uppercase.as_str(), "hello there"])
        .env("RELAYGER_URL", w.t.url())
        .env("RELAYGER_TOKEN", &w.asker_token)
        .stdin(Stdio::null())
        .output()
        .expect("run ask.py");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(stdout.trim(), "TASK_STATE_COMPLETED HELLO THERE");
    for worker in w.workers {
        stop_worker(worker);
    }
}
