//! What wakes a waiting worker: the runtime socket (at once), the fallback
//! poll (when the socket is unavailable), and nothing else — idle claims are
//! counted on the server. Contact requests wake it too. `send --ask --wait`
//! waits on the identity socket for the reply.

use crate::cli_support;

use std::time::{Duration, Instant};

use cli_support::{
    CliTest, Party, ServerSettings, WorkerProcess, builtin_worker_args, stop_worker,
    stop_worker_without, text, wait_replied,
};
use serde_json::Value;

/// Long enough that a test would notice waiting for it.
const LONG_FALLBACK_MS: &str = "60000";

struct Setup {
    t: CliTest,
    receiver_number: String,
}

async fn setup(label: &str) -> Setup {
    let (t, pair) = CliTest::with_pair(label, ServerSettings::lease(2000, true), true).await;
    Setup {
        t,
        receiver_number: pair.receiver_number,
    }
}

impl Setup {
    fn worker(&self, profile: &str, extra: &[&str], env: &[(&str, &str)]) -> WorkerProcess {
        let mut args = builtin_worker_args(profile, "reply-worker", "uppercase");
        args.extend_from_slice(extra);
        self.t.spawn(&args, env)
    }

    fn send(&self, text: &str, ask: bool) -> Value {
        let mut args = vec!["--profile", "sender", "send", &self.receiver_number, text];
        if ask {
            args.push("--ask");
        }
        self.t.json(&args)
    }

    /// Waits until the server has received `count` claims in total.
    fn await_claims(&self, count: usize) {
        self.t.await_claims(count);
    }
}

fn stop(worker: WorkerProcess) -> Vec<Value> {
    stop_worker(worker).events
}

#[tokio::test(flavor = "multi_thread")]
async fn the_socket_wakes_the_worker_at_once_and_idle_it_sends_no_claims() {
    let s = setup("worker-socket").await;
    let mut worker = s.worker(
        "receiver",
        &[],
        &[("RELAYGER_WORKER_FALLBACK_MS", LONG_FALLBACK_MS)],
    );
    assert_eq!(worker.wait_event("started")["socket"], "connected");
    s.await_claims(1);

    // Idle: nothing is claimed between signals (the fallback is a minute
    // away). Only time can show an absence. (A signal of the befriending
    // may still arrive just after the start: at most one more claim.)
    std::thread::sleep(Duration::from_secs(2));
    let idle = s.t.claim_requests();
    assert!(idle <= 2, "{idle} claims");
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(s.t.claim_requests(), idle, "an idle worker does not poll");

    // Information (not a question) is a signal: exactly one claim.
    s.send("report uploaded", false);
    s.await_claims(idle + 1);
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(s.t.claim_requests(), idle + 1, "one signal, one claim");

    // A question is answered long before the fallback poll would come.
    let asked_at = Instant::now();
    let question = text(&s.send("hello from relayger", true)["messageId"]);
    wait_replied(&mut worker, &question);
    // Well before the minute-long fallback, even on a loaded machine.
    let took = asked_at.elapsed();
    assert!(took < Duration::from_secs(15), "answered after {took:?}");
    stop_worker_without(worker, "unavailable");
}

#[tokio::test(flavor = "multi_thread")]
async fn without_the_socket_the_fallback_poll_still_answers() {
    let s = setup("worker-fallback").await;
    let mut worker = s.worker(
        "receiver",
        &[],
        &[
            ("RELAYGER_WORKER_NO_SOCKET", "1"),
            ("RELAYGER_WORKER_FALLBACK_MS", "1000"),
        ],
    );
    assert_eq!(worker.wait_event("started")["socket"], "disabled");
    let question = text(&s.send("is anyone polling?", true)["messageId"]);
    wait_replied(&mut worker, &question);
    // The poll runs about once a second (±10 %), not faster.
    let before = s.t.claim_requests();
    std::thread::sleep(Duration::from_secs(3));
    let polls = s.t.claim_requests() - before;
    assert!((2..=4).contains(&polls), "{polls} claims in 3 s");
    stop(worker);
}

#[tokio::test(flavor = "multi_thread")]
async fn contact_requests_are_reported_once_per_change_or_accepted_at_once() {
    let s = setup("worker-contacts").await;
    // One request is already pending when the worker starts.
    let early = s.t.register("early", "Early", false);
    s.t.request_contact("early", &s.receiver_number);
    let mut worker = s.worker(
        "receiver",
        &[],
        &[("RELAYGER_WORKER_FALLBACK_MS", LONG_FALLBACK_MS)],
    );
    worker.wait_event("started");
    assert_eq!(worker.wait_event("contact_requests")["count"], 1);
    let late = s.t.register("late", "Late", false);
    s.t.request_contact("late", &s.receiver_number);
    assert_eq!(worker.wait_event("contact_requests")["count"], 2);
    // The owner answers one by hand: the count changes once more.
    s.t.json(&[
        "--profile",
        "receiver",
        "contacts",
        "accept",
        &text(&early["number"]),
    ]);
    assert_eq!(worker.wait_event("contact_requests")["count"], 1);
    let events = stop(worker);
    let counts: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "contact_requests")
        .collect();
    assert_eq!(counts.len(), 3, "once per change: {counts:?}");

    // A public bot accepts at once, woken by the socket (the fallback is a
    // minute away), and then answers the new contact's question.
    let mut bot = s.worker(
        "receiver",
        &["--accept-contacts"],
        &[("RELAYGER_WORKER_FALLBACK_MS", LONG_FALLBACK_MS)],
    );
    bot.wait_event("started");
    // The pending request from before is accepted first.
    assert_eq!(bot.wait_event("contact_accepted")["number"], late["number"]);
    let newcomer = s.t.register("newcomer", "Newcomer", false);
    let requested_at = Instant::now();
    s.t.request_contact("newcomer", &s.receiver_number);
    let accepted = bot.wait_event("contact_accepted");
    assert_eq!(accepted["number"], newcomer["number"]);
    let took = requested_at.elapsed();
    assert!(took < Duration::from_secs(15), "accepted after {took:?}");
    let question = s.t.json(&[
        "--profile",
        "newcomer",
        "send",
        &s.receiver_number,
        "may I ask?",
        "--ask",
    ]);
    let question_id = text(&question["messageId"]);
    wait_replied(&mut bot, &question_id);
    // A bot that accepts does not report counts.
    stop_worker_without(bot, "contact_requests");
}

#[tokio::test(flavor = "multi_thread")]
async fn without_the_contacts_scope_requests_are_neither_counted_nor_accepted() {
    let s = setup("worker-no-contacts").await;
    s.t.json(&[
        "--profile",
        "receiver",
        "tokens",
        "create",
        "--scopes",
        "read,write",
        "--save-as",
        "receiver-plain",
    ]);
    let mut worker = s.worker(
        "receiver-plain",
        &["--accept-contacts"],
        &[("RELAYGER_WORKER_FALLBACK_MS", LONG_FALLBACK_MS)],
    );
    worker.wait_event("started");
    s.await_claims(1);
    let stranger =
        s.t.new_requester(Party::person("stranger", "Stranger"), &s.receiver_number);
    // The request wakes the worker (one claim); a message from a contact
    // afterwards makes another, so the first claim's answer has been handled.
    s.await_claims(2);
    s.send("report uploaded", false);
    s.await_claims(3);
    stop_worker_without(worker, "contact_");
    s.t.assert_one_request_from("receiver", &stranger);
}

#[tokio::test(flavor = "multi_thread")]
async fn send_ask_wait_prints_the_reply_or_times_out() {
    let s = setup("worker-send-wait").await;
    // No worker yet: the wait ends without a reply.
    let started = Instant::now();
    let lonely = s.t.run(&[
        "--profile",
        "sender",
        "--json",
        "send",
        &s.receiver_number,
        "anyone there?",
        "--ask",
        "--wait",
        "1",
    ]);
    // Timed out: exit 7 (README, exit statuses).
    assert_eq!(lonely.code, Some(7), "{lonely:?}");
    assert!(lonely.stderr.contains("\"timeout\""), "{lonely:?}");
    assert!(started.elapsed() < Duration::from_secs(15));

    let mut worker = s.worker("receiver", &[], &[]);
    worker.wait_event("started");
    let reply =
        s.t.ask_and_wait(&s.receiver_number, "hello from relayger", &[]);
    assert_eq!(reply["text"], "HELLO FROM RELAYGER");
    assert_eq!(reply["byRuntime"], true);
    assert_eq!(reply["sender"]["number"], s.receiver_number.as_str());
    // Human mode prints the reply's line.
    let human = s.t.run(&[
        "--profile",
        "sender",
        "send",
        &s.receiver_number,
        "straße",
        "--ask",
        "--wait",
        "20",
    ]);
    assert!(human.success(), "{human:?}");
    assert!(human.stdout.contains(": STRASSE ("), "{}", human.stdout);
    stop(worker);
}
