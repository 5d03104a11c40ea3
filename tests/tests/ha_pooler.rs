//! Behind a transaction-pooling PgBouncer the server keeps LISTEN on a
//! direct session connection of its own (`--listen-database-url`); through
//! a real PgBouncer (Debian's, 1.18) in session pooling a question is
//! answered and the worker woken; through PgBouncer 1.24 (built by
//! `scripts/build-pgbouncer`) in transaction pooling with
//! `max_prepared_statements`, fewer server connections than the server's
//! pool serve askers, a worker and a lease's claim, heartbeat and finish.

use crate::cli_support;

use std::time::{Duration, Instant};

use cli_support::{Befriended, CliTest, ServerSettings, heartbeat_then_reply};
use diesel_async::SimpleAsyncConnection;
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use relayger_core::wire::{ClaimRequest, RegisterRuntimeRequest, StartFrom};
use relayger_testdb::assert_session_limits_from;
use relayger_tests::ServerProcess;
use relayger_tests::pgbouncer::{PgBouncer, Settings, built_binary};
use relayger_worker::{Client, ProfileDir};
use serde_json::Value;

#[derive(diesel::QueryableByName)]
struct Backend {
    #[diesel(sql_type = diesel::sql_types::Text)]
    application_name: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    query: String,
}

/// Whether a session's last statement is the listener's: its LISTENs or
/// its presence ping (sent as soon as it has subscribed, then every 10 s).
fn listener_statement(query: &str) -> bool {
    query.starts_with("LISTEN") || query == "SELECT pg_notify($1, $2) AS ping"
}

fn with_application_name(url: &str, name: &str) -> String {
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}application_name={name}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listen_runs_on_the_listen_database_url_and_requests_on_the_pool_url() {
    let t = CliTest::start("ha-pooler-listen").await;
    let pool_url = with_application_name(t.database_url(), "relayger_pool");
    let listen_url = with_application_name(t.database_url(), "relayger_listen");
    let _server = ServerProcess::start(
        t.cwd(),
        &[
            "--listen",
            "127.0.0.1:0",
            "--database-url",
            &pool_url,
            "--listen-database-url",
            &listen_url,
        ],
    )
    .expect("start relayger-server with --listen-database-url");
    let mut conn = AsyncPgConnection::establish(t.database_url())
        .await
        .expect("connect to the test database");
    // The listener connects in the background; pg_stat_activity has no
    // change signal, so look until a bounded deadline.
    let deadline = Instant::now() + Duration::from_secs(30);
    let backends = loop {
        let backends: Vec<Backend> = diesel::sql_query(
            "SELECT application_name, query FROM pg_stat_activity \
             WHERE application_name IN ('relayger_pool', 'relayger_listen')",
        )
        .load(&mut conn)
        .await
        .expect("pg_stat_activity");
        let listening = backends
            .iter()
            .any(|b| b.application_name == "relayger_listen" && listener_statement(&b.query));
        if listening || Instant::now() > deadline {
            break backends;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let listen: Vec<&Backend> = backends
        .iter()
        .filter(|b| b.application_name == "relayger_listen")
        .collect();
    assert_eq!(listen.len(), 1, "one LISTEN session on the listen URL");
    assert!(listener_statement(&listen[0].query), "{}", listen[0].query);
    assert!(
        backends
            .iter()
            .filter(|b| b.application_name == "relayger_pool")
            .all(|b| !listener_statement(&b.query)),
        "no LISTEN through the pool's URL"
    );
    assert!(
        backends
            .iter()
            .any(|b| b.application_name == "relayger_pool"),
        "requests use the pool's URL"
    );
}

#[test]
fn a_listen_database_url_without_a_database_url_is_refused() {
    let dir = relayger_tests::temp_dir("ha-pooler-refused").expect("temp dir");
    let output = relayger_tests::run_server_command(
        &dir,
        &[
            "--listen-database-url",
            "postgres://127.0.0.1:1/x",
            "migrate",
        ],
    )
    .expect("run relayger-server");
    assert!(!output.status.success(), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--database-url"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `relayger-server` arguments: requests through `bouncer`, LISTEN (and
/// migrations) on `direct`, then `more`.
fn behind<'a>(bouncer: &'a PgBouncer, direct: &'a str, more: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "--listen",
        "127.0.0.1:0",
        "--database-url",
        bouncer.url(),
        "--listen-database-url",
        direct,
    ];
    args.extend_from_slice(more);
    args
}

/// A sender and a receiver who are contacts, both then talking only to
/// `server` (the one behind PgBouncer); the receiver's number.
fn befriended_behind(t: &CliTest, server: &str) -> String {
    let Befriended {
        receiver_number, ..
    } = t.befriended_pair(true);
    point_profile(t, "sender", server);
    point_profile(t, "receiver", server);
    receiver_number
}

/// `relayger worker run` of runtime `pooled-worker` as profile `receiver`.
const POOLED_WORKER: [&str; 10] = [
    "--profile",
    "receiver",
    "--json",
    "worker",
    "run",
    "pooled-worker",
    "--builtin",
    "uppercase",
    "--from",
    "now",
];

/// Points profile `name` of the CLI test's home at `server`.
fn point_profile(t: &CliTest, name: &str, server: &str) {
    let dir = ProfileDir::at(t.cli.home());
    let mut profile = ProfileDir::load(&dir, name).expect("load profile");
    profile.server = server.to_owned();
    let json = serde_json::to_vec_pretty(&profile).expect("profile JSON");
    std::fs::write(dir.file(name).expect("profile file"), json).expect("write profile");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn through_pgbouncer_in_session_pooling_a_waiting_worker_is_woken_and_the_question_answered()
{
    let t = CliTest::start("ha-pooler-bouncer").await;
    let bouncer = PgBouncer::start(t.database_url(), "session").expect("start pgbouncer");
    let server = ServerProcess::start(t.cwd(), &behind(&bouncer, t.database_url(), &[]))
        .expect("start relayger-server through pgbouncer");
    let receiver_number = befriended_behind(&t, server.base_url());
    let mut worker = t.spawn(&POOLED_WORKER, &[]);
    worker.wait_event("started");
    let reply = t.ask_and_wait(&receiver_number, "hello through pgbouncer", &["20"]);
    assert_eq!(reply["text"], "HELLO THROUGH PGBOUNCER");
    assert_eq!(reply["byRuntime"], true);
    let replied = worker.wait_event("replied");
    assert!(replied.is_object(), "{replied}");
    worker.signal("INT");
    // The requests really went through PgBouncer: it logged the server's
    // logins and opened server connections for them.
    let log = bouncer.log();
    assert!(log.contains("login attempt"), "{log}");
    assert!(log.contains("new connection to server"), "{log}");
}

/// PgBouncer's server connections in the transaction-pooling test: fewer
/// than the server's pool (`--pool-size`), so clients share them.
const BOUNCER_SERVER_CONNECTIONS: u32 = 2;
const SERVER_POOL_SIZE: &str = "8";
const ASKERS: usize = 6;
const LEASE_MS: u64 = 3000;

#[derive(diesel::QueryableByName)]
struct Pid {
    #[diesel(sql_type = diesel::sql_types::Integer)]
    pid: i32,
}

fn number(row: &std::collections::HashMap<String, String>, column: &str) -> u64 {
    row.get(column)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{column} in {row:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn through_pgbouncer_in_transaction_pooling_askers_workers_and_leases_share_few_server_connections()
 {
    let t = CliTest::start_with(
        "ha-pooler-transaction",
        ServerSettings {
            lease_ms: Some(LEASE_MS),
            log_requests: false,
        },
    )
    .await;
    // The store's session limits on every server connection, as `ALTER
    // ROLE … SET` gives them (here the test database's own settings).
    t.database().set_session_limits().await;
    let bouncer = PgBouncer::start_with(
        t.database_url(),
        &Settings {
            binary: Some(built_binary().expect("PgBouncer 1.24")),
            pool_mode: "transaction".into(),
            default_pool_size: BOUNCER_SERVER_CONNECTIONS,
            max_prepared_statements: Some(200),
        },
    )
    .expect("start pgbouncer 1.24");
    let log_path = t.cwd().join("pooled-server.log");
    let log_file = std::fs::File::create(&log_path).expect("server log");
    let lease = LEASE_MS.to_string();
    let server = ServerProcess::start_with(
        t.cwd(),
        &behind(
            &bouncer,
            t.database_url(),
            &["--pool-size", SERVER_POOL_SIZE, "--lease-ms", &lease],
        ),
        &[],
        std::process::Stdio::from(log_file),
    )
    .expect("start relayger-server through pgbouncer");
    let receiver_number = befriended_behind(&t, server.base_url());

    // A lease by hand: claimed, heartbeated and finished through PgBouncer.
    let client = {
        let dir = ProfileDir::at(t.cli.home());
        Client::for_profile(&ProfileDir::load(&dir, "receiver").expect("profile")).expect("client")
    };
    let runtime = client
        .runtimes()
        .register(&RegisterRuntimeRequest {
            name: "manual".into(),
            from: StartFrom::Now,
            policy: None,
        })
        .await
        .expect("register a runtime through pgbouncer");
    t.ask(&receiver_number, "one lease through the pooler", &[]);
    let claim = client
        .runtimes()
        .claim(runtime.id, &ClaimRequest::default())
        .await
        .expect("claim through pgbouncer");
    // `<[_]>::first`: diesel's `RunQueryDsl::first` is in scope too.
    let job = <[_]>::first(&claim.response.jobs)
        .expect("a claimed job")
        .clone();
    heartbeat_then_reply(
        &client,
        runtime.id,
        &job,
        (3, LEASE_MS),
        "finished through the pooler",
    )
    .await;

    // A worker answers several askers at once; each is woken by its reply.
    let mut worker = t.spawn(&POOLED_WORKER, &[]);
    worker.wait_event("started");
    let askers: Vec<_> = (0..ASKERS)
        .map(|n| {
            let question = format!("question {n} through the pooler");
            t.spawn(
                &[
                    "--profile",
                    "sender",
                    "--json",
                    "send",
                    &receiver_number,
                    &question,
                    "--ask",
                    "--wait",
                    "30",
                ],
                &[],
            )
        })
        .collect();
    for (n, asker) in askers.into_iter().enumerate() {
        let exit = asker.wait_exit(Duration::from_secs(60));
        assert_eq!(exit.code, Some(0), "asker {n}: {exit:?}");
        // The reply is one pretty-printed JSON document, line by line.
        let printed: Vec<String> = exit
            .events
            .iter()
            .map(|line| match line {
                Value::String(line) => line.clone(),
                other => other.to_string(),
            })
            .collect();
        let reply: Value = serde_json::from_str(&printed.join("\n")).expect("reply JSON");
        assert_eq!(
            reply["text"],
            format!("QUESTION {n} THROUGH THE POOLER"),
            "{reply}"
        );
        assert_eq!(reply["byRuntime"], true, "{reply}");
    }
    for _ in 0..ASKERS {
        worker.wait_event("replied");
    }
    worker.signal("INT");

    // PgBouncer pooled transactions: its pool runs in transaction mode,
    // more clients (the server's pooled connections) than server
    // connections, each server connection handed out many times, and the
    // protocol-level prepared statements tracked.
    let database = t
        .database_url()
        .rsplit('/')
        .next()
        .and_then(|rest| rest.split('?').next())
        .expect("database name")
        .to_owned();
    let ours = |rows: Vec<std::collections::HashMap<String, String>>| -> Vec<_> {
        rows.into_iter()
            .filter(|row| row.get("database") == Some(&database))
            .collect()
    };
    let pools = ours(bouncer.show("SHOW POOLS").expect("SHOW POOLS"));
    assert_eq!(pools.len(), 1, "{pools:?}");
    assert_eq!(pools[0]["pool_mode"], "transaction", "{pools:?}");
    let servers = ours(bouncer.show("SHOW SERVERS").expect("SHOW SERVERS"));
    let clients = ours(bouncer.show("SHOW CLIENTS").expect("SHOW CLIENTS"));
    let stats = ours(bouncer.show("SHOW STATS").expect("SHOW STATS"));
    assert_eq!(stats.len(), 1, "{stats:?}");
    let stats = &stats[0];
    let assignments = number(stats, "total_server_assignment_count");
    let transactions = number(stats, "total_xact_count");
    let client_parses = number(stats, "total_client_parse_count");
    let server_parses = number(stats, "total_server_parse_count");
    let binds = number(stats, "total_bind_count");
    eprintln!(
        "pgbouncer: {} clients, {} server connections (pool {BOUNCER_SERVER_CONNECTIONS}), \
         {transactions} transactions, {assignments} server assignments, \
         {client_parses} client parses, {server_parses} server parses, {binds} binds",
        clients.len(),
        servers.len(),
    );
    assert!(
        !servers.is_empty() && servers.len() <= BOUNCER_SERVER_CONNECTIONS as usize,
        "{servers:?}"
    );
    assert!(
        clients.len() > servers.len(),
        "clients share server connections: {} clients, {} servers",
        clients.len(),
        servers.len()
    );
    assert!(
        assignments > clients.len() as u64 * 10,
        "server connections handed out per transaction: {assignments}"
    );
    assert!(client_parses > 0 && binds > client_parses, "{stats:?}");
    drop(server);
    // Both server connections run under the store's limits, from the
    // database, none set on the session through PgBouncer. Two open
    // transactions hold both.
    let mut held = Vec::new();
    let mut backends = std::collections::BTreeSet::new();
    for _ in 0..BOUNCER_SERVER_CONNECTIONS {
        let mut conn = AsyncPgConnection::establish(bouncer.url())
            .await
            .expect("connect through pgbouncer");
        conn.batch_execute("BEGIN").await.expect("begin");
        let pid: Pid = diesel::sql_query("SELECT pg_backend_pid() AS pid")
            .get_result(&mut conn)
            .await
            .expect("pg_backend_pid");
        backends.insert(pid.pid);
        assert_session_limits_from(&mut conn, "database").await;
        held.push(conn);
    }
    assert_eq!(
        backends.len(),
        BOUNCER_SERVER_CONNECTIONS as usize,
        "{backends:?}"
    );
    drop(held);
    let server_log = std::fs::read_to_string(&log_path).expect("server log");
    // The server's access log has the requests above, none answered 5xx.
    assert!(
        server_log.contains("/heartbeat\" status=200"),
        "{server_log}"
    );
    assert!(!server_log.contains(" status=5"), "{server_log}");
    let bouncer_log = bouncer.log();
    for log in [&server_log, &bouncer_log] {
        assert!(!log.contains("prepared statement"), "{log}");
        assert!(!log.contains("does not exist"), "{log}");
    }
}
