//! The worker under the faults of issue "durability under faults": skips
//! and partial claims never delay a real question, contact requests are
//! handled while every slot is busy, SIGINT during a claim burns no attempt,
//! and a lease that cannot be renewed cancels the handler before it runs
//! out on the server. Real binaries, real server, real PostgreSQL.

mod cli_support;

use std::time::{Duration, Instant};

use cli_support::{CliTest, EVENT_TIMEOUT, ServerSettings, WorkerProcess, text};
use relayger_core::ids::IdentityNumber;
use relayger_core::wire::SendRequest;
use relayger_worker::{Client, ProfileDir};
use serde_json::Value;

/// Long enough that a test would notice waiting for it.
const LONG_FALLBACK_MS: &str = "60000";

fn client(t: &CliTest, profile: &str) -> Client {
    let profiles = ProfileDir::at(t.cli.home());
    Client::for_profile(&profiles.load(profile).expect("profile")).expect("client")
}

async fn ask(from: &Client, to: &str, text: &str) -> String {
    let to: IdentityNumber = to.parse().expect("number");
    let sent = from
        .send(&SendRequest {
            to: Some(to),
            text: Some(text.to_owned()),
            ask: true,
            ..SendRequest::default()
        })
        .await
        .expect("send");
    sent.message_id.to_string()
}

fn stop(worker: WorkerProcess) -> Vec<Value> {
    worker.signal("INT");
    let exit = worker.wait_exit(EVENT_TIMEOUT);
    assert_eq!(exit.code, Some(0), "{exit:?}");
    exit.events
}

/// A module that holds its slot for a minute (until it is cancelled).
const BUSY_MODULE: &str = r#"export async function handle({ message }) {
  await new Promise((resolve) => setTimeout(resolve, 60000));
  return { reply: `late: ${message.text}` };
}
"#;

/// A receiver whose single slot is taken by a long job, and a worker on it
/// (`--accept-contacts` when `accept`).
/// With `restricted` the worker runs on a token limited to the sender's
/// room (all scopes otherwise).
async fn busy_receiver(
    label: &str,
    restricted: bool,
    accept: bool,
) -> (CliTest, WorkerProcess, String) {
    let t = CliTest::start_with(
        label,
        ServerSettings {
            lease_ms: Some(2000),
            log_requests: true,
        },
    )
    .await;
    let receiver = text(&t.register("receiver", "Receiver", true)["number"]);
    let sender = text(&t.register("sender", "Sender", false)["number"]);
    let room = t.befriend(("sender", &sender), ("receiver", &receiver));
    let mut profile = "receiver";
    if restricted {
        t.json(&[
            "--profile",
            "receiver",
            "tokens",
            "create",
            "--scopes",
            "read,write,contacts",
            "--room",
            &room,
            "--save-as",
            "receiver-limited",
        ]);
        profile = "receiver-limited";
    }
    std::fs::write(t.cwd().join("busy.mjs"), BUSY_MODULE).expect("module");
    std::fs::write(t.cwd().join("policy.json"), r#"{"concurrency": 1}"#).expect("policy");
    let mut args = vec![
        "--profile",
        profile,
        "--json",
        "worker",
        "run",
        "busy-bot",
        "--from",
        "now",
        "--handler",
        "./busy.mjs",
        "--handler-timeout",
        "60000",
        "--policy",
        "policy.json",
    ];
    if accept {
        args.push("--accept-contacts");
    }
    let mut bot = t.spawn(&args, &[("RELAYGER_WORKER_FALLBACK_MS", LONG_FALLBACK_MS)]);
    bot.wait_event("started");
    let question = ask(&client(&t, "sender"), &receiver, "take your time").await;
    bot.wait_for("the long job", EVENT_TIMEOUT, |e| {
        e["event"] == "claimed" && e["messageId"] == question.as_str()
    });
    (t, bot, receiver)
}

/// #13 item 2: a public bot whose every slot is busy with a long job still
/// accepts a contact request within seconds (the signal makes it claim, the
/// answer carries the count, the accept runs beside the job loop).
#[tokio::test(flavor = "multi_thread")]
async fn a_busy_bot_accepts_contact_requests_without_waiting() {
    let (t, mut bot, receiver) = busy_receiver("durability-busy-accept", false, true).await;
    let visitor = text(&t.register("visitor", "Visitor", false)["number"]);
    let requested_at = Instant::now();
    t.json(&["--profile", "visitor", "contacts", "request", &receiver]);
    let accepted = bot.wait_for("the acceptance", Duration::from_secs(20), |e| {
        e["event"] == "contact_accepted"
    });
    assert_eq!(accepted["number"], visitor.as_str());
    let took = requested_at.elapsed();
    assert!(took < Duration::from_secs(15), "accepted after {took:?}");
    assert!(
        bot.seen()
            .iter()
            .all(|e| e["event"] != "replied" && e["event"] != "failed"),
        "the long job still runs: {:?}",
        bot.seen()
    );
    let events = stop(bot);
    assert!(
        events.iter().any(|e| e["event"] == "released"),
        "{events:?}"
    );
    let contacts = t.json(&["--profile", "receiver", "contacts", "requests"]);
    assert_eq!(contacts["count"], 0, "{contacts}");
}

/// The same for the report: a busy worker reports the new count.
#[tokio::test(flavor = "multi_thread")]
async fn a_busy_worker_reports_contact_requests_without_waiting() {
    let (t, mut bot, receiver) = busy_receiver("durability-busy-report", false, false).await;
    t.register("visitor", "Visitor", false);
    t.json(&["--profile", "visitor", "contacts", "request", &receiver]);
    let reported = bot.wait_for("the count", Duration::from_secs(20), |e| {
        e["event"] == "contact_requests"
    });
    assert_eq!(reported["count"], 1);
    let events = stop(bot);
    assert!(
        events.iter().all(|e| e["event"] != "contact_accepted"),
        "{events:?}"
    );
}

/// Kept: a room-restricted token neither counts nor accepts, busy or not.
#[tokio::test(flavor = "multi_thread")]
async fn a_room_restricted_token_neither_counts_nor_accepts_contact_requests() {
    let (t, bot, receiver) = busy_receiver("durability-restricted", true, true).await;
    let claims = t.claim_requests();
    let visitor = text(&t.register("visitor", "Visitor", false)["number"]);
    t.json(&["--profile", "visitor", "contacts", "request", &receiver]);
    // A question in the token's room wakes the busy worker: it claims, and
    // the answer (without a count) has been seen once a claim followed.
    ask(&client(&t, "sender"), &receiver, "after the request").await;
    t.await_claims(claims + 1);
    let events = stop(bot);
    assert!(
        events.iter().all(|e| !e["event"]
            .as_str()
            .unwrap_or_default()
            .starts_with("contact_")),
        "{events:?}"
    );
    let pending = t.json(&["--profile", "receiver", "contacts", "requests"]);
    assert_eq!(pending["count"], 1, "not accepted: {pending}");
    assert_eq!(pending["incoming"][0]["number"], visitor.as_str());
}
