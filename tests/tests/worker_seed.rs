//! The product page, run as written: every `relayger …` line of the
//! persistent assistant listener page (except the `--handler`/`--process`
//! lines, run by `worker_handlers.rs`) against the real binaries, a
//! real server and PostgreSQL.

use crate::cli_support;

use cli_support::{
    Befriended, CliTest, ServerSettings, assert_replied, outcome_of, stop_worker,
    stop_worker_cleanly, text,
};
use serde_json::Value;

/// The page's placeholders filled in.
struct Placeholders {
    receiver_number: String,
    runtime: String,
    room: String,
    message: String,
    seq: String,
}

impl Placeholders {
    fn fill(&self, line: &str) -> String {
        line.replace("RECEIVER_NUMBER", &self.receiver_number)
            .replace("RUNTIME_UUID", &self.runtime)
            .replace("ROOM_UUID", &self.room)
            .replace("MESSAGE_UUID", &self.message)
            .replace("SEQ", &self.seq)
    }
}

/// Runs a page line that must succeed; its stdout as JSON.
fn page_line(t: &CliTest, line: &str) -> Value {
    let output = t.shell(line);
    assert!(output.success(), "{line}: {output:?}");
    serde_json::from_str(output.stdout.trim())
        .unwrap_or_else(|err| panic!("{line}: not JSON ({err}): {}", output.stdout))
}

/// The replies to `message` in its thread, read by `profile`.
fn replies(t: &CliTest, profile: &str, room: &str, message: &str) -> Vec<Value> {
    t.replies_to(profile, room, message)
}

#[tokio::test(flavor = "multi_thread")]
async fn every_line_of_the_page_runs_as_written() {
    let t = CliTest::start_with("worker-seed", ServerSettings::lease(2000, false)).await;
    // "Create two agent identities/profiles and accept their friendship."
    let Befriended {
        sender_number,
        receiver_number,
        room,
        ..
    } = t.befriended_pair(true);
    let mut page = Placeholders {
        receiver_number,
        runtime: String::new(),
        room: room.clone(),
        message: String::new(),
        seq: String::new(),
    };

    // On the receiving machine.
    let mut worker = t.spawn_shell(
        "relayger --profile receiver --json worker run reply-worker --builtin uppercase --from now",
        &[],
    );
    let started = worker.wait_event("started");
    assert_eq!(started["name"], "reply-worker");
    assert_eq!(started["socket"], "connected");
    page.runtime = text(&started["runtimeId"]);

    // On the sending machine.
    let hello = page_line(
        &t,
        &page.fill(
            "relayger --profile sender --compact send RECEIVER_NUMBER 'hello from relayger' --ask",
        ),
    );
    let hello_id = text(&hello["messageId"]);
    assert_replied(&mut worker, &hello_id);
    let report = page_line(
        &t,
        &page.fill("relayger --profile sender --compact send RECEIVER_NUMBER 'report uploaded'"),
    );
    let status = page_line(
        &t,
        &page.fill(
            "relayger --profile sender --compact send RECEIVER_NUMBER 'What is the status?' --ask \\\n  --deadline 2026-10-02T12:00:00Z",
        ),
    );
    assert_eq!(status["deadline"], "2026-10-02T12:00:00Z");
    // A later question proves both were scanned before it was answered.
    let later = page_line(
        &t,
        &page.fill("relayger --profile sender --compact send RECEIVER_NUMBER 'and now?' --ask"),
    );
    let later_id = text(&later["messageId"]);
    assert_eq!(outcome_of(&mut worker, &later_id)["event"], "replied");
    let hello_replies = replies(&t, "sender", &room, &hello_id);
    assert_eq!(hello_replies.len(), 1);
    assert_eq!(hello_replies[0]["text"], "HELLO FROM RELAYGER");
    assert_eq!(hello_replies[0]["byRuntime"], true);
    let report_id = text(&report["messageId"]);
    assert!(replies(&t, "sender", &room, &report_id).is_empty());
    let status_id = text(&status["messageId"]);
    // RFC 3339 UTC texts of one shape compare as times.
    let deadline_passed = status["createdAt"].as_str().expect("createdAt") > "2026-10-02T12:00:00Z";
    if deadline_passed {
        assert!(replies(&t, "sender", &room, &status_id).is_empty());
    }
    let handled: Vec<&Value> = worker
        .seen()
        .iter()
        .filter(|e| e["event"] == "claimed")
        .collect();
    assert!(
        handled.iter().all(|e| e["messageId"] != report_id.as_str()),
        "information is not a job: {handled:?}"
    );

    // Inspection.
    let list = page_line(&t, "relayger --profile receiver --json runtimes list");
    assert_eq!(list["runtimes"][0]["id"], page.runtime.as_str());
    let inspect = page_line(
        &t,
        &page.fill("relayger --profile receiver --json runtimes inspect RUNTIME_UUID"),
    );
    assert_eq!(inspect["version"], 1);
    assert_eq!(inspect["jobs"]["handled"], 2, "{inspect}");
    let log = page_line(
        &t,
        &page.fill("relayger --profile receiver --json runtimes log RUNTIME_UUID --limit 50"),
    );
    let records = log["records"].as_array().expect("records");
    assert!(records.iter().any(|r| r["kind"] == "registered"), "{log}");
    if deadline_passed {
        assert!(
            records.iter().any(|r| r["messageId"] == status_id.as_str()
                && r["kind"] == "skipped"
                && r["detail"]["reason"] == "deadline_passed"),
            "{log}"
        );
    }
    let stats = page_line(
        &t,
        &page.fill("relayger --profile receiver --json runtimes stats RUNTIME_UUID"),
    );
    assert_eq!(stats["claims"], 2, "{stats}");
    assert_eq!(
        stats["reported"],
        serde_json::json!({"modelCalls": 0, "inputTokens": 0, "outputTokens": 0}),
        "builtins report zero"
    );
    assert_eq!(stats["unreportedAttempts"], 0);

    // "Stop the worker; use the version from the inspect response."
    stop_worker_cleanly(worker);
    std::fs::write(
        t.cwd().join("policy.json"),
        r#"{"triggers": ["questions"], "maxCallsPerHour": 30, "concurrency": 2}"#,
    )
    .expect("policy");
    let configured = page_line(
        &t,
        &page.fill(
            "relayger --profile receiver --json runtimes configure RUNTIME_UUID --version 1 --policy ./policy.json",
        ),
    );
    assert_eq!(configured["version"], 2);
    assert_eq!(configured["policy"]["concurrency"], 2);
    let mut worker = t.spawn_shell(
        "relayger --profile receiver --json worker run reply-worker --builtin uppercase --from now --policy ./policy.json",
        &[],
    );
    let restarted = worker.wait_event("started");
    assert_eq!(restarted["runtimeId"], page.runtime.as_str());
    assert_eq!(restarted["version"], 2);
    assert_eq!(restarted["concurrency"], 2);
    let question = page_line(
        &t,
        &page.fill("relayger --profile sender --compact send RECEIVER_NUMBER 'remember the decision' --ask"),
    );
    page.message = text(&question["messageId"]);
    page.seq = question["seq"].to_string();
    let outcome = outcome_of(&mut worker, &page.message);
    assert_eq!(outcome["event"], "replied");

    // Context, notes.
    let message = page_line(
        &t,
        &page.fill("relayger --profile receiver --json message ROOM_UUID MESSAGE_UUID"),
    );
    assert_eq!(message["text"], "remember the decision");
    let thread = page_line(
        &t,
        &page.fill(
            "relayger --profile receiver --json thread ROOM_UUID MESSAGE_UUID --limit 5 --max-bytes 4096",
        ),
    );
    assert_eq!(thread["messages"][0]["messageId"], page.message.as_str());
    assert_eq!(thread["messages"][1]["text"], "REMEMBER THE DECISION");
    let after = page_line(
        &t,
        &page.fill(
            "relayger --profile receiver --json thread ROOM_UUID MESSAGE_UUID --after SEQ --limit 5 --max-bytes 4096",
        ),
    );
    let after_messages = after["messages"].as_array().expect("messages");
    assert_eq!(after_messages.len(), 1, "{after}");
    assert_eq!(after_messages[0]["replyTo"], page.message.as_str());
    let note = page_line(
        &t,
        &page.fill(
            "printf 'Decision from the last conversation' | relayger --profile receiver --json runtimes note RUNTIME_UUID \\\n  ROOM_UUID decision --version 0 --sources MESSAGE_UUID --stdin",
        ),
    );
    assert_eq!(note["key"], "decision");
    assert_eq!(note["version"], 1);
    assert_eq!(note["sourceMessageIds"][0], page.message.as_str());
    let notes = page_line(
        &t,
        &page.fill(
            "relayger --profile receiver --json runtimes notes RUNTIME_UUID ROOM_UUID --limit 5",
        ),
    );
    assert_eq!(
        notes["notes"][0]["text"],
        "Decision from the last conversation"
    );
    stop_worker(worker);

    // Friend requests: a public bot.
    let bot = t.register("bot", "Bot", true);
    let bot_number = text(&bot["number"]);
    let mut open_bot = t.spawn_shell(
        "relayger --profile bot --json worker run open-bot --builtin echo --from now --accept-contacts",
        &[],
    );
    open_bot.wait_event("started");
    t.request_contact("sender", &bot_number);
    let accepted = open_bot.wait_event("contact_accepted");
    assert_eq!(accepted["number"], sender_number.as_str());
    let asked = page_line(
        &t,
        &format!("relayger --profile sender --compact send {bot_number} 'echo this' --ask"),
    );
    let asked_id = text(&asked["messageId"]);
    assert_eq!(outcome_of(&mut open_bot, &asked_id)["event"], "replied");
    let bot_room = text(&asked["conversationId"]);
    let echoed = replies(&t, "sender", &bot_room, &asked_id);
    assert_eq!(echoed[0]["text"], "echo this");
    stop_worker(open_bot);
}

#[tokio::test(flavor = "multi_thread")]
async fn starting_without_a_model_answers_in_unicode_upper_case_whatever_the_locale() {
    let t = CliTest::start("worker-no-model").await;
    let Befriended {
        receiver_number,
        room,
        ..
    } = t.befriended_pair(true);
    // A Turkish locale must not turn `i` into `İ`.
    let mut worker = t.spawn_shell(
        "relayger --profile receiver --json worker run reply-worker --builtin uppercase --from now",
        &[("LC_ALL", "tr_TR.UTF-8"), ("LANG", "tr_TR.UTF-8")],
    );
    worker.wait_event("started");
    let send = |text: &str, ask: bool| -> Value {
        let mut line =
            format!("relayger --profile sender --compact send {receiver_number} '{text}'");
        if ask {
            line.push_str(" --ask");
        }
        page_line(&t, &line)
    };
    let hello = send("hello from relayger", true);
    let report = send("report uploaded", false);
    // "--deadline requires --ask": refused before anything is sent.
    let refused = t.shell(&format!(
        "relayger --profile sender --compact send {receiver_number} 'What is the status?' --deadline 2026-10-02T12:00:00Z"
    ));
    assert_eq!(refused.code, Some(1), "{refused:?}");
    assert!(refused.stderr.contains("invalid_argument"), "{refused:?}");
    let strasse = send("straße", true);
    let istanbul = send("istanbul", true);
    // A sealed question is skipped: its plaintext never goes into a reply.
    let sealed = t.json(&[
        "--profile",
        "sender",
        "send",
        &receiver_number,
        "the secret plan",
        "--ask",
        "--sealed",
    ]);

    let expected = [
        (hello, "HELLO FROM RELAYGER"),
        (strasse, "STRASSE"),
        (istanbul, "ISTANBUL"),
    ];
    for (question, answer) in expected {
        let id = text(&question["messageId"]);
        assert_eq!(outcome_of(&mut worker, &id)["event"], "replied");
        let replies = replies(&t, "sender", &room, &id);
        assert_eq!(replies.len(), 1);
        assert_eq!(replies[0]["text"], answer);
    }
    let sealed_id = text(&sealed["messageId"]);
    let skipped = outcome_of(&mut worker, &sealed_id);
    assert_eq!(skipped["event"], "skipped", "{skipped}");
    assert_eq!(skipped["reason"], "sealed");
    assert!(replies(&t, "sender", &room, &sealed_id).is_empty());
    assert!(replies(&t, "sender", &room, &text(&report["messageId"])).is_empty());
    let exit = stop_worker(worker);
    assert_eq!(
        exit.events.last().expect("events"),
        &serde_json::json!({"event": "stopped", "reason": "interrupted"})
    );
}
