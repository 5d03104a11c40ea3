//! Our workers ask outside A2A agents (`worker run NAME --a2a URL
//! [--a2a-token-env VAR]`), end to end: the outside agent is served by the
//! official Python SDK (`tests/a2a/agent.py`), the question is asked with
//! `relayger send … --ask`, and the worker in between is the real binary.

use crate::cli_support;

use std::process::Command;

use cli_support::{
    Befriended, CliTest, EVENT_TIMEOUT, Party, ServerSettings, WorkerProcess, builtin_worker_args,
    stop_worker, text, worker_args,
};
use relayger_tests::a2a_sdks::{python_sdk_server, scripts_dir};
use serde_json::Value;

/// The bearer the outside agent expects; it must appear in no output of
/// ours.
const OUTSIDE_TOKEN: &str = "outside-agent-bearer-5f1c2d9e";
/// The variable the operator names with `--a2a-token-env`.
const TOKEN_VAR: &str = "OUTSIDE_AGENT_TOKEN";

async fn setup(label: &str) -> (CliTest, Befriended) {
    CliTest::with_pair(label, ServerSettings::lease(3000, false), true).await
}

/// `tests/a2a/agent.py --mode MODE EXTRA…`, expecting `OUTSIDE_TOKEN`
/// from `TOKEN_VAR`, started: the process and its base URL.
fn outside_agent(mode: &str, extra: &[&str]) -> (WorkerProcess, String) {
    let python = python_sdk_server().expect("the Python A2A SDK's server side");
    let script = scripts_dir().join("agent.py");
    let mut command = Command::new(python);
    command
        .arg(script)
        .args(["--mode", mode, "--token-env", TOKEN_VAR])
        .args(extra)
        .env(TOKEN_VAR, OUTSIDE_TOKEN);
    let mut agent = WorkerProcess::spawn(command, &format!("outside agent ({mode})"));
    let listening = agent.wait_for("its address", EVENT_TIMEOUT, |line| {
        line.as_str()
            .is_some_and(|line| line.starts_with("listening "))
    });
    let url = text(&listening)["listening ".len()..].to_owned();
    (agent, url)
}

/// Waits for the agent's line `PREFIX…`; the line.
fn agent_line(agent: &mut WorkerProcess, prefix: &str) -> String {
    let line = agent.wait_for(prefix, EVENT_TIMEOUT, |line| {
        line.as_str().is_some_and(|line| line.starts_with(prefix))
    });
    text(&line)
}

/// The receiver's worker `name` forwarding to `url` with the token from
/// `TOKEN_VAR`, and `extra` options; started.
fn a2a_worker(t: &CliTest, name: &str, url: &str, extra: &[&str]) -> WorkerProcess {
    let mut args = vec!["--from", "now", "--a2a", url, "--a2a-token-env", TOKEN_VAR];
    args.extend_from_slice(extra);
    let mut worker = t.spawn(
        &worker_args("receiver", name, &args),
        &[(TOKEN_VAR, OUTSIDE_TOKEN)],
    );
    worker.wait_event("started");
    worker
}

fn assert_no_token(what: &str, output: &str) {
    assert!(
        !output.contains(OUTSIDE_TOKEN),
        "the outside agent's token is in {what}: {output}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_question_is_answered_by_a_streaming_outside_agent_with_the_operators_token() {
    let (t, pair) = setup("a2a-client-stream").await;
    let (mut agent, url) = outside_agent("upper", &[]);
    let worker = a2a_worker(&t, "a2a-worker", &url, &[]);
    let waited = t.ask_waiting(&pair.receiver_number, "hello from relayger", &[], &["30"]);
    assert!(waited.success(), "{waited:?}");
    let reply: Value = serde_json::from_str(&waited.stdout).expect("reply JSON");
    assert_eq!(reply["text"], "HELLO FROM RELAYGER", "{reply}");
    // The card says it streams: one streaming send, with the bearer.
    assert_eq!(
        agent_line(&mut agent, "request "),
        "request SendStreamingMessage bearer=ok"
    );
    let exit = stop_worker(worker);
    let replied: Vec<&Value> = exit
        .events
        .iter()
        .filter(|e| e["event"] == "replied")
        .collect();
    assert_eq!(replied.len(), 1, "{:?}", exit.events);
    // Usage is not reported: the outside agent's model calls are not ours
    // to count.
    assert!(
        replied[0].get("usage").is_none_or(Value::is_null),
        "{:?}",
        replied[0]
    );
    let events: Vec<String> = exit.events.iter().map(Value::to_string).collect();
    assert_no_token("the worker's events", &events.join("\n"));
    assert_no_token("the worker's stderr", &exit.stderr);
    assert_no_token(
        "send's output",
        &format!("{}{}", waited.stdout, waited.stderr),
    );
    let question = text(&reply["replyTo"]);
    let thread = t.json(&["--profile", "sender", "thread", &pair.room, &question]);
    assert_no_token("the thread", &thread.to_string());
}

#[tokio::test(flavor = "multi_thread")]
async fn an_outside_agent_that_does_not_stream_is_polled_through_its_card_url() {
    let (t, pair) = setup("a2a-client-poll").await;
    let (mut agent, url) = outside_agent("reverse", &["--no-streaming"]);
    let card = format!("{url}/.well-known/agent-card.json");
    let worker = a2a_worker(&t, "a2a-worker", &card, &[]);
    let reply = t.ask_and_wait(&pair.receiver_number, "stressed", &["30"]);
    assert_eq!(reply["text"], "desserts", "{reply}");
    assert_eq!(
        agent_line(&mut agent, "request "),
        "request SendMessage bearer=ok"
    );
    assert_eq!(
        agent_line(&mut agent, "request "),
        "request GetTask bearer=ok"
    );
    stop_worker(worker);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_outside_agent_fails_the_attempt_with_its_reason() {
    let (t, pair) = setup("a2a-client-fail").await;
    let (_agent, url) = outside_agent("fail", &[]);
    std::fs::write(t.cwd().join("policy.json"), r#"{"maxAttempts": 1}"#).expect("policy");
    let mut worker = a2a_worker(&t, "a2a-worker", &url, &["--policy", "./policy.json"]);
    let question = t.ask(&pair.receiver_number, "please work", &[]);
    let dead = worker.wait_for("the dead letter", EVENT_TIMEOUT, |e| {
        e["messageId"] == question.as_str() && e["event"] == "dead_letter"
    });
    assert_eq!(
        dead["error"], "a2a_failed: backend_down (the remote agent broke)",
        "{dead}"
    );
    let letters = t.json(&[
        "--profile",
        "receiver",
        "runtimes",
        "dead-letters",
        "a2a-worker",
    ]);
    assert!(letters.to_string().contains("a2a_failed"), "{letters}");
    let delivery = t.json(&["--profile", "sender", "delivery", &pair.room, &question]);
    assert_eq!(delivery["state"], "failed", "{delivery}");
    assert!(t.replies_to("sender", &pair.room, &question).is_empty());
    stop_worker(worker);
}

#[tokio::test(flavor = "multi_thread")]
async fn canceling_our_question_cancels_the_outside_agents_task() {
    let (t, pair) = setup("a2a-client-cancel").await;
    let (mut agent, url) = outside_agent("wait", &[]);
    let mut worker = a2a_worker(&t, "a2a-worker", &url, &["--handler-timeout", "60000"]);
    let question = t.ask(&pair.receiver_number, "take your time", &[]);
    let working = agent_line(&mut agent, "working ");
    let task_id = working["working ".len()..].to_owned();

    let canceled = t.json(&["--profile", "sender", "cancel", &pair.room, &question]);
    assert_eq!(canceled["canceled"], true, "{canceled}");
    let told = worker.wait_for("the cancel", EVENT_TIMEOUT, |e| {
        e["messageId"] == question.as_str() && e["event"] != "claimed"
    });
    assert_eq!(told["event"], "canceled", "{told}");
    // The outside agent was asked to cancel that very task, with the bearer.
    assert_eq!(
        agent_line(&mut agent, "request CancelTask"),
        "request CancelTask bearer=ok"
    );
    assert_eq!(
        agent_line(&mut agent, "cancel "),
        format!("cancel {task_id}")
    );
    stop_worker(worker);
    assert!(t.replies_to("sender", &pair.room, &question).is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_a2a_options_are_refused_before_the_worker_starts() {
    let t = CliTest::start("a2a-client-options").await;
    t.register("receiver", "Receiver", true);
    // The options, the environment, what the error says.
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);
    let cases: [Case<'_>; 4] = [
        (
            &["--a2a", "http://agent.example.com"],
            &[],
            "only to this machine",
        ),
        (
            &["--a2a", "ftp://127.0.0.1/x"],
            &[],
            "not an http:// or https:// URL",
        ),
        (
            &[
                "--a2a",
                "https://agent.example.com",
                "--a2a-token-env",
                "A2A_TEST_UNSET_VAR",
            ],
            &[],
            "A2A_TEST_UNSET_VAR is not set",
        ),
        (
            &[
                "--a2a",
                "https://agent.example.com",
                "--a2a-token-env",
                TOKEN_VAR,
            ],
            &[(TOKEN_VAR, " ")],
            "is empty",
        ),
    ];
    for (extra, env, expected) in cases {
        let mut command = t.cli.command().expect("relayger");
        command
            .args(worker_args("receiver", "w", extra))
            .env_remove("A2A_TEST_UNSET_VAR")
            .envs(env.iter().copied());
        let output = command.output().expect("run");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{extra:?}: {stderr}");
        assert!(stderr.contains(expected), "{extra:?}: {stderr}");
        assert!(
            String::from_utf8_lossy(&output.stdout).is_empty(),
            "{extra:?}"
        );
    }
    // One handler kind only; the token variable only with --a2a.
    for extra in [
        &["--a2a", "https://agent.example.com", "--builtin", "echo"][..],
        &["--builtin", "echo", "--a2a-token-env", TOKEN_VAR][..],
    ] {
        let output = t.run(&worker_args("receiver", "w", extra));
        assert_eq!(output.code, Some(2), "{extra:?}: {output:?}");
    }
    let runtimes = t.json(&["--profile", "receiver", "runtimes", "list"]);
    assert_eq!(
        runtimes["runtimes"].as_array().map(Vec::len),
        Some(0),
        "{runtimes}"
    );
}

/// Another Relayger agent is an outside agent too: `a2a card` names its
/// card, and a worker given that card's URL and a Relayger token of its own
/// agent asks it over A2A like any other.
#[tokio::test(flavor = "multi_thread")]
async fn a_relayger_agent_answers_our_worker_over_a2a() {
    let (t, pair) = setup("a2a-client-relayger").await;
    let helper = t.register_number(Party::agent("helper", "Helper"));
    t.befriend(("receiver", &pair.receiver_number), ("helper", &helper));
    let mut helper_worker = t.spawn(
        &builtin_worker_args("helper", "uppercase", "uppercase"),
        &[],
    );
    helper_worker.wait_event("started");

    let card = t.json(&["--profile", "receiver", "a2a", "card", &helper]);
    let card_url = format!("{}/a2a/{helper}/.well-known/agent-card.json", t.url());
    assert_eq!(card["url"], card_url.as_str(), "{card}");
    assert_eq!(card["card"]["name"], "Helper", "{card}");
    assert_eq!(
        card["card"]["supportedInterfaces"][0]["url"],
        format!("{}/a2a/{helper}", t.url()).as_str(),
        "{card}"
    );
    assert_eq!(card["card"]["capabilities"]["streaming"], true, "{card}");
    let human = t.run(&["--profile", "receiver", "a2a", "card", &helper]);
    assert!(human.success(), "{human:?}");
    assert_eq!(
        human.stdout.lines().next(),
        Some(card_url.as_str()),
        "{human:?}"
    );
    let printed: Value = serde_json::from_str(
        human
            .stdout
            .split_once('\n')
            .map(|(_, json)| json)
            .unwrap_or_default(),
    )
    .expect("the card as JSON");
    assert_eq!(printed, card["card"]);
    // A number is checked before any request.
    assert_eq!(
        t.error_code(&["--profile", "receiver", "a2a", "card", "helper"]),
        "invalid_argument"
    );

    let created = t.json(&[
        "--profile",
        "receiver",
        "tokens",
        "create",
        "--scopes",
        "read,write",
    ]);
    let token = text(&created["secret"]);
    let args = worker_args(
        "receiver",
        "relay",
        &[
            "--from",
            "now",
            "--a2a",
            &card_url,
            "--a2a-token-env",
            TOKEN_VAR,
        ],
    );
    let mut worker = t.spawn(&args, &[(TOKEN_VAR, &token)]);
    worker.wait_event("started");
    let reply = t.ask_and_wait(&pair.receiver_number, "relay this", &["30"]);
    assert_eq!(reply["text"], "RELAY THIS", "{reply}");
    let exit = stop_worker(worker);
    let events: Vec<String> = exit.events.iter().map(Value::to_string).collect();
    assert!(!events.join("\n").contains(&token), "{events:?}");
    assert!(!exit.stderr.contains(&token), "{}", exit.stderr);
    stop_worker(helper_worker);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_outside_agent_past_the_handler_timeout_has_its_task_canceled() {
    let (t, pair) = setup("a2a-client-timeout").await;
    let (mut agent, url) = outside_agent("wait", &["--no-streaming"]);
    std::fs::write(t.cwd().join("policy.json"), r#"{"maxAttempts": 1}"#).expect("policy");
    let mut worker = a2a_worker(
        &t,
        "a2a-worker",
        &url,
        &["--policy", "./policy.json", "--handler-timeout", "1500"],
    );
    let question = t.ask(&pair.receiver_number, "too slow", &[]);
    let working = agent_line(&mut agent, "working ");
    let task_id = working["working ".len()..].to_owned();
    let dead = worker.wait_for("the dead letter", EVENT_TIMEOUT, |e| {
        e["messageId"] == question.as_str() && e["event"] == "dead_letter"
    });
    assert_eq!(dead["error"], "handler_timeout", "{dead}");
    // Polled, then canceled when the time ran out.
    assert_eq!(
        agent_line(&mut agent, "request CancelTask"),
        "request CancelTask bearer=ok"
    );
    assert_eq!(
        agent_line(&mut agent, "cancel "),
        format!("cancel {task_id}")
    );
    let polled = agent
        .seen()
        .iter()
        .filter(|line| line.as_str() == Some("request GetTask bearer=ok"))
        .count();
    assert!(polled >= 1, "{:?}", agent.seen());
    stop_worker(worker);
}
