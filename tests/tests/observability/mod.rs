//! What an operator sees of a running server: the access log (text and
//! `--log-format json`) and request ids here; Prometheus metrics on
//! `--metrics-listen` in [`metrics`].

mod metrics;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use relayger_testdb::TestDatabase;
use relayger_tests::{ServerProcess, temp_dir};
use serde_json::{Value, json};

const PUBLIC_KEY: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

fn start_logged(cwd: &Path, db: &TestDatabase, extra: &[&str]) -> ServerProcess {
    let log = File::create(cwd.join("server.log")).expect("log file");
    let mut args = vec!["--listen", "127.0.0.1:0", "--database-url", db.url()];
    args.extend_from_slice(extra);
    ServerProcess::start_with(cwd, &args, &[("RELAYGER_LOG", "info")], Stdio::from(log))
        .expect("start server")
}

/// A fresh database, a directory `label` and a server in it logging to
/// its `server.log`, started with `extra` arguments. Bound in this order,
/// the server is dropped (stopped) before its database.
async fn logged_server(label: &str, extra: &[&str]) -> (TestDatabase, PathBuf, ServerProcess) {
    let db = TestDatabase::create().await;
    let cwd = temp_dir(label).expect("temp dir");
    let server = start_logged(&cwd, &db, extra);
    (db, cwd, server)
}

/// The token secret a registration answered with.
fn secret_of(registered: &Value) -> String {
    registered["token"]["secret"]
        .as_str()
        .expect("secret")
        .to_owned()
}

async fn register(http: &reqwest::Client, base: &str, name: &str, kind: &str) -> Value {
    let response = http
        .post(format!("{base}/v1/register"))
        .json(&json!({"name": name, "kind": kind, "publicKey": PUBLIC_KEY}))
        .send()
        .await
        .expect("register");
    assert_eq!(response.status().as_u16(), 201);
    response.json().await.expect("json")
}

fn access_lines(log: &str) -> Vec<Value> {
    log.lines()
        .map(|line| {
            serde_json::from_str::<Value>(line)
                .unwrap_or_else(|err| panic!("not a JSON log line ({err}): {line}"))
        })
        .filter(|line| line["target"] == "relayger::access")
        .collect()
}

#[tokio::test]
async fn json_access_log_names_route_templates_and_token_ids_but_never_secrets() {
    let (_db, cwd, server) = logged_server("access-log", &["--log-format", "json"]).await;
    let base = server.base_url().to_owned();
    let http = reqwest::Client::new();

    let registered = register(&http, &base, "logged", "person").await;
    let secret = secret_of(&registered);
    let token_id = registered["token"]["id"].as_str().expect("id").to_owned();
    let number = registered["identity"]["number"]
        .as_str()
        .map(str::to_owned)
        .unwrap_or_else(|| registered["identity"]["number"].to_string());

    // A client's request id comes back and is logged.
    let me = http
        .get(format!("{base}/v1/me"))
        .bearer_auth(&secret)
        .header("x-request-id", "client-chosen-42")
        .send()
        .await
        .expect("me");
    assert_eq!(me.status().as_u16(), 200);
    assert_eq!(me.headers()["x-request-id"], "client-chosen-42");

    // The path carries a number; the log carries the template.
    let identity = http
        .get(format!("{base}/v1/identities/{number}"))
        .bearer_auth(&secret)
        .send()
        .await
        .expect("identity");
    assert_eq!(identity.status().as_u16(), 200);
    // A request id that could forge log lines is replaced by a fresh one.
    let generated = identity.headers()["x-request-id"]
        .to_str()
        .expect("ascii")
        .to_owned();
    assert!(uuid::Uuid::parse_str(&generated).is_ok(), "{generated}");

    let forged = http
        .get(format!("{base}/v1/me"))
        .header("x-request-id", "a b\tc")
        .bearer_auth("rg_not_a_real_secret_but_logged_nowhere")
        .send()
        .await
        .expect("bad token");
    assert_eq!(forged.status().as_u16(), 401);
    let replaced = forged.headers()["x-request-id"].to_str().expect("ascii");
    assert_ne!(replaced, "a b\tc");

    let missing = http
        .get(format!("{base}/v1/no/such/route"))
        .send()
        .await
        .expect("404");
    assert_eq!(missing.status().as_u16(), 404);

    server.stop_with("INT").expect("stop");
    let log = std::fs::read_to_string(cwd.join("server.log")).expect("read log");
    assert!(!log.contains(&secret), "the token secret is in the log");
    assert!(!log.contains("rg_not_a_real_secret_but_logged_nowhere"));
    let lines = access_lines(&log);
    let find = |method: &str, route: &str, status: u64| -> Vec<&Value> {
        lines
            .iter()
            .filter(|l| l["method"] == method && l["route"] == route && l["status"] == status)
            .collect()
    };

    let registers = find("POST", "/v1/register", 201);
    assert_eq!(registers.len(), 1, "{lines:#?}");
    assert_eq!(registers[0]["token_id"], "-", "registering is anonymous");
    assert_eq!(registers[0]["level"], "INFO");

    let mes = find("GET", "/v1/me", 200);
    assert_eq!(mes.len(), 1, "{lines:#?}");
    assert_eq!(mes[0]["token_id"], token_id);
    assert_eq!(mes[0]["request_id"], "client-chosen-42");
    assert!(mes[0]["latency_ms"].as_f64().is_some_and(|ms| ms >= 0.0));
    // Durations to the microsecond: at most three decimals of a millisecond.
    for line in &lines {
        let latency = line["latency_ms"].to_string();
        let decimals = latency.split_once('.').map_or(0, |(_, d)| d.len());
        assert!(decimals <= 3, "latency_ms {latency} in {line}");
    }

    let identities = find("GET", "/v1/identities/{number}", 200);
    assert_eq!(identities.len(), 1, "{lines:#?}");
    assert_eq!(identities[0]["request_id"], generated);
    assert!(!log.contains(&format!("/v1/identities/{number}\"")));

    let refused = find("GET", "/v1/me", 401);
    assert_eq!(refused.len(), 1, "{lines:#?}");
    assert_eq!(refused[0]["token_id"], "-");
    assert_eq!(refused[0]["request_id"], replaced);

    let unmatched = find("GET", "unmatched", 404);
    assert_eq!(unmatched.len(), 1, "{lines:#?}");
    assert!(!log.contains("/v1/no/such/route"), "raw paths stay out");
    std::fs::remove_dir_all(&cwd).expect("cleanup");
}

#[tokio::test]
async fn text_access_log_is_on_at_the_default_level() {
    let (_db, cwd, server) = logged_server("access-log-text", &[]).await;
    let base = server.base_url().to_owned();
    let http = reqwest::Client::new();
    let registered = register(&http, &base, "texty", "person").await;
    let secret = secret_of(&registered);
    server.stop_with("INT").expect("stop");
    let log = std::fs::read_to_string(cwd.join("server.log")).expect("read log");
    assert!(!log.contains(&secret));
    let line = log
        .lines()
        .find(|line| line.contains("relayger::access"))
        .unwrap_or_else(|| panic!("no access line: {log}"));
    for field in [
        "INFO",
        "method=\"POST\"",
        "route=\"/v1/register\"",
        "status=201",
        "latency_ms=",
        "request_id=",
    ] {
        assert!(line.contains(field), "{field} missing: {line}");
    }
    let latency = line
        .split("latency_ms=")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect("a latency");
    let decimals = latency.split_once('.').map_or(0, |(_, d)| d.len());
    assert!(decimals <= 3, "latency_ms={latency}: {line}");
    std::fs::remove_dir_all(&cwd).expect("cleanup");
}
