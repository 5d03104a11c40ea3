//! Everyday use of the `relayger` command: things by name wherever a
//! person types an id (runtimes by name, dead letters by any of their
//! three ids, direct rooms by the contact's number).

use crate::cli_support;

use cli_support::{CliTest, outcome_of, stop_worker, text, write_failing_process_handler};
use serde_json::Value;

/// The longest common start of two strings.
fn common_prefix(a: &str, b: &str) -> String {
    a.chars()
        .zip(b.chars())
        .take_while(|(x, y)| x == y)
        .map(|(x, _)| x)
        .collect()
}

/// A runtime of profile `receiver` called `name` that exists (registered by
/// a worker that started and stopped); its id.
fn register_runtime(t: &CliTest, name: &str) -> String {
    let worker = t.spawn_shell(
        &format!("relayger --profile receiver --json worker run {name} --builtin echo --from now"),
        &[],
    );
    let mut worker = worker;
    let started = worker.wait_event("started");
    stop_worker(worker);
    text(&started["runtimeId"])
}

#[tokio::test(flavor = "multi_thread")]
async fn runtimes_are_named_by_name_and_dead_letters_by_any_of_their_ids() {
    let t = CliTest::start("cli-everyday-names").await;
    let pair = t.befriended_pair(false);
    let number = pair.receiver_number.clone();

    write_failing_process_handler(t.cwd());
    let mut worker = t.spawn_shell(
        "relayger --profile receiver --json worker run reply-worker --from now \
         --process ./worker.json --policy ./policy.json",
        &[],
    );
    let runtime = text(&worker.wait_event("started")["runtimeId"]);
    let questions: Vec<String> = ["first", "second", "third"]
        .iter()
        .map(|q| t.ask(&number, q, &[]))
        .collect();
    for question in &questions {
        let dead = outcome_of(&mut worker, question);
        assert_eq!(dead["event"], "dead_letter", "{dead}");
    }
    stop_worker(worker);

    // Every `runtimes …` command takes the name as well as the id.
    let inspected = t.json(&[
        "--profile",
        "receiver",
        "runtimes",
        "inspect",
        "reply-worker",
    ]);
    assert_eq!(text(&inspected["id"]), runtime, "{inspected}");
    let by_prefix = t.json(&[
        "--profile",
        "receiver",
        "runtimes",
        "inspect",
        &runtime[..13],
    ]);
    assert_eq!(text(&by_prefix["id"]), runtime, "{by_prefix}");
    let stats = t.json(&["--profile", "receiver", "runtimes", "stats", "reply-worker"]);
    assert_eq!(stats["jobs"]["dead"], 3, "{stats}");
    let log = t.json(&[
        "--profile",
        "receiver",
        "runtimes",
        "log",
        "reply-worker",
        "--limit",
        "5",
    ]);
    assert!(
        !log["records"].as_array().expect("records").is_empty(),
        "{log}"
    );
    let dead = t.json(&[
        "--profile",
        "receiver",
        "runtimes",
        "dead-letters",
        "reply-worker",
    ]);
    let jobs = dead["jobs"].as_array().expect("jobs").clone();
    assert_eq!(jobs.len(), 3, "{dead}");
    let job_of = |question: &str| -> Value {
        jobs.iter()
            .find(|job| job["messageId"] == question)
            .cloned()
            .unwrap_or_else(|| panic!("no dead letter for {question}: {dead}"))
    };

    // `runtimes retry` takes the jobId, the jobKey or the message id.
    let first = job_of(&questions[0]);
    let second = job_of(&questions[1]);
    let third = job_of(&questions[2]);
    for (job, typed) in [
        (&first, text(&first["jobId"])),
        (&second, text(&second["jobKey"])),
        (&third, questions[2].clone()),
    ] {
        let retried = t.json(&[
            "--profile",
            "receiver",
            "runtimes",
            "retry",
            "reply-worker",
            &typed,
        ]);
        assert_eq!(retried["jobId"], job["jobId"], "{typed}: {retried}");
        assert_eq!(retried["state"], "pending", "{typed}: {retried}");
    }
    let dead = t.json(&[
        "--profile",
        "receiver",
        "runtimes",
        "dead-letters",
        &runtime,
    ]);
    assert_eq!(
        dead["jobs"],
        serde_json::json!([]),
        "all three revived: {dead}"
    );
    // A job key of no job of this runtime is not found.
    let other_key = text(&first["jobKey"]).replace(&runtime.replace('-', ""), &"0".repeat(32));
    assert_eq!(
        t.error_code(&[
            "--profile",
            "receiver",
            "runtimes",
            "retry",
            "reply-worker",
            &other_key
        ]),
        "not_found"
    );

    // A name nobody has is not found, and the error lists the runtimes.
    let missing = t.run(&["--profile", "receiver", "runtimes", "inspect", "nobody"]);
    assert_eq!(missing.code, Some(3), "{missing:?}");
    assert!(
        missing.stderr.contains("not_found") && missing.stderr.contains("reply-worker"),
        "{missing:?}"
    );

    // Two runtimes whose ids start alike: the common start is ambiguous,
    // and the error names both.
    let other = register_runtime(&t, "open-bot");
    let prefix = common_prefix(&runtime, &other);
    assert!(
        prefix.len() >= 4,
        "UUIDv7 ids made seconds apart share a start: {runtime} {other}"
    );
    let ambiguous = t.run(&["--profile", "receiver", "runtimes", "stats", &prefix]);
    assert_eq!(ambiguous.code, Some(1), "{ambiguous:?}");
    for needle in [
        "invalid_argument",
        "reply-worker",
        "open-bot",
        &runtime,
        &other,
    ] {
        assert!(ambiguous.stderr.contains(needle), "{needle}: {ambiguous:?}");
    }
    let deleted = t.json(&["--profile", "receiver", "runtimes", "delete", "open-bot"]);
    assert_eq!(deleted["ok"], true, "{deleted}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_direct_room_is_named_by_the_contacts_number() {
    let t = CliTest::start("cli-everyday-rooms").await;
    let pair = t.befriended_pair(false);
    let (receiver, room) = (pair.receiver_number.clone(), pair.room.clone());

    let sent = t.json(&[
        "--profile",
        "sender",
        "send",
        "--room",
        &receiver,
        "by number",
    ]);
    assert_eq!(text(&sent["conversationId"]), room, "{sent}");
    let message = text(&sent["messageId"]);
    let read = t.json(&["--profile", "sender", "message", &receiver, &message]);
    assert_eq!(read["text"], "by number", "{read}");
    let thread = t.json(&[
        "--profile",
        "receiver",
        "thread",
        &pair.sender_number,
        &message,
    ]);
    assert_eq!(
        thread["messages"][0]["messageId"],
        message.as_str(),
        "{thread}"
    );
    let acked = t.json(&["--profile", "receiver", "ack", &pair.sender_number, "1"]);
    assert_eq!(text(&acked["roomId"]), room, "{acked}");

    // A number that is not a contact has no direct room.
    let stranger = t.run(&["--profile", "sender", "message", "100999999", &message]);
    assert_eq!(stranger.code, Some(3), "{stranger:?}");
    assert!(stranger.stderr.contains("contacts list"), "{stranger:?}");
}
