//! The worker under the faults of issue "durability under faults": skips
//! and partial claims never delay a real question, contact requests are
//! handled while every slot is busy, SIGINT during a claim burns no attempt,
//! and a lease that cannot be renewed cancels the handler before it runs
//! out on the server. Real binaries, real server, real PostgreSQL.

use crate::cli_support;

use std::time::{Duration, Instant};

use cli_support::{
    CliTest, EVENT_TIMEOUT, Party, ServerSettings, WorkerProcess, stop_worker, stop_worker_without,
    text,
};
use diesel::sql_types::{BigInt, Text};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl, SimpleAsyncConnection};
use relayger_core::ids::IdentityNumber;
use relayger_core::policy::Policy;
use relayger_core::wire::{RegisterRuntimeRequest, SendRequest, StartFrom};
use relayger_worker::{Client, ProfileDir};
use serde_json::Value;

/// Long enough that a test would notice waiting for it.
const LONG_FALLBACK_MS: &str = "60000";

fn client(t: &CliTest, profile: &str) -> Client {
    let profiles = ProfileDir::at(t.cli.home());
    Client::for_profile(&ProfileDir::load(&profiles, profile).expect("profile")).expect("client")
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

/// A server with lease `lease_ms`, an agent `receiver` and its contact
/// `sender` (a person); the receiver's number and their room.
async fn befriended(label: &str, lease_ms: u64, log_requests: bool) -> (CliTest, String, String) {
    let (t, pair) =
        CliTest::with_pair(label, ServerSettings::lease(lease_ms, log_requests), false).await;
    (t, pair.receiver_number, pair.room)
}

/// A receiver token with every scope (and `extra` options), saved as
/// profile `save_as`; the created token.
fn full_token(t: &CliTest, extra: &[&str], save_as: &str) -> Value {
    let mut args = vec!["--profile", "receiver", "tokens", "create"];
    args.extend_from_slice(&["--scopes", "read,write,contacts"]);
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--save-as", save_as]);
    t.json(&args)
}

/// `worker run bot` with the uppercase builtin (or `handler`) and `extra`.
fn worker(t: &CliTest, profile: &str, extra: &[&str]) -> WorkerProcess {
    worker_with(t, profile, &["--builtin", "uppercase"], extra)
}

fn worker_with(t: &CliTest, profile: &str, handler: &[&str], extra: &[&str]) -> WorkerProcess {
    let mut args = vec!["--profile", profile, "--json", "worker", "run", "bot"];
    args.extend_from_slice(handler);
    args.extend_from_slice(extra);
    t.spawn(&args, &[("RELAYGER_WORKER_FALLBACK_MS", LONG_FALLBACK_MS)])
}

fn stop(worker: WorkerProcess) -> Vec<Value> {
    stop_worker(worker).events
}

/// A module that holds its slot for a minute on a question containing
/// `slow` and answers everything else at once.
const SLOW_OR_QUICK_MODULE: &str = r#"export async function handle({ message }) {
  if ((message.text ?? '').includes('slow')) {
    await new Promise((resolve) => setTimeout(resolve, 60000));
  }
  return { reply: `done: ${message.text}` };
}
"#;

/// #13 item 1, the worker's part: a claim that grants fewer jobs than the
/// worker has free slots while more work is pending (`morePending`: here
/// the scan of 1,000 messages needs several claims) is followed by another
/// claim at once — not by a wait for the granted job to end. The first
/// question holds one of two slots for a minute; the second, behind the
/// messages, is answered within seconds.
#[tokio::test(flavor = "multi_thread")]
async fn a_partial_claim_with_more_pending_claims_again_without_waiting_for_a_job() {
    let (t, receiver, _) = befriended("durability-partial-claim", 2000, false).await;
    let sender = client(&t, "sender");
    let slow = ask(&sender, &receiver, "slow one").await;
    let to: IdentityNumber = receiver.parse().expect("number");
    let mut sends = tokio::task::JoinSet::new();
    for worker in 0..8 {
        let (sender, to) = (sender.clone(), to.clone());
        sends.spawn(async move {
            for n in 0..125 {
                let info = SendRequest {
                    to: Some(to.clone()),
                    text: Some(format!("fyi {worker}.{n}")),
                    ..SendRequest::default()
                };
                sender.send(&info).await.expect("send");
            }
        });
    }
    while let Some(sent) = sends.join_next().await {
        sent.expect("sender task");
    }
    let quick = ask(&sender, &receiver, "quick one").await;
    std::fs::write(t.cwd().join("slow.mjs"), SLOW_OR_QUICK_MODULE).expect("module");
    std::fs::write(t.cwd().join("policy.json"), r#"{"concurrency": 2}"#).expect("policy");
    let handler = ["--handler", "./slow.mjs", "--handler-timeout", "60000"];
    let mut bot = worker_with(&t, "receiver", &handler, &["--policy", "policy.json"]);
    bot.wait_event("started");
    let started = Instant::now();
    bot.wait_for("the slow question's claim", EVENT_TIMEOUT, |e| {
        e["event"] == "claimed" && e["messageId"] == slow.as_str()
    });
    bot.wait_for("the quick question's reply", EVENT_TIMEOUT, |e| {
        e["event"] == "replied" && e["messageId"] == quick.as_str()
    });
    let took = started.elapsed();
    assert!(took < Duration::from_secs(15), "answered after {took:?}");
    assert!(
        bot.seen()
            .iter()
            .all(|e| e["messageId"] != slow.as_str() || e["event"] == "claimed"),
        "the slow job still runs: {:?}",
        bot.seen()
    );
    stop(bot);
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
    let (t, receiver, room) = befriended(label, 2000, true).await;
    let mut profile = "receiver";
    if restricted {
        full_token(&t, &["--room", &room], "receiver-limited");
        profile = "receiver-limited";
        // Only an unrestricted token registers a runtime; the restricted
        // worker attaches to it (same name and policy).
        client(&t, "receiver")
            .runtimes()
            .register(&RegisterRuntimeRequest {
                name: "bot".into(),
                from: StartFrom::Now,
                policy: Some(Policy::parse(r#"{"concurrency": 1}"#).expect("policy")),
            })
            .await
            .expect("register the runtime");
    }
    std::fs::write(t.cwd().join("busy.mjs"), BUSY_MODULE).expect("module");
    std::fs::write(t.cwd().join("policy.json"), r#"{"concurrency": 1}"#).expect("policy");
    let mut extra = vec!["--from", "now", "--policy", "policy.json"];
    if accept {
        extra.push("--accept-contacts");
    }
    let handler = ["--handler", "./busy.mjs", "--handler-timeout", "60000"];
    let mut bot = worker_with(&t, profile, &handler, &extra);
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
    t.request_contact("visitor", &receiver);
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
    t.new_requester(Party::person("visitor", "Visitor"), &receiver);
    let reported = bot.wait_for("the count", Duration::from_secs(20), |e| {
        e["event"] == "contact_requests"
    });
    assert_eq!(reported["count"], 1);
    stop_worker_without(bot, "contact_accepted");
}

/// Kept: a room-restricted token neither counts nor accepts, busy or not.
#[tokio::test(flavor = "multi_thread")]
async fn a_room_restricted_token_neither_counts_nor_accepts_contact_requests() {
    let (t, bot, receiver) = busy_receiver("durability-restricted", true, true).await;
    let claims = t.claim_requests();
    let visitor = t.new_requester(Party::person("visitor", "Visitor"), &receiver);
    // A question in the token's room wakes the busy worker: it claims, and
    // the answer (without a count) has been seen once a claim followed.
    ask(&client(&t, "sender"), &receiver, "after the request").await;
    t.await_claims(claims + 1);
    stop_worker_without(bot, "contact_");
    t.assert_one_request_from("receiver", &visitor);
}

#[derive(diesel::QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    count: i64,
}

#[derive(diesel::QueryableByName)]
struct JobRow {
    #[diesel(sql_type = Text)]
    state: String,
    #[diesel(sql_type = BigInt)]
    attempts: i64,
}

async fn connect(t: &CliTest) -> AsyncPgConnection {
    AsyncPgConnection::establish(t.database_url())
        .await
        .expect("connect")
}

/// Every claim of runtime `bot` waits for this (sends do not: their key
/// checks need only a key-share lock).
const LOCK_RUNTIME: &str = "SELECT id FROM runtimes WHERE name = 'bot' FOR NO KEY UPDATE";

/// A connection inside a transaction that ran `lock` (a `SELECT … FOR …`):
/// the rows stay locked until it commits or rolls back.
async fn hold_lock(t: &CliTest, lock: &str) -> AsyncPgConnection {
    let mut conn = connect(t).await;
    conn.batch_execute(&format!("BEGIN; {lock}"))
        .await
        .expect("take the lock");
    conn
}

/// Waits until some statement of this database waits for a lock.
async fn await_lock_wait(conn: &mut AsyncPgConnection) {
    let until = Instant::now() + EVENT_TIMEOUT;
    loop {
        let waiting: Count = diesel::sql_query(
            "SELECT count(*) AS count FROM pg_stat_activity \
             WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        .get_result(conn)
        .await
        .expect("pg_stat_activity");
        if waiting.count > 0 {
            return;
        }
        assert!(Instant::now() < until, "no statement waits for the lock");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

async fn job_of(conn: &mut AsyncPgConnection, message_id: &str) -> JobRow {
    diesel::sql_query(format!(
        "SELECT state, attempts::bigint AS attempts FROM jobs WHERE message_id = '{message_id}'"
    ))
    .get_result(conn)
    .await
    .expect("the question's job")
}

/// #13 item 4: SIGINT while a claim is in flight (held on the runtime row
/// lock by another connection) lets the claim finish and releases what it
/// granted. With `maxAttempts: 1` the question stays pending with no
/// attempt spent, and the next worker answers it.
#[tokio::test(flavor = "multi_thread")]
async fn sigint_during_a_claim_releases_what_it_granted() {
    // A claim waits for its runtime's lock at most a third of its lease
    // (then answers 503): a 9 s lease keeps it waiting through the 1.5 s
    // the test watches the stopping worker.
    let (t, receiver, _) = befriended("durability-sigint-claim", 9000, false).await;
    std::fs::write(t.cwd().join("policy.json"), r#"{"maxAttempts": 1}"#).expect("policy");
    let args = ["--from", "now", "--policy", "policy.json"];
    // The runtime exists and is idle.
    let mut first = worker(&t, "receiver", &args);
    first.wait_event("started");
    stop(first);

    // Every claim of the runtime now waits for this transaction.
    let mut lock = hold_lock(&t, LOCK_RUNTIME).await;
    let question = ask(&client(&t, "sender"), &receiver, "only once").await;
    let mut bot = worker(&t, "receiver", &args);
    bot.wait_event("started");
    let mut observer = connect(&t).await;
    await_lock_wait(&mut observer).await;

    bot.signal("INT");
    // Only time can show an absence: the worker waits for its claim.
    assert!(
        !bot.exits_within(Duration::from_millis(1500)),
        "the worker left its claim in flight: {:?}",
        bot.seen()
    );
    lock.batch_execute("COMMIT").await.expect("unlock");
    let exit = bot.wait_exit(EVENT_TIMEOUT);
    assert_eq!(exit.code, Some(0), "{exit:?}");
    let released = exit
        .events
        .iter()
        .find(|e| e["event"] == "released")
        .unwrap_or_else(|| panic!("the granted job is released: {:?}", exit.events));
    assert_eq!(released["messageId"], question.as_str());
    assert!(
        exit.events.iter().all(|e| e["event"] != "claimed"),
        "no handler ran: {:?}",
        exit.events
    );
    let job = job_of(&mut observer, &question).await;
    assert_eq!((job.state.as_str(), job.attempts), ("pending", 0));

    // The attempt was not burnt: the next worker answers the question.
    let mut next = worker(&t, "receiver", &args);
    next.wait_for("the reply", EVENT_TIMEOUT, |e| {
        e["event"] == "replied" && e["messageId"] == question.as_str()
    });
    stop(next);
    let job = job_of(&mut observer, &question).await;
    assert_eq!((job.state.as_str(), job.attempts), ("handled", 1));
}

#[derive(diesel::QueryableByName)]
struct Millis {
    #[diesel(sql_type = BigInt)]
    ms: i64,
}

/// A process handler that says when it starts and when it is told to stop
/// (milliseconds on the wall clock, which the database shares here).
const STOPPABLE_SCRIPT: &str =
    "trap 'date +%s%3N > stopped.tmp; mv stopped.tmp stopped; exit 1' TERM
touch started
sleep 1000 &
wait $!
";

/// #13 item 9: a handler whose lease cannot be renewed (every heartbeat
/// waits on a row lock another connection holds on the job) is cancelled
/// before the lease runs out on the server, by the worker's own monotonic
/// deadline, and the attempt is reported as `lease_expired`.
#[tokio::test(flavor = "multi_thread")]
async fn a_handler_whose_lease_cannot_be_renewed_stops_before_it_expires() {
    let (t, receiver, _) = befriended("durability-stalled-heartbeat", 3000, false).await;
    std::fs::write(t.cwd().join("stoppable.sh"), STOPPABLE_SCRIPT).expect("script");
    let config = serde_json::json!({"executable": "sh", "argv": ["stoppable.sh"], "env": ["PATH"]});
    std::fs::write(t.cwd().join("worker.json"), config.to_string()).expect("worker.json");
    let handler = ["--process", "./worker.json", "--handler-timeout", "60000"];
    let mut bot = worker_with(&t, "receiver", &handler, &["--from", "now"]);
    bot.wait_event("started");
    let question = ask(&client(&t, "sender"), &receiver, "hold on").await;
    bot.wait_for("the claim", EVENT_TIMEOUT, |e| {
        e["event"] == "claimed" && e["messageId"] == question.as_str()
    });
    let until = Instant::now() + EVENT_TIMEOUT;
    while !t.cwd().join("started").exists() {
        assert!(Instant::now() < until, "the handler did not start");
        std::thread::sleep(Duration::from_millis(20));
    }

    // From now on every heartbeat waits: the lease ends where it stands.
    let mut lock = hold_lock(
        &t,
        &format!("SELECT id FROM jobs WHERE message_id = '{question}' FOR UPDATE"),
    )
    .await;
    let expires: Millis = diesel::sql_query(format!(
        "SELECT (extract(epoch FROM lease_expires_at) * 1000)::bigint AS ms \
         FROM jobs WHERE message_id = '{question}'"
    ))
    .get_result(&mut lock)
    .await
    .expect("lease expiry");

    let failed = bot.wait_for("the attempt's end", Duration::from_secs(15), |e| {
        e["event"] == "failed" && e["messageId"] == question.as_str()
    });
    let stopped: i64 = std::fs::read_to_string(t.cwd().join("stopped"))
        .expect("the handler was told to stop")
        .trim()
        .parse()
        .expect("milliseconds");
    eprintln!(
        "cancelled {} ms before the lease expired",
        expires.ms - stopped
    );
    assert!(
        stopped < expires.ms,
        "cancelled {} ms after the lease expired",
        stopped - expires.ms
    );
    assert_eq!(failed["error"], "lease_expired", "{failed}");
    lock.batch_execute("ROLLBACK").await.expect("unlock");
    stop(bot);
}

/// #13 item 12: `contact_error` in the CLI worker. A request withdrawn
/// while the bot accepts it (the accept waits on the request row, which a
/// test connection withdraws under its lock) is a `contact_error` naming
/// the requester; the bot keeps running and accepts the next request.
#[tokio::test(flavor = "multi_thread")]
async fn a_request_withdrawn_while_being_accepted_is_a_contact_error() {
    let (t, receiver, _) = befriended("durability-contact-error", 2000, false).await;
    let fickle = t.new_requester(Party::person("fickle", "Fickle"), &receiver);
    let mut lock = hold_lock(
        &t,
        "SELECT id FROM contact_requests WHERE state = 'pending' FOR UPDATE",
    )
    .await;
    let mut bot = worker(&t, "receiver", &["--from", "now", "--accept-contacts"]);
    bot.wait_event("started");
    await_lock_wait(&mut connect(&t).await).await;
    lock.batch_execute(
        "UPDATE contact_requests SET state = 'withdrawn', decided_at = now() \
         WHERE state = 'pending'; COMMIT",
    )
    .await
    .expect("withdraw under the lock");
    let error = bot.wait_event("contact_error");
    assert_eq!(error["number"], fickle.as_str(), "{error}");
    assert_eq!(error["code"], "not_found", "{error}");

    let steady = t.new_requester(Party::person("steady", "Steady"), &receiver);
    assert_eq!(
        bot.wait_event("contact_accepted")["number"],
        steady.as_str()
    );
    let events = stop(bot);
    let errors = events
        .iter()
        .filter(|e| e["event"] == "contact_error")
        .count();
    assert_eq!(errors, 1, "reported once: {events:?}");
}

/// `contact_error` without a number: the request list could not be read
/// (here: the token was revoked while the claim that carried the count was
/// in flight, held on the runtime row lock), as the JS SDK reports it.
#[tokio::test(flavor = "multi_thread")]
async fn a_request_list_that_cannot_be_read_is_a_contact_error() {
    let (t, receiver, _) = befriended("durability-contact-list-error", 2000, false).await;
    let token = full_token(&t, &[], "receiver-bot");
    let token_id = text(&token["id"]);
    let mut first = worker(&t, "receiver-bot", &["--from", "now"]);
    first.wait_event("started");
    stop(first);
    t.new_requester(Party::person("fickle", "Fickle"), &receiver);

    let mut lock = hold_lock(&t, LOCK_RUNTIME).await;
    let mut bot = worker(&t, "receiver-bot", &["--from", "now", "--accept-contacts"]);
    bot.wait_event("started");
    await_lock_wait(&mut connect(&t).await).await;
    t.json(&["--profile", "receiver", "tokens", "revoke", &token_id]);
    lock.batch_execute("COMMIT").await.expect("unlock");

    let error = bot.wait_event("contact_error");
    assert!(error.get("number").is_none(), "{error}");
    assert_eq!(error["code"], "unauthorized", "{error}");
    assert!(!text(&error["message"]).is_empty(), "{error}");
    // The worker keeps running (its next claim would stop it: revoked).
    bot.signal("INT");
    let exit = bot.wait_exit(EVENT_TIMEOUT);
    let last = exit.events.last().cloned().unwrap_or_default();
    assert_eq!(last["event"], "stopped", "{exit:?}");
}

/// A request the bot cannot accept (a block row written beside it, which
/// the block command would not leave with a pending request) stays
/// pending, and every claim response still counts it: the bot does not
/// list the requests again on each claim for the same count (a busy bot
/// claims often), only after a while or when the count changes.
#[tokio::test(flavor = "multi_thread")]
async fn an_unacceptable_request_is_not_listed_again_on_every_claim() {
    let (t, receiver, _) = befriended("durability-contact-settled", 2000, true).await;
    let blocker = t.new_requester(Party::person("blocker", "Blocker"), &receiver);
    connect(&t)
        .await
        .batch_execute(
            "INSERT INTO blocks (blocker_id, blocked_id) \
             SELECT requester_id, target_id FROM contact_requests WHERE state = 'pending'",
        )
        .await
        .expect("block");
    let mut bot = worker(&t, "receiver", &["--from", "now", "--accept-contacts"]);
    let error = bot.wait_event("contact_error");
    assert_eq!(error["number"], blocker.as_str(), "{error}");
    let sender = client(&t, "sender");
    let lists = t.requests_to("/v1/contacts/requests");
    let claims_before = t.claim_requests();
    for n in 0..6 {
        let question = ask(&sender, &receiver, &format!("question {n}")).await;
        bot.wait_for("the reply", EVENT_TIMEOUT, |e| {
            e["event"] == "replied" && e["messageId"] == question.as_str()
        });
    }
    let claims = t.claim_requests() - claims_before;
    let again = t.requests_to("/v1/contacts/requests") - lists;
    // One to find nothing left to try, one more if 5 s passed meanwhile.
    assert!(
        claims >= 6 && again <= 2,
        "{again} lists for {claims} claims"
    );
    stop(bot);
}
