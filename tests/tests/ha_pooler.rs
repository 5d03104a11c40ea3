//! Behind a transaction-pooling PgBouncer the server keeps LISTEN on a
//! direct session connection of its own (`--listen-database-url`); through
//! a real PgBouncer (Debian's, 1.18) in session pooling a question is
//! answered and the worker woken. Transaction pooling needs PgBouncer 1.21's
//! `max_prepared_statements`, which Debian 12 does not have (SCALING.md).

use crate::cli_support;

use std::time::{Duration, Instant};

use cli_support::{Befriended, CliTest};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use relayger_tests::ServerProcess;
use relayger_tests::pgbouncer::PgBouncer;
use relayger_worker::ProfileDir;
use serde_json::Value;

#[derive(diesel::QueryableByName)]
struct Backend {
    #[diesel(sql_type = diesel::sql_types::Text)]
    application_name: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    query: String,
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
            .any(|b| b.application_name == "relayger_listen" && b.query.starts_with("LISTEN"));
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
    assert!(listen[0].query.starts_with("LISTEN"), "{}", listen[0].query);
    assert!(
        backends
            .iter()
            .filter(|b| b.application_name == "relayger_pool")
            .all(|b| !b.query.starts_with("LISTEN")),
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
    let server = ServerProcess::start(
        t.cwd(),
        &[
            "--listen",
            "127.0.0.1:0",
            "--database-url",
            bouncer.url(),
            "--listen-database-url",
            t.database_url(),
        ],
    )
    .expect("start relayger-server through pgbouncer");
    let Befriended {
        receiver_number, ..
    } = t.befriended_pair(true);
    // From here on both talk only to the server behind PgBouncer.
    point_profile(&t, "sender", server.base_url());
    point_profile(&t, "receiver", server.base_url());
    let mut worker = t.spawn(
        &[
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
        ],
        &[],
    );
    worker.wait_event("started");
    let waited = t.run(&[
        "--profile",
        "sender",
        "--json",
        "send",
        &receiver_number,
        "hello through pgbouncer",
        "--ask",
        "--wait",
        "20",
    ]);
    assert!(waited.success(), "{waited:?}");
    let reply: Value = serde_json::from_str(&waited.stdout).expect("reply JSON");
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
