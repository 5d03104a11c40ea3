//! Behind a transaction-pooling PgBouncer the server keeps LISTEN on a
//! direct session connection of its own (`--listen-database-url`).

mod cli_support;

use std::time::{Duration, Instant};

use cli_support::CliTest;
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use relayger_tests::ServerProcess;

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
