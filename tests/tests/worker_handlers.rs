//! `worker run --handler FILE` and `--process FILE` through the real
//! binaries: the examples answer, a stuck module costs one attempt at the
//! timeout (or at the question's earlier deadline), and the worker keeps
//! serving; a module out of memory, a process killed with its children,
//! malformed output, credential variables and a stale note each cost only
//! the attempt.

use crate::cli_support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cli_support::{
    CliTest, EVENT_TIMEOUT, ServerSettings, WorkerProcess, assert_replied, outcome_of, text,
};
use relayger_core::wire::Timestamp;
use serde_json::Value;

/// A module that never returns for a question containing `loop` and
/// answers everything else.
const LOOPING_MODULE: &str = r#"export async function handle({ message }) {
  if ((message.text ?? '').includes('loop')) {
    for (;;) {}
  }
  return { reply: `ok: ${message.text}`, usage: { modelCalls: 0, inputTokens: 0, outputTokens: 0 } };
}
"#;

/// The repository root: the examples' lines run from there as written.
fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("repository root")
        .to_path_buf()
}

/// A server with two befriended agents, `sender` and `receiver`; the
/// receiver's number and their room.
async fn befriended(label: &str) -> (CliTest, String, String) {
    let (t, pair) = CliTest::with_pair(label, ServerSettings::default(), true).await;
    (t, pair.receiver_number, pair.room)
}

/// Runs an example's documented `worker run` line from the repository
/// root; the worker once started, and its `started` event.
fn example_worker(t: &CliTest, line: &str) -> (WorkerProcess, Value) {
    let mut worker = t.spawn_shell_in(line, &[], &repo_root());
    let started = worker.wait_event("started");
    (worker, started)
}

/// Runs `relayger LINE` in the test's directory until it has started.
fn started_worker(t: &CliTest, line: &str) -> WorkerProcess {
    let mut worker = t.spawn_shell(line, &[]);
    worker.wait_event("started");
    worker
}

/// Waits for the outcome of `message`: `failed`, its error naming
/// `reason`; the event.
fn assert_failed_with(worker: &mut WorkerProcess, message: &str, reason: &str) -> Value {
    let failed = outcome_of(worker, message);
    assert_eq!(failed["event"], "failed", "{failed}");
    assert!(text(&failed["error"]).contains(reason), "{failed}");
    failed
}

/// The worker still answers after a failed attempt: a question to `to`
/// (number, room) gets the module's `ok: …` reply.
fn assert_still_serving(t: &CliTest, worker: &mut WorkerProcess, to: (&str, &str)) {
    assert_answered(t, worker, to, "still there?", "ok: still there?");
}

/// Asks `question` of `number`, whose worker must reply `expected` in
/// `room`; the question's id.
fn assert_answered(
    t: &CliTest,
    worker: &mut WorkerProcess,
    (number, room): (&str, &str),
    question: &str,
    expected: &str,
) -> String {
    let asked = t.ask(number, question, &[]);
    assert_replied(worker, &asked);
    assert_eq!(reply_text(t, room, &asked), expected);
    asked
}

/// The text of the reply to `message` in `room`.
fn reply_text(t: &CliTest, room: &str, message: &str) -> String {
    let thread = t.json(&["--profile", "sender", "thread", room, message]);
    let replies: Vec<&Value> = thread["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["replyTo"] == message)
        .collect();
    assert_eq!(replies.len(), 1, "{thread}");
    assert_eq!(replies[0]["byRuntime"], true, "{thread}");
    text(&replies[0]["text"])
}

#[tokio::test(flavor = "multi_thread")]
async fn the_module_example_answers_and_keeps_its_note() {
    let (t, number, room) = befriended("handler-module").await;
    let (mut worker, started) = example_worker(
        &t,
        "relayger --profile receiver --json worker run custom-worker --from now --handler ./examples/agents/message-handler.mjs --handler-timeout 20000",
    );
    let runtime = text(&started["runtimeId"]);

    assert_answered(
        &t,
        &mut worker,
        (&number, &room),
        "what is the status of the report?",
        "7 words: \"what is the status of the report?\"",
    );

    let remember = assert_answered(
        &t,
        &mut worker,
        (&number, &room),
        "remember: the report is due on Friday",
        "Noted (7 words).",
    );
    let notes = t.json(&[
        "--profile",
        "receiver",
        "runtimes",
        "notes",
        &runtime,
        &room,
    ]);
    let notes = notes["notes"].as_array().expect("notes");
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert_eq!(notes[0]["key"], format!("remember:{remember}"));
    assert_eq!(notes[0]["text"], "the report is due on Friday");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_process_example_answers() {
    let (t, number, room) = befriended("handler-process").await;
    let (mut worker, _) = example_worker(
        &t,
        "relayger --profile receiver --json worker run py-worker --from now --process examples/agents/worker.json",
    );
    assert_answered(
        &t,
        &mut worker,
        (&number, &room),
        "how long is a piece of string",
        "7 words, 29 characters; the longest word is 'string'.",
    );
}

/// The context example answers from what the worker read for it: the
/// thread (a sealed message in it opened by the worker, counted, never
/// quoted) and the note it kept on an earlier job, with no token of its own.
#[tokio::test(flavor = "multi_thread")]
async fn the_context_example_answers_from_the_thread_and_the_notes() {
    let (t, number, room) = befriended("handler-context").await;
    let (mut worker, _) = example_worker(
        &t,
        "relayger --profile receiver --json worker run context-worker --from now --process examples/agents/context-worker.json",
    );

    let remember = assert_answered(
        &t,
        &mut worker,
        (&number, &room),
        "remember: the report is due on Friday",
        "Noted.",
    );

    let sealed = t.ask(
        &number,
        "the code word is marmalade",
        &["--sealed", "--reply-to", &remember],
    );
    let skipped = outcome_of(&mut worker, &sealed);
    assert_eq!(skipped["event"], "skipped", "{skipped}");

    let question = t.ask(
        &number,
        "when is the report due?",
        &["--reply-to", &remember],
    );
    assert_replied(&mut worker, &question);
    let thread = t.json(&["--profile", "sender", "thread", &room, &question]);
    let answers: Vec<&Value> = thread["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["byRuntime"] == true && m["text"] != "Noted.")
        .collect();
    assert_eq!(answers.len(), 1, "{thread}");
    assert_eq!(
        text(&answers[0]["text"]),
        "I see 3 other messages (1 sealed, 1 opened by the worker, not quoted) in this thread; \
         it began with \"remember: the report is due on Friday\". \
         My notes: \"the report is due on Friday\"."
    );

    // A sealed message from before the agent joined a group stays closed:
    // the handler gets it with `openError`, and the notes of this room
    // (none) rather than of the first.
    let sender_number = text(&t.json(&["--profile", "sender", "whoami"])["number"]);
    let carol = text(&t.register("carol", "Carol", false)["number"]);
    t.befriend(("sender", &sender_number), ("carol", &carol));
    let group = t.json(&[
        "--profile",
        "sender",
        "rooms",
        "create",
        "--name",
        "plans",
        "--member",
        &carol,
    ]);
    let group = text(&group["id"]);
    let early = t.json(&[
        "--profile",
        "sender",
        "send",
        "--room",
        &group,
        "before the agent joined",
        "--sealed",
    ]);
    let early = text(&early["messageId"]);
    t.json(&["--profile", "sender", "rooms", "add", &group, &number]);
    let late = t.json(&[
        "--profile",
        "sender",
        "send",
        "--room",
        &group,
        "what did I say?",
        "--ask",
        "--reply-to",
        &early,
    ]);
    let late = text(&late["messageId"]);
    assert_replied(&mut worker, &late);
    assert_eq!(
        reply_text(&t, &group, &late),
        "I see 1 other message (1 sealed, 0 opened by the worker, not quoted) in this thread; \
         it began with a sealed message. No notes yet."
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_looping_module_fails_at_the_timeout_and_the_worker_keeps_serving() {
    let (t, number, room) = befriended("handler-loop").await;
    std::fs::write(t.cwd().join("loop.mjs"), LOOPING_MODULE).expect("write module");
    let mut worker = started_worker(
        &t,
        "relayger --profile receiver --json worker run loop-worker --from now --handler ./loop.mjs --handler-timeout 1500",
    );

    let stuck = t.ask(&number, "loop forever", &[]);
    assert_failed_with(&mut worker, &stuck, "timeout");

    assert_still_serving(&t, &mut worker, (&number, &room));
    assert!(
        !worker.event_names().iter().any(|name| name == "stopped"),
        "{:?}",
        worker.seen()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_question_is_cancelled_at_its_deadline_before_the_handler_timeout() {
    let (t, number, _room) = befriended("handler-deadline").await;
    std::fs::write(t.cwd().join("loop.mjs"), LOOPING_MODULE).expect("write module");
    let mut worker = started_worker(
        &t,
        "relayger --profile receiver --json worker run deadline-worker --from now --handler ./loop.mjs --handler-timeout 20000",
    );

    // A deadline 5 s ahead: far earlier than the 20 s handler timeout.
    let deadline = Timestamp(Timestamp::now().0 + Duration::from_secs(5)).to_string();
    let asked = Instant::now();
    let stuck = t.ask(
        &number,
        "loop past the deadline",
        &["--deadline", &deadline],
    );
    let claimed = worker.wait_for("the claim", EVENT_TIMEOUT, |event| {
        event["event"] == "claimed" && event["messageId"] == stuck.as_str()
    });
    let timeout_ms = claimed["handlerTimeoutMs"]
        .as_u64()
        .expect("handlerTimeoutMs");
    assert!(timeout_ms <= 5_000, "{claimed}");
    assert_failed_with(&mut worker, &stuck, "timeout");
    let took = asked.elapsed();
    assert!(took < Duration::from_secs(12), "failed after {took:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_handler_that_cannot_load_stops_the_worker_before_it_registers() {
    let (t, _number, _room) = befriended("handler-load").await;
    std::fs::write(
        t.cwd().join("worker.json"),
        r#"{"executable": "python3", "argz": []}"#,
    )
    .expect("write worker.json");
    let cases: [(&str, &str); 2] = [
        ("--handler", "./missing.mjs"),
        ("--process", "./worker.json"),
    ];
    for (flag, file) in cases {
        let line = format!(
            "relayger --profile receiver --json worker run broken --from now {flag} {file}"
        );
        let output = t.shell(&line);
        assert_eq!(output.code, Some(1), "{line}: {output:?}");
        assert!(output.stdout.is_empty(), "{line}: {output:?}");
        let envelope: Value = serde_json::from_str(output.stderr.trim())
            .unwrap_or_else(|err| panic!("{line}: {err}: {}", output.stderr));
        assert_eq!(envelope["error"]["code"], "invalid_argument", "{envelope}");
        let message = text(&envelope["error"]["message"]);
        assert!(message.contains(file.trim_start_matches("./")), "{message}");
    }
    // A context the routes would refuse stops the worker at start too, the
    // nested field and its range named.
    let contexts = [
        (
            r#"{"thread": {"limit": 0}}"#,
            "`context.thread.limit`: must be an integer from 1 to 100",
        ),
        (
            r#"{"thread": {"maxBytes": 100000}}"#,
            "`context.thread.maxBytes`: must be an integer from 512 to 65536",
        ),
        (
            r#"{"notes": {"limit": 50}}"#,
            "`context.notes.limit`: must be an integer from 1 to 20",
        ),
    ];
    for (context, expected) in contexts {
        std::fs::write(
            t.cwd().join("context.json"),
            format!(r#"{{"executable": "python3", "context": {context}}}"#),
        )
        .expect("write context.json");
        let line = "relayger --profile receiver --json worker run broken --from now --process ./context.json";
        let output = t.shell(line);
        assert_eq!(output.code, Some(1), "{context}: {output:?}");
        assert!(output.stdout.is_empty(), "{context}: {output:?}");
        let envelope: Value = serde_json::from_str(output.stderr.trim())
            .unwrap_or_else(|err| panic!("{context}: {err}: {}", output.stderr));
        assert_eq!(envelope["error"]["code"], "invalid_argument", "{envelope}");
        let message = text(&envelope["error"]["message"]);
        assert!(message.contains("context.json"), "{message}");
        assert!(message.contains(expected), "{context}: {message}");
    }
    let runtimes = t.json(&["--profile", "receiver", "runtimes", "list"]);
    assert_eq!(runtimes["runtimes"], serde_json::json!([]), "{runtimes}");
}

/// `worker.json` for `sh SCRIPT` with only `PATH` passed through.
fn write_sh_process(dir: &Path, script_name: &str, script: &str) {
    std::fs::write(dir.join(script_name), script).expect("write script");
    let config = serde_json::json!({
        "executable": "sh",
        "argv": [script_name],
        "env": ["PATH"],
    });
    std::fs::write(dir.join("worker.json"), config.to_string()).expect("write worker.json");
}

/// Whether `pid` is still a live process (an unreaped zombie counts as gone).
fn process_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_module_that_runs_out_of_memory_fails_only_that_attempt() {
    let (t, number, room) = befriended("handler-oom").await;
    std::fs::write(
        t.cwd().join("hog.mjs"),
        r#"export async function handle({ message }) {
  if ((message.text ?? '').includes('allocate')) {
    const hog = [];
    for (;;) {
      hog.push(new Array(1 << 20).fill(Math.random()));
    }
  }
  return { reply: `ok: ${message.text}` };
}
"#,
    )
    .expect("write module");
    let mut worker = started_worker(
        &t,
        "relayger --profile receiver --json worker run hog-worker --from now --handler ./hog.mjs --handler-timeout 60000",
    );

    let hog = t.ask(&number, "allocate", &[]);
    assert_failed_with(&mut worker, &hog, "out_of_memory");

    assert_still_serving(&t, &mut worker, (&number, &room));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sleeping_process_is_killed_at_the_timeout_with_its_children() {
    let (t, number, _room) = befriended("handler-orphan").await;
    write_sh_process(
        t.cwd(),
        "sleeper.sh",
        "sleep 1000 &\necho $! > child.pid.tmp\nmv child.pid.tmp child.pid\nsleep 1000\n",
    );
    let mut worker = started_worker(
        &t,
        "relayger --profile receiver --json worker run sleep-worker --from now --process ./worker.json --handler-timeout 1500",
    );

    let stuck = t.ask(&number, "sleep forever", &[]);
    assert_failed_with(&mut worker, &stuck, "timeout");
    let pid: u32 = std::fs::read_to_string(t.cwd().join("child.pid"))
        .expect("the script wrote its child's pid")
        .trim()
        .parse()
        .expect("a pid");
    assert!(
        !process_alive(pid),
        "the handler's child {pid} outlived the attempt"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn malformed_process_output_fails_the_attempt_with_the_reason() {
    let (t, number, _room) = befriended("handler-malformed").await;
    write_sh_process(
        t.cwd(),
        "malformed.sh",
        r#"request=$(cat)
case "$request" in
  *two-lines*) printf '{"reply":"one"}\n{"reply":"two"}\n' ;;
  *) echo 'this is not JSON' ;;
esac
"#,
    );
    let mut worker = started_worker(
        &t,
        "relayger --profile receiver --json worker run malformed-worker --from now --process ./worker.json",
    );

    for (question, reason) in [
        ("answer in two-lines", "more than one line"),
        ("answer in prose", "invalid JSON"),
    ] {
        let asked = t.ask(&number, question, &[]);
        let failed = assert_failed_with(&mut worker, &asked, "invalid_output");
        assert!(text(&failed["error"]).contains(reason), "{failed}");
    }
}

/// Credential variables the worker has and no handler may see.
const CREDENTIALS: [(&str, &str); 4] = [
    ("RELAYGER_TOKEN", "x"),
    ("DATABASE_URL", "postgres://x"),
    ("AWS_SECRET_ACCESS_KEY", "x"),
    ("PGPASSWORD", "x"),
];

/// Asks a question of a worker started with `handler` and the credential
/// variables set: the handler saw `PATH` and none of them.
async fn assert_no_credential_variables(label: &str, handler: &str) {
    let (t, number, room) = befriended(label).await;
    std::fs::write(
        t.cwd().join("env.mjs"),
        "export async function handle() {\n  return { reply: Object.keys(process.env).sort().join(' ') };\n}\n",
    )
    .expect("write module");
    write_sh_process(
        t.cwd(),
        "env.sh",
        "cat > /dev/null\nnames=$(awk 'BEGIN { for (name in ENVIRON) print name }' | sort | tr '\\n' ' ')\nprintf '{\"reply\":\"%s\"}\\n' \"$names\"\n",
    );
    let mut worker = t.spawn_shell(
        &format!("relayger --profile receiver --json worker run env-worker --from now {handler}"),
        &CREDENTIALS,
    );
    worker.wait_event("started");
    let question = t.ask(&number, "what do you see?", &[]);
    assert_replied(&mut worker, &question);
    let seen = reply_text(&t, &room, &question);
    let names: Vec<&str> = seen.split_whitespace().collect();
    assert!(names.contains(&"PATH"), "{names:?}");
    for (credential, _) in CREDENTIALS {
        assert!(!names.contains(&credential), "{names:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_process_handler_sees_no_credential_variables() {
    assert_no_credential_variables("handler-env-process", "--process ./worker.json").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_module_handler_sees_no_credential_variables() {
    assert_no_credential_variables("handler-env-module", "--handler ./env.mjs").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stale_note_commits_neither_note_nor_reply_and_is_dead_lettered() {
    let (t, number, room) = befriended("handler-stale-note").await;
    std::fs::write(
        t.cwd().join("stale.mjs"),
        r#"export async function handle({ message }) {
  return {
    reply: `noted: ${message.text}`,
    note: { key: 'k', text: 't', version: 5, sourceMessageIds: [message.messageId] },
  };
}
"#,
    )
    .expect("write module");
    std::fs::write(t.cwd().join("policy.json"), r#"{"maxAttempts": 2}"#).expect("policy");
    let mut worker = t.spawn_shell(
        "relayger --profile receiver --json worker run stale-worker --from now --handler ./stale.mjs --policy ./policy.json",
        &[],
    );
    let started = worker.wait_event("started");
    let runtime = text(&started["runtimeId"]);

    let question = t.ask(&number, "keep this", &[]);
    assert_failed_with(&mut worker, &question, "version_conflict");
    let dead = outcome_of(&mut worker, &question);
    assert_eq!(dead["event"], "dead_letter", "{dead}");
    assert!(text(&dead["error"]).contains("version_conflict"), "{dead}");

    let thread = t.json(&["--profile", "sender", "thread", &room, &question]);
    let messages = thread["messages"].as_array().expect("messages");
    assert!(
        messages.iter().any(|m| m["text"] == "keep this"),
        "{thread}"
    );
    assert!(
        messages
            .iter()
            .all(|m| m["replyTo"] != question.as_str() && m["byRuntime"] != true),
        "{thread}"
    );
    let notes = t.json(&[
        "--profile",
        "receiver",
        "runtimes",
        "notes",
        &runtime,
        &room,
    ]);
    assert_eq!(notes["notes"], serde_json::json!([]), "{notes}");
}
