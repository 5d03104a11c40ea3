//! The runtime under faults, over real HTTP and PostgreSQL: lost responses
//! and retried finishes, finishes that wait on locks past their lease,
//! concurrent writers of one room, clients that vanish mid-request, and a
//! LISTEN connection that dies.

use crate::common;

use std::time::{Duration, Instant};

use common::{Reply, TestServer, User, next_frame};
use diesel::QueryableByName;
use diesel::sql_types::Bool;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use relayger_store::listen::ListenOptions;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

/// A person and an agent who are contacts, and the agent's runtime.
struct Bot {
    base: common::bot::Bot,
    asker: User,
    room: String,
    runtime: String,
}

impl Bot {
    /// `GET path` as the agent, expecting success.
    async fn agent_get(&self, path: &str) -> Value {
        self.base
            .server
            .get(path, &self.base.agent.token)
            .await
            .ok()
    }

    async fn start(policy: Value) -> Bot {
        Bot::on(TestServer::start().await, policy).await
    }

    async fn on(server: TestServer, policy: Value) -> Bot {
        let base = common::bot::Bot::on(server).await;
        let (asker, room) = base.contact("asker").await;
        let runtime = base.runtime("faults", "now", policy).await;
        Bot {
            base,
            asker,
            room,
            runtime,
        }
    }

    async fn ask(&self, text: &str) -> String {
        self.base.ask(&self.asker, &self.room, text).await
    }

    /// One claim for at most one job: the response body.
    async fn claim(&self) -> Value {
        self.base.claim(&self.runtime, 1).await.ok()
    }

    async fn claim_one(&self) -> Value {
        let body = self.claim().await;
        assert_eq!(body["jobs"].as_array().expect("jobs").len(), 1, "{body}");
        body["jobs"][0].clone()
    }

    /// Claims one job, waiting out a retry backoff (bounded).
    async fn claim_after_backoff(&self) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let body = self.claim().await;
            if let Some(job) = body["jobs"]
                .as_array()
                .and_then(|jobs| <[Value]>::first(jobs))
            {
                return job.clone();
            }
            assert!(Instant::now() < deadline, "nothing to claim: {body}");
            // The backoff is a time, not an event: wait a little of it out.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn finish_path(&self, job: &Value) -> String {
        format!(
            "/v1/runtimes/{}/jobs/{}/finish",
            self.runtime,
            job["jobId"].as_str().expect("job id")
        )
    }

    fn finish_body(job: &Value, result: Value) -> Value {
        json!({"owner": job["owner"], "version": job["version"], "result": result})
    }

    /// A finish sent on its own task: its status and body once answered.
    fn spawn_finish(&self, job: &Value, result: Value) -> tokio::task::JoinHandle<(u16, Value)> {
        let request = reqwest::Client::new()
            .post(format!(
                "{}{}",
                self.base.server.base_url,
                self.finish_path(job)
            ))
            .bearer_auth(&self.base.agent.token)
            .json(&Bot::finish_body(job, result));
        tokio::spawn(async move {
            let response = request.send().await.expect("finish answered");
            let status = response.status().as_u16();
            (status, response.json().await.expect("a JSON body"))
        })
    }

    async fn finish(&self, job: &Value, result: Value) -> Reply {
        self.base
            .server
            .post(
                &self.finish_path(job),
                &self.base.agent.token,
                Bot::finish_body(job, result),
            )
            .await
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_retried_error_finish_returns_the_original_failed_or_dead_letter_outcome() {
    let bot = Bot::start(json!({"maxAttempts": 2})).await;
    bot.ask("this fails").await;
    let first = bot.claim_one().await;
    let error = json!({"error": "model_unavailable", "usage": {"modelCalls": 1, "inputTokens": 3, "outputTokens": 0}});
    let failed = bot.finish(&first, error.clone()).await.ok();
    assert_eq!(failed["outcome"], "failed");
    assert!(failed["retryAt"].is_string(), "{failed}");
    // The first response was lost: the worker sends the same finish again.
    for _ in 0..3 {
        assert_eq!(bot.finish(&first, error.clone()).await.ok(), failed);
    }
    bot.finish(&first, json!({"error": "something else"}))
        .await
        .err(409, "fingerprint_mismatch");
    bot.finish(&first, json!({"reply": "too late"}))
        .await
        .err(409, "fingerprint_mismatch");

    // The last attempt dead-letters; its retry says so again.
    let second = bot.claim_after_backoff().await;
    assert_eq!(second["attempt"], 2);
    let dead = bot
        .finish(&second, json!({"error": "model_unavailable"}))
        .await
        .ok();
    assert_eq!(dead["outcome"], "dead_letter");
    assert_eq!(
        bot.finish(&second, json!({"error": "model_unavailable"}))
            .await
            .ok(),
        dead
    );
    // The first attempt's retry still gets its own answer, not the job's.
    assert_eq!(bot.finish(&first, error).await.ok(), failed);
    let stats = bot
        .agent_get(&format!("/v1/runtimes/{}/stats", bot.runtime))
        .await;
    assert_eq!(stats["attempts"], 2, "retries are not new attempts");
    assert_eq!(stats["jobs"]["dead"], 1);
}

/// A second, raw connection to the server's database (locks held by a test).
async fn execute(conn: &mut AsyncPgConnection, sql: &str) {
    diesel::sql_query(sql)
        .execute(conn)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

#[derive(QueryableByName)]
struct Flag {
    #[diesel(sql_type = Bool)]
    flag: bool,
}

async fn query_flag(conn: &mut AsyncPgConnection, sql: &str) -> bool {
    let row: Flag = diesel::sql_query(sql)
        .get_result(conn)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    row.flag
}

/// Waits (bounded) until `sql`, a boolean query named `flag`, holds.
async fn wait_for(conn: &mut AsyncPgConnection, what: &str, sql: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !query_flag(conn, sql).await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Some other backend of this database waits on a lock.
const SOMEONE_WAITS_ON_A_LOCK: &str = "SELECT EXISTS (SELECT 1 FROM pg_stat_activity \
     WHERE datname = current_database() AND pid <> pg_backend_pid() \
     AND wait_event_type = 'Lock') AS flag";

/// A raw connection that has seen another backend wait on a lock (`what`
/// names the wait, for the timeout's message).
async fn watch_until_someone_waits(server: &TestServer, what: &str) -> AsyncPgConnection {
    let mut watcher = server.raw_connection().await;
    wait_for(&mut watcher, what, SOMEONE_WAITS_ON_A_LOCK).await;
    watcher
}

/// No backend of this database waits on a lock.
const NOBODY_WAITS_ON_A_LOCK: &str = "SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity \
     WHERE datname = current_database() AND pid <> pg_backend_pid() \
     AND wait_event_type = 'Lock') AS flag";

#[tokio::test(flavor = "multi_thread")]
async fn a_finish_that_waited_on_the_job_lock_past_its_lease_is_refused() {
    let bot = Bot::on(TestServer::start_with_lease(1000).await, json!({})).await;
    bot.ask("slow lock").await;
    let job = bot.claim_one().await;
    let job_id = job["jobId"].as_str().expect("job id").to_owned();

    let mut holder = bot
        .base
        .server
        .hold_lock(&format!(
            "SELECT id FROM jobs WHERE id = '{job_id}' FOR UPDATE"
        ))
        .await;
    let finish = bot.spawn_finish(&job, json!({"reply": "late"}));
    let mut watcher =
        watch_until_someone_waits(&bot.base.server, "the finish to wait on the job lock").await;
    // The finish began well inside its lease; the lease now runs out while
    // it waits.
    wait_for(
        &mut watcher,
        "the lease to expire",
        &format!(
            "SELECT lease_expires_at < clock_timestamp() AS flag FROM jobs WHERE id = '{job_id}'"
        ),
    )
    .await;
    execute(&mut holder, "COMMIT").await;

    let (status, body) = finish.await.expect("join");
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "lease_lost", "{body}");
    assert_eq!(bot.base.server.count("messages WHERE by_runtime").await, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reply_and_a_note_with_the_same_key_do_not_deadlock() {
    let bot = Bot::start(json!({})).await;
    let question = bot.ask("remember").await;
    let job = bot.claim_one().await;

    // Stall the reply after it holds the room lock: its message refers to
    // the question, whose row is locked here (the foreign key waits).
    let mut holder = bot
        .base
        .server
        .hold_lock(&format!(
            "SELECT id FROM messages WHERE id = '{question}' FOR UPDATE"
        ))
        .await;
    let note = json!({"key": "decision", "text": "from the reply", "version": 0, "sourceMessageIds": [question]});
    let finish = bot.spawn_finish(&job, json!({"reply": "noted", "note": note}));
    let _watcher =
        watch_until_someone_waits(&bot.base.server, "the reply to wait with the room locked").await;

    // The operator writes the same note meanwhile: it must not wait for the
    // reply's room lock (a note only references the room).
    let put = tokio::time::timeout(
        Duration::from_secs(5),
        bot.base.server.request(
            reqwest::Method::PUT,
            &format!("/v1/runtimes/{}/notes/{}/decision", bot.runtime, bot.room),
            Some(&bot.base.agent.token),
            Some(json!({"text": "from the operator", "version": 0, "sourceMessageIds": []})),
        ),
    )
    .await
    .expect("the note waited on the reply's room lock");
    assert_eq!(put.ok()["version"], 1);

    execute(&mut holder, "COMMIT").await;
    let (status, body) = finish.await.expect("join");
    assert_eq!(status, 409, "{body}");
    assert_eq!(
        body["error"]["code"], "version_conflict",
        "the note exists now; the whole finish rolled back"
    );
    let retried = bot
        .finish(
            &job,
            json!({"reply": "noted", "note": {"key": "decision", "text": "from the reply", "version": 1, "sourceMessageIds": [question]}}),
        )
        .await
        .ok();
    assert_eq!(retried["outcome"], "replied");
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_note_creates_at_sixty_three_leave_exactly_sixty_four() {
    let bot = Bot::start(json!({})).await;
    let bot = std::sync::Arc::new(bot);
    let put = |bot: std::sync::Arc<Bot>, key: String| async move {
        bot.base
            .server
            .request(
                reqwest::Method::PUT,
                &format!("/v1/runtimes/{}/notes/{}/{key}", bot.runtime, bot.room),
                Some(&bot.base.agent.token),
                Some(json!({"text": key, "version": 0, "sourceMessageIds": []})),
            )
            .await
    };
    for i in 0..63 {
        put(bot.clone(), format!("n{i}")).await.ok();
    }

    // Hold the room so that every create has counted and inserted before
    // any of them can commit (a note's foreign key waits on the room).
    let mut holder = bot
        .base
        .server
        .hold_lock(&format!(
            "SELECT id FROM rooms WHERE id = '{}' FOR UPDATE",
            bot.room
        ))
        .await;
    let racers: Vec<_> = (0..8)
        .map(|i| tokio::spawn(put(bot.clone(), format!("race{i}"))))
        .collect();
    let mut watcher = bot.base.server.raw_connection().await;
    wait_for(
        &mut watcher,
        "all eight creates to wait",
        "SELECT count(*) = 8 AS flag FROM pg_stat_activity \
         WHERE datname = current_database() AND wait_event_type = 'Lock'",
    )
    .await;
    execute(&mut holder, "COMMIT").await;

    let mut created = 0;
    for racer in racers {
        let reply = racer.await.expect("join");
        if reply.status.is_success() {
            created += 1;
        } else {
            reply.err(400, "invalid_argument");
        }
    }
    assert_eq!(created, 1, "one create fits under the cap");
    assert_eq!(bot.base.server.count("notes").await, 64);
}

/// Writes one HTTP request on a raw socket and resets the connection (RST,
/// SO_LINGER 0) once the request's transaction waits on the lock that
/// a second connection takes with `lock_sql`; then waits until the database gave up the
/// vanished request's work, and lets go of the lock.
async fn vanish_mid_transaction(bot: &Bot, lock_sql: &str, path: &str, body: Value) {
    let mut holder = bot.base.server.hold_lock(lock_sql).await;
    let address = bot.base.server.base_url.trim_start_matches("http://");
    let mut socket = tokio::net::TcpStream::connect(address)
        .await
        .expect("connect");
    let body = body.to_string();
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        bot.base.agent.token,
        body.len()
    );
    socket
        .write_all(request.as_bytes())
        .await
        .expect("write the request");
    let what = format!("{path} to wait on the lock");
    let mut watcher = watch_until_someone_waits(&bot.base.server, &what).await;
    // A zero linger never blocks on drop (the deprecation is about a
    // non-zero one): the close sends RST, as a crashed client's would.
    #[allow(deprecated)]
    socket.set_linger(Some(Duration::ZERO)).expect("SO_LINGER");
    drop(socket);
    // The request is gone: its transaction must not wait on, nor later hold,
    // anything (today's failure: it holds its locks, idle in transaction).
    wait_for(
        &mut watcher,
        &format!("the vanished {path} to stop waiting"),
        NOBODY_WAITS_ON_A_LOCK,
    )
    .await;
    execute(&mut holder, "COMMIT").await;
    wait_for(
        &mut watcher,
        "no session idle in transaction",
        "SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity \
         WHERE datname = current_database() AND state LIKE 'idle in transaction%') AS flag",
    )
    .await;
}

/// A send into the bot's room answers within a second.
async fn send_commits_at_once(bot: &Bot, text: &str) {
    let sent = tokio::time::timeout(
        Duration::from_secs(1),
        bot.base.server.post(
            "/v1/messages",
            &bot.asker.token,
            json!({"roomId": bot.room, "text": text}),
        ),
    )
    .await
    .expect("a send into the room waited");
    sent.ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn claims_finishes_and_sends_whose_client_resets_leave_no_transaction_holding_locks() {
    let bot = Bot::start(json!({})).await;

    // A send that vanishes while it waits for the room.
    vanish_mid_transaction(
        &bot,
        &format!("SELECT id FROM rooms WHERE id = '{}' FOR UPDATE", bot.room),
        "/v1/messages",
        json!({"roomId": bot.room, "text": "vanishing"}),
    )
    .await;
    send_commits_at_once(&bot, "after the send").await;

    // A claim that vanishes while it waits for its runtime.
    bot.ask("a question").await;
    vanish_mid_transaction(
        &bot,
        &format!(
            "SELECT id FROM runtimes WHERE id = '{}' FOR UPDATE",
            bot.runtime
        ),
        &format!("/v1/runtimes/{}/claim", bot.runtime),
        json!({"maxJobs": 1}),
    )
    .await;
    send_commits_at_once(&bot, "after the claim").await;
    let job = bot.claim_one().await;
    assert_eq!(job["attempt"], 1, "the vanished claim granted nothing");

    // A finish that vanishes while it waits for its job.
    vanish_mid_transaction(
        &bot,
        &format!(
            "SELECT id FROM jobs WHERE id = '{}' FOR UPDATE",
            job["jobId"].as_str().expect("job id")
        ),
        &bot.finish_path(&job),
        Bot::finish_body(&job, json!({"reply": "vanished"})),
    )
    .await;
    send_commits_at_once(&bot, "after the finish").await;
    let done = bot.finish(&job, json!({"reply": "answered"})).await.ok();
    assert_eq!(done["outcome"], "replied", "the job was still claimed");
}

/// The backend of the server's LISTEN connection (its last statement was a
/// LISTEN or a ping), once there is exactly one.
async fn listen_backend(watcher: &mut AsyncPgConnection) -> i32 {
    #[derive(QueryableByName)]
    struct Pid {
        #[diesel(sql_type = diesel::sql_types::Integer)]
        pid: i32,
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let rows: Vec<Pid> = diesel::sql_query(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() \
             AND (query LIKE 'LISTEN %' OR query LIKE 'NOTIFY relayger_ping_%')",
        )
        .load(watcher)
        .await
        .expect("pg_stat_activity");
        if let [row] = rows.as_slice() {
            return row.pid;
        }
        assert!(Instant::now() < deadline, "no single LISTEN backend");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn signal(pid: i32, signal: &str) {
    let status = std::process::Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill {signal} {pid}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dead_or_hung_listen_connection_is_replaced_and_every_socket_woken() {
    const WAIT: Duration = Duration::from_secs(10);
    let server = TestServer::start_config(relayger_api::ApiConfig {
        listen: ListenOptions {
            ping_every: Duration::from_millis(200),
            ping_timeout: Duration::from_millis(500),
        },
        ..relayger_api::ApiConfig::default()
    })
    .await;
    let (alice, bob, _) = server
        .befriended_pair(("alice", "agent"), ("bob", "agent"))
        .await;
    let mut socket = server
        .ws_connect("/v1/socket", Some(&bob.token))
        .await
        .expect("socket");
    let mut watcher = server.raw_connection().await;
    let woken = async |socket: &mut common::WsStream, why: &str| {
        let frame = next_frame(socket, WAIT)
            .await
            .unwrap_or_else(|| panic!("no signal {why}"));
        assert_eq!(frame, r#"{"event":"inbox_changed"}"#, "{why}");
    };

    // Killed: the listener reconnects and wakes everyone.
    let killed = listen_backend(&mut watcher).await;
    execute(
        &mut watcher,
        &format!("SELECT pg_terminate_backend({killed})"),
    )
    .await;
    woken(&mut socket, "after the LISTEN backend was killed").await;
    // Signals still on their way (the befriending's) are not the ones the
    // next step waits for: let them arrive and drop them.
    while next_frame(&mut socket, Duration::from_millis(500))
        .await
        .is_some()
    {}

    // Hung (stopped, as a half-open connection looks): nothing arrives on
    // it, not even its own NOTIFY; the check replaces it.
    let hung = listen_backend(&mut watcher).await;
    assert_ne!(hung, killed);
    signal(hung, "-STOP");
    let frame = next_frame(&mut socket, WAIT).await;
    signal(hung, "-CONT");
    assert_eq!(
        frame.as_deref(),
        Some(r#"{"event":"inbox_changed"}"#),
        "no signal after the LISTEN backend hung"
    );
    server
        .send(&alice, json!({"to": bob.number, "text": "still there?"}))
        .await;
    woken(&mut socket, "for a message after the reconnect").await;
}

/// The agent's unacknowledged messages (its mailbox) in the bot's room.
async fn agent_inbox(bot: &Bot) -> Vec<String> {
    let inbox = bot.agent_get("/v1/inbox").await;
    inbox["rooms"]
        .as_array()
        .expect("rooms")
        .iter()
        .filter(|room| room["roomId"] == bot.room.as_str())
        .flat_map(|room| room["messages"].as_array().expect("messages").clone())
        .map(|m| m["messageId"].as_str().expect("id").to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_mailbox_ack_and_runtime_handling_never_move_each_other() {
    let bot = Bot::start(json!({})).await;
    let first = bot.ask("first").await;
    let second = bot.ask("second").await;
    assert_eq!(agent_inbox(&bot).await, [first.clone(), second.clone()]);

    // Acknowledging both in the mailbox leaves both jobs to the runtime.
    let inbox = bot.agent_get("/v1/inbox").await;
    let last_seq = inbox["rooms"][0]["lastSeq"].clone();
    let acked = bot
        .base
        .server
        .post(
            &format!("/v1/rooms/{}/ack", bot.room),
            &bot.base.agent.token,
            json!({"seq": last_seq}),
        )
        .await
        .ok();
    assert_eq!(acked["ackedSeq"], last_seq);
    assert!(agent_inbox(&bot).await.is_empty());
    let job = bot.claim_one().await;
    assert_eq!(job["message"]["messageId"], first.as_str(), "{job}");
    bot.finish(&job, json!({"reply": "FIRST"})).await.ok();
    let job = bot.claim_one().await;
    assert_eq!(job["message"]["messageId"], second.as_str());
    bot.finish(&job, json!({"reply": "SECOND"})).await.ok();

    // Handling a job leaves the mailbox alone: a third question, answered by
    // the runtime, is still unacknowledged for the agent.
    let third = bot.ask("third").await;
    let job = bot.claim_one().await;
    assert_eq!(job["message"]["messageId"], third.as_str());
    bot.finish(&job, json!({"reply": "THIRD"})).await.ok();
    assert_eq!(agent_inbox(&bot).await, [third]);
}
