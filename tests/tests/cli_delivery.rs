//! What became of a question, as its asker sees it through the real
//! binaries: `send --ask --wait` ends with exit status 8 (`unanswered`) and
//! the delivery as soon as no recipient will answer, and goes on waiting
//! while one may; `relayger delivery` shows each recipient's state;
//! `relayger cancel` takes a question back, before or while a worker has
//! it.

use crate::cli_support;

use std::path::Path;
use std::time::{Duration, Instant};

use cli_support::{
    Befriended, CliTest, EVENT_TIMEOUT, Party, ServerSettings, WorkerProcess, builtin_worker_args,
    exit_status, stop_worker, text, worker_args,
};
use relayger_tests::CliOutput;
use serde_json::Value;

/// Short leases: a held job's heartbeat comes within a fraction of it.
const LEASE_MS: u64 = 1500;
/// How soon after its cause a wait must end (the issue's acceptance).
const PROMPTLY: Duration = Duration::from_secs(5);

/// Both agents, `sender` and `receiver`, are contacts; the server's leases
/// are short and its requests logged.
async fn setup(label: &str) -> (CliTest, Befriended) {
    CliTest::with_pair(label, ServerSettings::lease(LEASE_MS, true), true).await
}

/// [`CliTest::ask_waiting`] for SECONDS, and how long it took.
fn ask_waiting(
    t: &CliTest,
    number: &str,
    question: &str,
    extra: &[&str],
    seconds: &str,
) -> (CliOutput, Duration) {
    let started = Instant::now();
    let output = t.ask_waiting(number, question, extra, &[seconds]);
    (output, started.elapsed())
}

/// The delivery a wait that ended `unanswered` printed: exit status 8,
/// the delivery on stdout, the error envelope as stderr's last line.
fn unanswered_delivery(code: Option<i32>, stdout: &str, stderr: &str) -> Value {
    assert_eq!(code, Some(exit_status("unanswered")), "{stdout}\n{stderr}");
    let envelope: Value = serde_json::from_str(stderr.lines().last().unwrap_or_default())
        .unwrap_or_else(|err| panic!("stderr ends with no envelope ({err}): {stderr}"));
    assert_eq!(envelope["error"]["code"], "unanswered", "{envelope}");
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|err| panic!("stdout is not the delivery ({err}): {stdout}"))
}

/// The one recipient of a delivery in a direct room.
fn only_recipient(delivery: &Value) -> &Value {
    let recipients = delivery["recipients"].as_array().expect("recipients");
    assert_eq!(recipients.len(), 1, "{delivery}");
    &recipients[0]
}

/// `relayger --profile PROFILE --json delivery ROOM MESSAGE`.
fn delivery(t: &CliTest, profile: &str, room: &str, message: &str) -> Value {
    t.json(&["--profile", profile, "delivery", room, message])
}

/// The receiver's worker `name` with a `--handler` module and `extra`
/// options, started.
fn module_worker(t: &CliTest, name: &str, module: &str, extra: &[&str]) -> WorkerProcess {
    let mut args = vec!["--from", "now", "--handler", module];
    args.extend_from_slice(extra);
    let mut worker = t.spawn(&worker_args("receiver", name, &args), &[]);
    worker.wait_event("started");
    worker
}

/// The receiver's builtin `uppercase` worker `name` with `extra` options,
/// started.
fn uppercase_worker(t: &CliTest, name: &str, extra: &[&str]) -> WorkerProcess {
    let args = [
        builtin_worker_args("receiver", name, "uppercase"),
        extra.to_vec(),
    ]
    .concat();
    let mut worker = t.spawn(&args, &[]);
    worker.wait_event("started");
    worker
}

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).expect("write");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wait_on_a_question_that_became_a_dead_letter_ends_at_once_with_failed() {
    let (t, pair) = setup("delivery-failed").await;
    write(
        t.cwd(),
        "throw.mjs",
        "export async function handle() { throw new Error('boom'); }\n",
    );
    write(t.cwd(), "policy.json", r#"{"maxAttempts": 1}"#);
    let mut worker = module_worker(
        &t,
        "failing-worker",
        "./throw.mjs",
        &["--policy", "./policy.json"],
    );
    let asker = t.spawn(
        &[
            "--profile",
            "sender",
            "--compact",
            "send",
            &pair.receiver_number,
            "boom please",
            "--ask",
            "--wait",
            "60",
        ],
        &[],
    );
    let dead = worker.wait_event("dead_letter");
    let mut asker = asker;
    assert!(
        asker.exits_within(PROMPTLY),
        "send --wait still waits {PROMPTLY:?} after the dead letter"
    );
    let exit = asker.wait_exit(EVENT_TIMEOUT);
    let stdout: Vec<String> = exit.events.iter().map(Value::to_string).collect();
    let delivery = unanswered_delivery(exit.code, &stdout.join("\n"), &exit.stderr);
    assert_eq!(delivery["messageId"], dead["messageId"], "{delivery}");
    assert_eq!(delivery["state"], "failed", "{delivery}");
    let recipient = only_recipient(&delivery);
    assert_eq!(recipient["number"], pair.receiver_number.as_str());
    assert_eq!(recipient["state"], "failed", "{delivery}");
    assert_eq!(recipient["reason"], "attempts_exhausted", "{delivery}");
    assert_eq!(recipient["attempts"], 1, "{delivery}");
    // The handler's error text stays with the receiver.
    assert!(!delivery.to_string().contains("boom"), "{delivery}");
    stop_worker(worker);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_question_past_its_deadline_is_sent_with_a_warning_and_its_wait_ends_rejected() {
    let (t, pair) = setup("delivery-deadline").await;
    let worker = uppercase_worker(&t, "reply-worker", &[]);
    let (output, took) = ask_waiting(
        &t,
        &pair.receiver_number,
        "What was the status?",
        &["--deadline", "2026-01-02T12:00:00Z"],
        "60",
    );
    assert!(took < PROMPTLY, "took {took:?}: {output:?}");
    let warning: Value =
        serde_json::from_str(output.stderr.lines().next().unwrap_or_default()).expect("warning");
    assert_eq!(warning["warning"]["code"], "deadline_passed", "{output:?}");
    let delivery = unanswered_delivery(output.code, &output.stdout, &output.stderr);
    assert_eq!(delivery["state"], "rejected", "{delivery}");
    let recipient = only_recipient(&delivery);
    assert_eq!(recipient["state"], "rejected", "{delivery}");
    assert_eq!(recipient["reason"], "deadline_passed", "{delivery}");

    // A person reads the same: the warning, each recipient's state and
    // reason on stdout, the error on stderr.
    let human = t.run(&[
        "--profile",
        "sender",
        "send",
        &pair.receiver_number,
        "And now?",
        "--ask",
        "--deadline",
        "2026-01-02T12:00:00Z",
        "--wait",
        "60",
    ]);
    assert_eq!(human.code, Some(8), "{human:?}");
    assert!(
        human.stderr.starts_with("warning: deadline_passed: "),
        "{human:?}"
    );
    assert!(
        human
            .stderr
            .lines()
            .last()
            .unwrap_or_default()
            .starts_with("error: unanswered: "),
        "{human:?}"
    );
    let row = format!("{}  rejected  deadline_passed", pair.receiver_number);
    assert!(human.stdout.contains(&row), "{human:?}");
    stop_worker(worker);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sender_outside_allowed_senders_learns_the_question_was_rejected() {
    let (t, pair) = setup("delivery-not-allowed").await;
    let friend = t.register_number(Party::person("friend", "Friend"));
    t.befriend(("friend", &friend), ("receiver", &pair.receiver_number));
    write(
        t.cwd(),
        "policy.json",
        &format!(r#"{{"allowedSenders": ["{friend}"]}}"#),
    );
    let worker = uppercase_worker(&t, "gatekeeper", &["--policy", "./policy.json"]);
    let (output, took) = ask_waiting(&t, &pair.receiver_number, "let me in?", &[], "60");
    assert!(took < PROMPTLY, "took {took:?}: {output:?}");
    let delivery = unanswered_delivery(output.code, &output.stdout, &output.stderr);
    assert_eq!(delivery["state"], "rejected", "{delivery}");
    let recipient = only_recipient(&delivery);
    assert_eq!(recipient["reason"], "sender_not_allowed", "{delivery}");
    // Codes only: nothing of the receiver's policy.
    assert!(!delivery.to_string().contains(&friend), "{delivery}");
    stop_worker(worker);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_question_to_an_agent_nobody_listens_for_stays_queued_and_the_wait_runs_its_course() {
    let (t, pair) = setup("delivery-no-runtime").await;
    let (output, took) = ask_waiting(&t, &pair.receiver_number, "anyone there?", &[], "3");
    assert_eq!(output.code, Some(exit_status("timeout")), "{output:?}");
    assert!(took >= Duration::from_secs(3), "ended after {took:?}");
    assert!(output.stdout.is_empty(), "{output:?}");
    let history = t.json(&["--profile", "sender", "history", &pair.room, "--limit", "1"]);
    let message = text(&history["messages"][0]["messageId"]);

    let seen = delivery(&t, "sender", &pair.room, &message);
    assert_eq!(seen["messageId"], message.as_str());
    assert_eq!(seen["conversationId"], pair.room.as_str());
    assert_eq!(seen["state"], "queued", "{seen}");
    assert_eq!(seen["canceled"], false, "{seen}");
    let recipient = only_recipient(&seen);
    assert_eq!(recipient["identityId"], pair.receiver_id.as_str());
    assert_eq!(recipient["state"], "queued", "{seen}");
    assert_eq!(recipient["listeners"], 0, "{seen}");
    assert_eq!(recipient["attempts"], 0, "{seen}");
    // The recipient, a member of the room, reads it too; by the contact's
    // number in human form: a row per recipient.
    assert_eq!(delivery(&t, "receiver", &pair.room, &message), seen);
    let human = t.run(&[
        "--profile",
        "sender",
        "delivery",
        &pair.receiver_number,
        &message,
    ]);
    assert!(human.success(), "{human:?}");
    let lines: Vec<&str> = human.stdout.lines().collect();
    assert!(
        lines[0].contains(&format!("{message}: queued")),
        "{human:?}"
    );
    assert!(lines[1].starts_with("NUMBER"), "{human:?}");
    let row: Vec<&str> = lines[2].split_whitespace().collect();
    assert_eq!(row, [pair.receiver_number.as_str(), "queued", "0", "0"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_answered_question_shows_answered_with_its_reply() {
    let (t, pair) = setup("delivery-answered").await;
    let worker = uppercase_worker(&t, "reply-worker", &[]);
    let reply = t.ask_and_wait(&pair.receiver_number, "hello from relayger", &["20"]);
    assert_eq!(reply["text"], "HELLO FROM RELAYGER");
    let question = text(&reply["replyTo"]);
    let seen = delivery(&t, "sender", &pair.room, &question);
    assert_eq!(seen["state"], "answered", "{seen}");
    let recipient = only_recipient(&seen);
    assert_eq!(recipient["state"], "answered", "{seen}");
    assert_eq!(recipient["replyMessageId"], reply["messageId"], "{seen}");
    assert_eq!(recipient["listeners"], 1, "{seen}");
    stop_worker(worker);
}

/// How many claims the server has answered (from its request log).
fn claims_answered(t: &CliTest) -> usize {
    let log = std::fs::read_to_string(t.cwd().join("server.log")).unwrap_or_default();
    log.lines()
        .filter(|line| line.contains("/claim") && line.contains("finished processing request"))
        .count()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_question_canceled_while_queued_is_never_claimed() {
    let (t, pair) = setup("delivery-cancel-queued").await;
    let args = builtin_worker_args("receiver", "reply-worker", "uppercase");
    // The runtime exists, but no worker runs when the question comes.
    let mut worker = t.spawn(&args, &[]);
    let runtime = text(&worker.wait_event("started")["runtimeId"]);
    stop_worker(worker);
    let question = t.ask(&pair.receiver_number, "never mind", &[]);
    let queued = delivery(&t, "sender", &pair.room, &question);
    assert_eq!(only_recipient(&queued)["state"], "queued", "{queued}");
    assert_eq!(only_recipient(&queued)["listeners"], 1, "{queued}");

    // Only its sender may take it back.
    assert_eq!(
        t.error_code(&["--profile", "receiver", "cancel", &pair.room, &question]),
        "forbidden"
    );
    let canceled = t.json(&["--profile", "sender", "cancel", &pair.room, &question]);
    assert_eq!(canceled["state"], "canceled", "{canceled}");
    assert_eq!(canceled["canceled"], true, "{canceled}");
    assert_eq!(only_recipient(&canceled)["state"], "canceled");
    // Again: the same answer (the first cancel's time included).
    let again = t.json(&["--profile", "sender", "cancel", &pair.room, &question]);
    assert_eq!(again, canceled);

    // The worker starts and claims; the canceled question is not its job.
    let before = claims_answered(&t);
    let mut worker = t.spawn(&args, &[]);
    worker.wait_event("started");
    let until = Instant::now() + EVENT_TIMEOUT;
    while claims_answered(&t) == before {
        assert!(Instant::now() < until, "the worker claimed nothing");
        std::thread::sleep(Duration::from_millis(25));
    }
    let events = stop_worker(worker).events;
    assert!(
        events.iter().all(|e| e["event"] != "claimed"),
        "nothing claimed: {events:?}"
    );
    let stats = t.json(&["--profile", "receiver", "runtimes", "stats", &runtime]);
    assert_eq!(stats["claims"], 0, "{stats}");
    let after = delivery(&t, "sender", &pair.room, &question);
    assert_eq!(after["state"], "canceled", "{after}");
    assert_eq!(only_recipient(&after)["state"], "canceled", "{after}");
    assert_eq!(only_recipient(&after)["attempts"], 0, "{after}");
    assert!(t.replies_to("sender", &pair.room, &question).is_empty());
}

/// Waits on its signal; when it aborts, writes the abort's name to the
/// marker file, then returns a reply that must never be written.
const PATIENT_MODULE: &str = r#"import { writeFileSync } from 'node:fs';
export async function handle({ signal }) {
  await new Promise((resolve) => {
    if (signal.aborted) resolve();
    signal.addEventListener('abort', resolve, { once: true });
  });
  writeFileSync(MARKER, String(signal.reason?.name ?? 'aborted'));
  return { reply: 'too late' };
}
"#;

#[tokio::test(flavor = "multi_thread")]
async fn a_question_canceled_while_its_handler_runs_aborts_the_handler_and_gets_no_reply() {
    let (t, pair) = setup("delivery-cancel-working").await;
    let marker = t.cwd().join("aborted.txt");
    let marker_text = serde_json::to_string(marker.to_str().expect("utf-8 path")).expect("json");
    write(
        t.cwd(),
        "patient.mjs",
        &PATIENT_MODULE.replace("MARKER", &marker_text),
    );
    let mut worker = module_worker(
        &t,
        "patient-worker",
        "./patient.mjs",
        &["--handler-timeout", "60000"],
    );
    let question = t.ask(&pair.receiver_number, "take your time", &[]);
    worker.wait_for("the claim", EVENT_TIMEOUT, |e| {
        e["event"] == "claimed" && e["messageId"] == question.as_str()
    });
    let working = delivery(&t, "sender", &pair.room, &question);
    assert_eq!(working["state"], "working", "{working}");

    let canceled = t.json(&["--profile", "sender", "cancel", &pair.room, &question]);
    assert_eq!(canceled["canceled"], true, "{canceled}");
    // The worker learns it at its next heartbeat.
    let told = worker.wait_for("the cancel", EVENT_TIMEOUT, |e| {
        e["messageId"] == question.as_str() && e["event"] != "claimed"
    });
    assert_eq!(told["event"], "canceled", "{told}");
    let until = Instant::now() + EVENT_TIMEOUT;
    while !marker.exists() {
        assert!(Instant::now() < until, "the handler's signal never aborted");
        std::thread::sleep(Duration::from_millis(25));
    }
    let events = stop_worker(worker).events;
    let about: Vec<&Value> = events
        .iter()
        .filter(|e| e["messageId"] == question.as_str())
        .collect();
    assert!(
        about
            .iter()
            .all(|e| e["event"] == "claimed" || e["event"] == "canceled"),
        "neither replied nor failed: {about:?}"
    );
    let thread = t.json(&["--profile", "sender", "thread", &pair.room, &question]);
    let messages = thread["messages"].as_array().expect("messages");
    assert_eq!(messages.len(), 1, "only the question: {thread}");
    assert_eq!(messages[0]["messageId"], question.as_str());
    let ended = delivery(&t, "sender", &pair.room, &question);
    assert_eq!(ended["state"], "canceled", "{ended}");
    assert_eq!(only_recipient(&ended)["state"], "canceled", "{ended}");
}
