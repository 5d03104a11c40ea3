//! Policy refusals through the real binaries. 300 questions from a sender
//! the policy's `allowedSenders` excludes, then one from an allowed sender:
//! `relayger worker run` with the default `--from beginning` answers the
//! allowed one at once. A `runtimes configure` that narrows `allowedSenders`
//! and `allowedRooms` turns waiting questions into skips the worker never
//! sees, and opening the policy again replays nothing.

use crate::cli_support;

use std::time::{Duration, Instant};

use cli_support::{
    CliTest, ServerSettings, builtin_worker_args, builtin_worker_args_no_from, stop_worker, text,
    wait_replied,
};
use serde_json::Value;

#[tokio::test(flavor = "multi_thread")]
async fn three_hundred_refused_questions_do_not_delay_the_workers_answer_to_an_allowed_one() {
    let t = CliTest::start_with("worker-skips", ServerSettings::lease(2000, false)).await;
    let receiver = text(&t.register("receiver", "Receiver", true)["number"]);
    let stranger = text(&t.register("stranger", "Stranger", false)["number"]);
    let friend = text(&t.register("friend", "Friend", false)["number"]);
    t.befriend(("stranger", &stranger), ("receiver", &receiver));
    t.befriend(("friend", &friend), ("receiver", &receiver));
    let spam = t.shell(&format!(
        "i=0; while [ $i -lt 300 ]; do \
           relayger --profile stranger send {receiver} \"spam $i\" --ask >/dev/null || exit 1; \
           i=$((i + 1)); \
         done"
    ));
    assert!(spam.success(), "{spam:?}");
    let question = text(
        &t.json(&[
            "--profile",
            "friend",
            "send",
            &receiver,
            "a real question",
            "--ask",
        ])["messageId"],
    );
    let policy = t.cwd().join("policy.json");
    std::fs::write(&policy, format!(r#"{{"allowedSenders": ["{friend}"]}}"#)).expect("policy");
    let policy = policy.to_str().expect("utf-8 path").to_owned();
    let mut worker = t.spawn(
        &[
            builtin_worker_args_no_from("receiver", "gatekeeper", "uppercase"),
            vec!["--policy", &policy],
        ]
        .concat(),
        // No fallback poll to rescue a worker that was told to wait.
        &[("RELAYGER_WORKER_FALLBACK_MS", "60000")],
    );
    worker.wait_event("started");
    let started = Instant::now();
    wait_replied(&mut worker, &question);
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(2),
        "answered {took:?} after start"
    );
    stop_worker(worker);
}

/// `relayger --profile PROFILE send --room ROOM TEXT --ask`; the message id.
fn ask_in(t: &CliTest, profile: &str, room: &str, question: &str) -> String {
    text(
        &t.json(&[
            "--profile",
            profile,
            "send",
            "--room",
            room,
            question,
            "--ask",
        ])["messageId"],
    )
}

/// Writes `policy` to a file and configures the runtime to it as version
/// `version`; the file's path.
fn configure(t: &CliTest, runtime: &str, version: u32, policy: &str) -> String {
    let path = t.cwd().join(format!("policy-{version}.json"));
    std::fs::write(&path, policy).expect("policy");
    let path = path.to_str().expect("utf-8 path").to_owned();
    let current = (version - 1).to_string();
    let configured = t.json(&[
        "--profile",
        "receiver",
        "runtimes",
        "configure",
        runtime,
        "--version",
        &current,
        "--policy",
        &path,
    ]);
    assert_eq!(configured["version"], version, "{configured}");
    path
}

#[tokio::test(flavor = "multi_thread")]
async fn a_configure_that_narrows_senders_and_rooms_turns_waiting_questions_into_skips_the_worker_never_sees()
 {
    let t = CliTest::start("worker-configure-skips").await;
    let receiver = text(&t.register("receiver", "Receiver", true)["number"]);
    let alice = text(&t.register("alice", "Alice", false)["number"]);
    let bob = text(&t.register("bob", "Bob", false)["number"]);
    t.befriend(("alice", &alice), ("receiver", &receiver));
    let bob_direct = t.befriend(("bob", &bob), ("receiver", &receiver));
    t.befriend(("alice", &alice), ("bob", &bob));
    let group = text(
        &t.json(&[
            "--profile",
            "alice",
            "rooms",
            "create",
            "--name",
            "team",
            "--member",
            &bob,
            "--member",
            &receiver,
        ])["id"],
    );
    let run = |policy: Option<&str>| {
        let mut args = builtin_worker_args("receiver", "gate", "uppercase");
        if let Some(policy) = policy {
            args.extend_from_slice(&["--policy", policy]);
        }
        t.spawn(&args, &[])
    };
    // Registered with the open policy, then stopped.
    let mut worker = run(None);
    let runtime = text(&worker.wait_event("started")["runtimeId"]);
    stop_worker(worker);

    // While it is stopped: questions from a sender and a room the next
    // policy refuses, and one it allows.
    let refused_sender = ask_in(&t, "alice", &group, "alice asks the team");
    let refused_room = ask_in(&t, "bob", &bob_direct, "bob asks directly");
    let allowed = ask_in(&t, "bob", &group, "bob asks the team");
    let policy = configure(
        &t,
        &runtime,
        2,
        &format!(r#"{{"allowedSenders": ["{bob}"], "allowedRooms": ["{group}"]}}"#),
    );

    let mut worker = run(Some(&policy));
    worker.wait_event("started");
    wait_replied(&mut worker, &allowed);
    // Jobs are judged oldest first: once a later question is answered, every
    // waiting one has been judged.
    let later = ask_in(&t, "bob", &group, "bob asks again");
    wait_replied(&mut worker, &later);
    let exit = stop_worker(worker);
    for refused in [&refused_sender, &refused_room] {
        assert!(
            exit.events
                .iter()
                .all(|e| e["messageId"] != refused.as_str()),
            "the worker saw a refused question: {:?}",
            exit.events
        );
    }
    let log = t.json(&["--profile", "receiver", "runtimes", "log", &runtime]);
    let reason = |message: &str| {
        log["records"]
            .as_array()
            .expect("records")
            .iter()
            .find(|r| r["kind"] == "skipped" && r["messageId"] == message)
            .map(|r| text(&r["detail"]["reason"]))
    };
    assert_eq!(
        reason(&refused_sender).as_deref(),
        Some("sender_not_allowed"),
        "{log}"
    );
    assert_eq!(
        reason(&refused_room).as_deref(),
        Some("room_not_allowed"),
        "{log}"
    );
    let inspect = t.json(&["--profile", "receiver", "runtimes", "inspect", &runtime]);
    assert_eq!(inspect["jobs"]["handled"], 2, "{inspect}");
    assert_eq!(inspect["jobs"]["skipped"], 2, "{inspect}");

    // Opened again: the skipped and handled questions are not replayed.
    let open = configure(&t, &runtime, 3, "{}");
    let mut worker = run(Some(&open));
    worker.wait_event("started");
    let last = ask_in(&t, "alice", &group, "alice asks once more");
    wait_replied(&mut worker, &last);
    let exit = stop_worker(worker);
    let claimed: Vec<&Value> = exit
        .events
        .iter()
        .filter(|e| e["event"] == "claimed")
        .collect();
    assert_eq!(claimed.len(), 1, "replayed: {claimed:?}");
    let inspect = t.json(&["--profile", "receiver", "runtimes", "inspect", &runtime]);
    assert_eq!(inspect["jobs"]["handled"], 3, "{inspect}");
    assert_eq!(inspect["jobs"]["skipped"], 2, "{inspect}");
}
