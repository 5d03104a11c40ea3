//! Several `relayger-server` processes on one PostgreSQL, each client
//! talking to whichever instance it was given (client-side round robin, as a
//! load balancer would spread them): an asker on one instance is woken by a
//! reply finished through another, and a lease taken through one instance
//! is heartbeated and finished through another; one instance killed mid-run
//! loses no question.

use crate::cli_support;

use cli_support::{
    CliTest, ServerSettings, builtin_worker_args, heartbeat_then_reply, lease_of, text,
};
use relayger_core::wire::{ClaimRequest, RegisterRuntimeRequest, StartFrom};
use relayger_tests::ServerProcess;
use relayger_worker::{Client, ProfileDir};

const LEASE_MS: u64 = 3000;

/// `relayger worker run` of runtime `reply-worker` as profile `receiver`.
fn uppercase_worker() -> Vec<&'static str> {
    builtin_worker_args("receiver", "reply-worker", "uppercase")
}

/// The first instance (the CLI test's own) and two more on its database.
struct Instances {
    t: CliTest,
    more: Vec<ServerProcess>,
}

impl Instances {
    async fn start(label: &str) -> Instances {
        let t = CliTest::start_with(label, ServerSettings::lease(LEASE_MS, false)).await;
        let lease = LEASE_MS.to_string();
        let more = (0..2)
            .map(|_| {
                ServerProcess::start(
                    t.cwd(),
                    &[
                        "--listen",
                        "127.0.0.1:0",
                        "--database-url",
                        t.database_url(),
                        "--lease-ms",
                        &lease,
                    ],
                )
                .expect("start another relayger-server")
            })
            .collect();
        Instances { t, more }
    }

    /// The base URL of instance `n` (0, 1 or 2).
    fn url(&self, n: usize) -> String {
        match n {
            0 => self.t.url().to_owned(),
            n => self.more[n - 1].base_url().to_owned(),
        }
    }

    /// Points profile `name` at instance `n`.
    fn move_profile(&self, name: &str, n: usize) {
        let dir = ProfileDir::at(self.t.cli.home());
        let mut profile = dir.load(name).expect("load profile");
        profile.server = self.url(n);
        let path = dir.file(name).expect("profile file");
        let json = serde_json::to_vec_pretty(&profile).expect("profile JSON");
        std::fs::write(&path, json).expect("write profile");
    }

    /// A client acting as profile `name` through instance `n`.
    fn client(&self, name: &str, n: usize) -> Client {
        let dir = ProfileDir::at(self.t.cli.home());
        let mut profile = dir.load(name).expect("load profile");
        profile.server = self.url(n);
        Client::for_profile(&profile).expect("client")
    }

    /// A sender and a receiver who are contacts; the receiver's number.
    fn befriended(&self) -> String {
        self.t.befriended_pair(true).receiver_number
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_asker_on_one_instance_is_woken_by_a_reply_finished_through_another() {
    let s = Instances::start("ha-instances-wake").await;
    let receiver_number = s.befriended();
    // The asker stays on instance 0; the worker runs through instance 1.
    s.move_profile("receiver", 1);
    let mut worker = s.t.spawn(&uppercase_worker(), &[]);
    worker.wait_event("started");
    let reply =
        s.t.ask_and_wait(&receiver_number, "hello across instances", &["20"]);
    assert_eq!(reply["text"], "HELLO ACROSS INSTANCES");
    assert_eq!(reply["byRuntime"], true);
    let replied = worker.wait_event("replied");
    assert!(replied.is_object(), "{replied}");
    worker.signal("INT");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lease_taken_through_one_instance_is_heartbeated_and_finished_through_another() {
    let s = Instances::start("ha-instances-lease").await;
    let receiver_number = s.befriended();
    let first = s.client("receiver", 1);
    let second = s.client("receiver", 2);
    let runtime = first
        .runtimes()
        .register(&RegisterRuntimeRequest {
            name: "split-worker".into(),
            from: StartFrom::Now,
            policy: None,
        })
        .await
        .expect("register the runtime through instance 1");
    s.t.ask(&receiver_number, "one lease, two instances", &[]);
    let claim = first
        .runtimes()
        .claim(runtime.id, &ClaimRequest::default())
        .await
        .expect("claim through instance 1");
    let job = claim.response.jobs.first().expect("a claimed job").clone();
    // Heartbeated and finished through instance 2.
    heartbeat_then_reply(
        &second,
        runtime.id,
        &job,
        (1, LEASE_MS),
        "finished elsewhere",
    )
    .await;
    let lease = lease_of(&job);
    // The lease is spent everywhere: instance 1 refuses it too.
    let stale = first
        .runtimes()
        .heartbeat(runtime.id, job.job_id, &lease)
        .await
        .expect_err("a finished lease is not renewed");
    assert_eq!(
        stale.code().map(|c| c.as_str()),
        Some("lease_lost"),
        "{stale:?}"
    );
}

#[derive(diesel::QueryableByName)]
struct ReplyCount {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    replies: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    answered: i64,
}

/// Replies to `questions` in the database: (all of them, distinct questions answered).
async fn replies_to(database_url: &str, questions: &[uuid::Uuid]) -> (i64, i64) {
    use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
    let mut conn = AsyncPgConnection::establish(database_url)
        .await
        .expect("connect to the test database");
    let row: ReplyCount = diesel::sql_query(
        "SELECT count(*) AS replies, count(DISTINCT reply_to) AS answered \
         FROM messages WHERE reply_to = ANY($1)",
    )
    .bind::<diesel::sql_types::Array<diesel::sql_types::Uuid>, _>(questions)
    .get_result(&mut conn)
    .await
    .expect("count replies");
    (row.replies, row.answered)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn killing_one_instance_mid_run_loses_no_question() {
    const QUESTIONS: usize = 12;
    let mut s = Instances::start("ha-instances-kill").await;
    let receiver_number = s.befriended();
    // Two workers of one runtime, each through its own instance; the
    // questions go through instance 0.
    s.move_profile("receiver", 1);
    let mut doomed = s.t.spawn(&uppercase_worker(), &[]);
    doomed.wait_event("started");
    s.move_profile("receiver", 2);
    let mut survivor = s.t.spawn(&uppercase_worker(), &[]);
    survivor.wait_event("started");
    let mut questions = Vec::new();
    for n in 0..QUESTIONS {
        let sent = s.t.json(&[
            "--profile",
            "sender",
            "send",
            &receiver_number,
            &format!("question {n}"),
            "--ask",
        ]);
        questions.push(text(&sent["messageId"]).parse().expect("message id"));
        if n == QUESTIONS / 3 {
            // Mid-run: instance 1 dies with whatever it was doing.
            let killed = s.more.remove(0);
            killed.stop_with("KILL").expect("kill instance 1");
        }
    }
    // The survivor answers everything left, the doomed worker's leases
    // included once they expire; the database is the judge.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let (replies, answered) = loop {
        let counts = replies_to(s.t.database_url(), &questions).await;
        if counts.1 == i64::try_from(QUESTIONS).unwrap() || std::time::Instant::now() > deadline {
            break counts;
        }
        // Replies are rows, with no signal to wait on from outside the server.
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert_eq!(
        answered,
        i64::try_from(QUESTIONS).unwrap(),
        "every question answered"
    );
    assert_eq!(
        replies,
        i64::try_from(QUESTIONS).unwrap(),
        "none answered twice"
    );
    survivor.signal("INT");
    doomed.signal("INT");
}
