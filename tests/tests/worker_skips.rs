//! Refusals never delay a real question, driven as a new user would: 300
//! questions from a sender the policy's `allowedSenders` excludes, then one
//! from an allowed sender, and `relayger worker run` with the default
//! `--from beginning` answers the allowed one at once.

mod cli_support;

use std::time::{Duration, Instant};

use cli_support::{CliTest, EVENT_TIMEOUT, ServerSettings, text};

#[tokio::test(flavor = "multi_thread")]
async fn three_hundred_refused_questions_do_not_delay_the_workers_answer_to_an_allowed_one() {
    let t = CliTest::start_with(
        "worker-skips",
        ServerSettings {
            lease_ms: Some(2000),
            ..ServerSettings::default()
        },
    )
    .await;
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
            "--profile",
            "receiver",
            "--json",
            "worker",
            "run",
            "gatekeeper",
            "--builtin",
            "uppercase",
            "--policy",
            &policy,
        ],
        // No fallback poll to rescue a worker that was told to wait.
        &[("RELAYGER_WORKER_FALLBACK_MS", "60000")],
    );
    worker.wait_event("started");
    let started = Instant::now();
    worker.wait_for("the allowed question's reply", EVENT_TIMEOUT, |e| {
        e["event"] == "replied" && e["messageId"] == question.as_str()
    });
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(2),
        "answered {took:?} after start"
    );
    worker.signal("INT");
    let exit = worker.wait_exit(EVENT_TIMEOUT);
    assert_eq!(exit.code, Some(0), "{exit:?}");
}
