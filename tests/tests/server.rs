//! The real `relayger-server` binary: zero-configuration start with its own
//! PostgreSQL, `--database-url`, migrations, health and graceful shutdown.

use diesel::sql_types::{BigInt, Text};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use relayger_store::embedded;
use relayger_testdb::TestDatabase;
use relayger_tests::{ServerProcess, binary, run_server_command, temp_dir, wait_timeout};
use serde_json::Value;

#[derive(diesel::QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

async fn health(base_url: &str) -> (u16, Value) {
    let response = reqwest::get(format!("{base_url}/healthz"))
        .await
        .expect("GET /healthz");
    let status = response.status().as_u16();
    (status, response.json().await.expect("health JSON"))
}

#[tokio::test(flavor = "multi_thread")]
async fn zero_config_server_runs_its_own_postgres_stops_it_and_keeps_the_data() {
    let cwd = temp_dir("zero-config").expect("temp dir");
    let data_dir = cwd.join("relayger-data");

    // No database settings at all: the server initialises ./relayger-data.
    let server = ServerProcess::start(&cwd, &["--listen", "127.0.0.1:0"]).expect("first start");
    let (status, body) = health(server.base_url()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "ok");
    assert_eq!(body["database"]["status"], "ok");
    let migrations = body["database"]["migrations"]
        .as_u64()
        .expect("migration count");
    assert!(migrations >= 1);
    assert!(embedded::is_running(&data_dir).expect("status"));

    // Write a row straight into the server's own database.
    let url = embedded::running_url(&data_dir)
        .expect("read cluster")
        .expect("cluster is running");
    let mut conn = AsyncPgConnection::establish(&url).await.expect("connect");
    diesel::sql_query(
        "INSERT INTO identities (id, number, kind, display_name) \
         VALUES (gen_random_uuid(), '100000777', 'person', 'kept')",
    )
    .execute(&mut conn)
    .await
    .expect("insert");
    drop(conn);

    // Ctrl-C stops the server and the PostgreSQL it started.
    let exit = server.stop_with("INT").expect("stop");
    assert!(exit.success(), "exit status {exit}");
    assert!(
        !embedded::is_running(&data_dir).expect("status"),
        "PostgreSQL still runs"
    );
    assert!(!data_dir.join("postgresql/data/postmaster.pid").exists());

    // A second start reuses the data directory: same schema, same data.
    let server = ServerProcess::start(&cwd, &["--listen", "127.0.0.1:0"]).expect("second start");
    let (status, body) = health(server.base_url()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["database"]["migrations"].as_u64(), Some(migrations));
    let url = embedded::running_url(&data_dir)
        .expect("read")
        .expect("running");
    let mut conn = AsyncPgConnection::establish(&url).await.expect("connect");
    let kept: Count =
        diesel::sql_query("SELECT count(*) AS n FROM identities WHERE display_name = $1")
            .bind::<Text, _>("kept")
            .get_result(&mut conn)
            .await
            .expect("select");
    assert_eq!(
        kept.n, 1,
        "the row written before the restart is still there"
    );
    drop(conn);

    let exit = server.stop_with("TERM").expect("stop");
    assert!(exit.success(), "exit status {exit}");
    assert!(!embedded::is_running(&data_dir).expect("status"));
    std::fs::remove_dir_all(&cwd).expect("cleanup");
}

/// A second server on a data directory in use fails at once with a clear
/// error naming the process that holds it, and exits non-zero; the first
/// keeps serving (issue #38, item 12).
#[tokio::test(flavor = "multi_thread")]
async fn a_second_server_on_a_data_directory_in_use_names_the_process_holding_it() {
    let cwd = temp_dir("data-dir-lock").expect("temp dir");
    let args = ["--listen", "127.0.0.1:0", "--data-dir", "shared-data"];
    let first = ServerProcess::start(&cwd, &args).expect("first start");
    let first_pid = first.pid().expect("running");

    let stderr_path = cwd.join("second.stderr");
    let mut second = std::process::Command::new(binary("relayger-server").expect("binary"));
    second
        .args(args)
        .current_dir(&cwd)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&stderr_path).expect("stderr file"));
    let second = second.spawn().expect("spawn the second server");
    let second_pid = second.id();
    let exit = wait_timeout(second, std::time::Duration::from_secs(60));
    if exit.is_err() {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &second_pid.to_string()])
            .status();
    }
    let stderr = std::fs::read_to_string(&stderr_path).expect("stderr");
    let exit = exit.unwrap_or_else(|e| panic!("the second server kept running: {e}\n{stderr}"));
    assert!(!exit.success(), "the second server succeeded: {stderr}");
    assert!(
        stderr.contains(&format!(
            "the data directory {} is in use by process {first_pid}",
            cwd.join("shared-data").display()
        )),
        "{stderr}"
    );
    assert!(!stderr.contains("initdb"), "{stderr}");

    let (status, body) = health(first.base_url()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["database"]["status"], "ok", "{body}");
    let exit = first.stop_with("TERM").expect("stop");
    assert!(exit.success(), "exit status {exit}");
    std::fs::remove_dir_all(&cwd).expect("cleanup");
}

#[tokio::test(flavor = "multi_thread")]
async fn migrate_command_applies_once_and_serve_uses_the_given_database() {
    let db = TestDatabase::create_empty().await;
    let cwd = temp_dir("database-url").expect("temp dir");

    let first =
        run_server_command(&cwd, &["migrate", "--database-url", db.url()]).expect("migrate");
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let second =
        run_server_command(&cwd, &["migrate", "--database-url", db.url()]).expect("migrate");
    assert!(
        second.status.success(),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );
    let applied = relayger_store::applied_migrations(db.url())
        .await
        .expect("applied");
    assert!(!applied.is_empty());

    let server = ServerProcess::start(
        &cwd,
        &["--listen", "127.0.0.1:0", "--database-url", db.url()],
    )
    .expect("start");
    let (status, body) = health(server.base_url()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["database"]["migrations"].as_u64(),
        Some(applied.len() as u64)
    );
    assert!(
        !cwd.join("relayger-data").exists(),
        "no self-managed cluster with --database-url"
    );

    // Unknown routes answer with the error envelope.
    let response = reqwest::get(format!("{}/no/such/route", server.base_url()))
        .await
        .expect("GET");
    assert_eq!(response.status().as_u16(), 404);
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["error"]["code"], "not_found");

    let exit = server.stop_with("TERM").expect("stop");
    assert!(exit.success(), "exit status {exit}");
    std::fs::remove_dir_all(&cwd).expect("cleanup");
}

#[tokio::test(flavor = "multi_thread")]
async fn health_reports_an_unreachable_database_with_503() {
    let db = TestDatabase::create().await;
    let cwd = temp_dir("degraded").expect("temp dir");
    let server = ServerProcess::start(
        &cwd,
        &["--listen", "127.0.0.1:0", "--database-url", db.url()],
    )
    .expect("start");
    assert_eq!(health(server.base_url()).await.0, 200);

    // Take the database away underneath the running server.
    let mut admin = AsyncPgConnection::establish(&std::env::var("TEST_DATABASE_URL").expect("url"))
        .await
        .expect("admin");
    diesel::sql_query(format!("DROP DATABASE {} WITH (FORCE)", db.name()))
        .execute(&mut admin)
        .await
        .expect("drop");

    let (status, body) = health(server.base_url()).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["status"], "degraded");
    assert_eq!(body["database"]["status"], "unavailable");
    drop(server);
    std::fs::remove_dir_all(&cwd).expect("cleanup");
}

/// As root the self-managed PostgreSQL runs as a dedicated user: `nobody`
/// and `root` are refused before anything is created, as is a user that
/// does not exist. (The zero-configuration test above shows the default,
/// `postgres`, working.)
#[test]
fn the_self_managed_postgres_refuses_nobody_root_and_unknown_users() {
    let uid = std::process::Command::new("id")
        .arg("-u")
        .output()
        .expect("id");
    assert_eq!(
        String::from_utf8_lossy(&uid.stdout).trim(),
        "0",
        "this test checks what the server does as root: run the suite as root"
    );
    let cwd = temp_dir("postgres-user").expect("temp dir");
    for (user, expected) in [
        ("nobody", "not `nobody`"),
        ("root", "not `root`"),
        ("relayger-no-such-user", "does not exist"),
    ] {
        let output =
            run_server_command(&cwd, &["--listen", "127.0.0.1:0", "--postgres-user", user])
                .expect("run");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{user}: the server started");
        assert!(stderr.contains(expected), "{user}: {stderr}");
    }
    assert!(!cwd.join("relayger-data").exists(), "nothing was created");
    std::fs::remove_dir_all(&cwd).expect("cleanup");
}

#[test]
fn bad_arguments_exit_non_zero_with_a_clear_message() {
    let cwd = temp_dir("bad-args").expect("temp dir");
    let cases: &[(&[&str], &str)] = &[
        (
            &[
                "--lease-ms",
                "10",
                "--database-url",
                "postgres://127.0.0.1:1/x",
            ],
            "--lease-ms",
        ),
        (&["--lease-ms", "soon"], "--lease-ms"),
        (
            &["--database-url", "postgres://x/y", "--data-dir", "d"],
            "cannot be used with",
        ),
        (&["frobnicate"], "frobnicate"),
        (
            &["--database-url", "postgres://x/y", "--postgres-user", "pg"],
            "cannot be used with",
        ),
    ];
    for (args, expected) in cases {
        let output = run_server_command(&cwd, args).expect("run");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{args:?} succeeded");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
    assert!(
        !cwd.join("relayger-data").exists(),
        "bad arguments create nothing"
    );
    std::fs::remove_dir_all(&cwd).expect("cleanup");
}

#[tokio::test(flavor = "multi_thread")]
async fn registration_is_closed_off_loopback_and_invites_open_it() {
    let db = TestDatabase::create().await;
    let cwd = temp_dir("registration").expect("temp dir");
    // Listening on every interface: registration is closed by default.
    let server = ServerProcess::start(&cwd, &["--listen", "0.0.0.0:0", "--database-url", db.url()])
        .expect("start");
    let base = server.base_url().replacen("0.0.0.0", "127.0.0.1", 1);
    let http = reqwest::Client::new();
    let body = |invite: Option<&str>| {
        let mut body = serde_json::json!({
            "name": "newcomer",
            "kind": "person",
            "publicKey": "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
        });
        if let Some(code) = invite {
            body["invite"] = serde_json::json!(code);
        }
        body
    };
    let refused = http
        .post(format!("{base}/v1/register"))
        .json(&body(None))
        .send()
        .await
        .expect("register");
    assert_eq!(refused.status().as_u16(), 403);
    let envelope: Value = refused.json().await.expect("json");
    assert_eq!(envelope["error"]["code"], "registration_closed");

    // `relayger-server invites create` prints a single-use code.
    let output = run_server_command(&cwd, &["invites", "create", "--database-url", db.url()])
        .expect("invite");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let code = String::from_utf8(output.stdout)
        .expect("utf8")
        .trim()
        .to_owned();
    assert!(code.starts_with("inv_"), "{code}");
    let accepted = http
        .post(format!("{base}/v1/register"))
        .json(&body(Some(&code)))
        .send()
        .await
        .expect("register");
    assert_eq!(accepted.status().as_u16(), 201);
    let reused = http
        .post(format!("{base}/v1/register"))
        .json(&body(Some(&code)))
        .send()
        .await
        .expect("register");
    assert_eq!(reused.status().as_u16(), 403, "an invite is single-use");
    drop(server);
    std::fs::remove_dir_all(&cwd).expect("cleanup");
}
