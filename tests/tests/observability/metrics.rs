//! Prometheus metrics on `--metrics-listen`: what moves when a question is
//! asked, claimed and answered, and what a rolled-back finish leaves
//! unmoved; the signal lag of a wake, local or from another instance's
//! NOTIFY; off unless asked for.

use relayger_testdb::TestDatabase;
use relayger_tests::temp_dir;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use super::{logged_server, register, secret_of, start_logged};

/// One sample of the Prometheus text format: name, sorted labels, value.
type Samples = std::collections::BTreeMap<(String, Vec<(String, String)>), f64>;

/// Parses the exposition text; panics on a line that is not a comment or a
/// `name{labels} value` sample.
fn parse_exposition(text: &str) -> Samples {
    let mut samples = Samples::new();
    for line in text.lines() {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (series, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("not a sample: {line}"));
        let value: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("bad value: {line}"));
        let (name, labels) = match series.split_once('{') {
            Some((name, rest)) => {
                let rest = rest.strip_suffix('}').expect("closing brace");
                let mut labels: Vec<(String, String)> = rest
                    .split("\",")
                    .filter(|pair| !pair.is_empty())
                    .map(|pair| {
                        let (key, value) = pair.split_once("=\"").expect("label");
                        (key.to_owned(), value.trim_end_matches('"').to_owned())
                    })
                    .collect();
                labels.sort();
                (name.to_owned(), labels)
            }
            None => (series.to_owned(), Vec::new()),
        };
        samples.insert((name, labels), value);
    }
    samples
}

fn sample(samples: &Samples, name: &str, labels: &[(&str, &str)]) -> f64 {
    let mut labels: Vec<(String, String)> = labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    labels.sort();
    samples
        .get(&(name.to_owned(), labels))
        .copied()
        .unwrap_or(0.0)
}

/// How far a sample moved between two scrapes.
fn moved(after: &Samples, before: &Samples, name: &str, labels: &[(&str, &str)]) -> f64 {
    sample(after, name, labels) - sample(before, name, labels)
}

async fn scrape(http: &reqwest::Client, url: &str) -> (String, Samples) {
    let response = http.get(url).send().await.expect("scrape");
    assert_eq!(response.status().as_u16(), 200);
    let text = response.text().await.expect("text");
    let samples = parse_exposition(&text);
    (text, samples)
}

async fn post(http: &reqwest::Client, url: String, token: &str, body: Value) -> Value {
    let response = http
        .post(&url)
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .expect("post");
    let status = response.status().as_u16();
    let body: Value = response.json().await.expect("json");
    assert!((200..300).contains(&status), "{url}: {status} {body}");
    body
}

/// [`post`], and the text field `field` of its answer (an id).
async fn post_for(
    http: &reqwest::Client,
    url: String,
    token: &str,
    body: Value,
    field: &str,
) -> String {
    let answer = post(http, url, token, body).await;
    answer[field]
        .as_str()
        .unwrap_or_else(|| panic!("no {field} in {answer}"))
        .to_owned()
}

/// A person and an agent in contact: their tokens and direct room.
async fn asker_and_agent(http: &reqwest::Client, base: &str) -> (String, String, String) {
    let (person_token, agent_token, room, _) = asker_and_agent_ids(http, base).await;
    (person_token, agent_token, room)
}

/// [`asker_and_agent`], and the person's and the agent's identity ids.
async fn asker_and_agent_ids(
    http: &reqwest::Client,
    base: &str,
) -> (String, String, String, [String; 2]) {
    let person = register(http, base, "asker", "person").await;
    let agent = register(http, base, "answerer", "agent").await;
    let (person_token, agent_token) = (secret_of(&person), secret_of(&agent));
    post(
        http,
        format!("{base}/v1/contacts/requests"),
        &person_token,
        json!({"number": agent["identity"]["number"]}),
    )
    .await;
    let contact = post(
        http,
        format!(
            "{base}/v1/contacts/requests/{}/accept",
            person["identity"]["number"].as_str().expect("number")
        ),
        &agent_token,
        json!({}),
    )
    .await;
    let room = contact["roomId"].as_str().expect("room").to_owned();
    let id = |registered: &Value| {
        registered["identity"]["id"]
            .as_str()
            .expect("id")
            .to_owned()
    };
    let ids = [id(&person), id(&agent)];
    (person_token, agent_token, room, ids)
}

/// Waits until a NOTIFY naming every one of `ids` has been sent (heard by
/// `announcements`, a listener subscribed before the writes that send it).
async fn hear_wake_of(
    announcements: &mut tokio::sync::mpsc::Receiver<relayger_store::listen::Announcement>,
    ids: &[String],
) {
    use relayger_store::listen::Announcement;
    loop {
        let heard = tokio::time::timeout(std::time::Duration::from_secs(10), announcements.recv())
            .await
            .expect("a NOTIFY within 10 s")
            .expect("the listener runs");
        if let Announcement::InboxChanged { identity_ids, .. } = heard {
            let named: Vec<String> = identity_ids.iter().map(ToString::to_string).collect();
            if ids.iter().all(|id| named.contains(id)) {
                return;
            }
        }
    }
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Opens the socket at `url` with a bearer token.
async fn open_socket(url: String, token: &str) -> Socket {
    let mut request = url.into_client_request().expect("ws request");
    request.headers_mut().insert(
        "authorization",
        format!("Bearer {token}").parse().expect("header"),
    );
    tokio_tungstenite::connect_async(request)
        .await
        .expect("socket")
        .0
}

fn signal_lags(samples: &Samples, path: &str) -> f64 {
    sample(
        samples,
        "relayger_signal_lag_seconds_count",
        &[("path", path)],
    )
}

/// Asks (with `ask`) and reads `socket`'s frames until a scrape of
/// `metrics` shows a signal lag observed on `path`: a socket opened before
/// its server's LISTEN connection subscribed first hears that subscription's
/// wake-everyone frame, which has no commit to measure from (and a NOTIFY
/// sent before it is not heard). Returns the scrape and the questions asked.
async fn ask_until_a_lag_is_observed<F, Fut>(
    http: &reqwest::Client,
    metrics: &str,
    socket: &mut Socket,
    path: &str,
    ask: F,
) -> (Samples, f64)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Value>,
{
    use futures_util::StreamExt;
    let mut asked = 0.0;
    for _ in 0..3 {
        ask().await;
        asked += 1.0;
        loop {
            let frame = tokio::time::timeout(std::time::Duration::from_secs(10), socket.next())
                .await
                .expect("a signal within 10 s")
                .expect("the socket stays open")
                .expect("a frame");
            if let tokio_tungstenite::tungstenite::Message::Text(text) = frame {
                assert_eq!(text.as_str(), r#"{"event":"inbox_changed"}"#);
                break;
            }
        }
        let (_, samples) = scrape(http, metrics).await;
        if signal_lags(&samples, path) > 0.0 {
            return (samples, asked);
        }
    }
    panic!("no signal lag observed on {path} after 3 questions");
}

#[tokio::test]
async fn metrics_move_when_a_question_is_asked_claimed_and_answered() {
    let (_db, cwd, server) = logged_server("metrics", &["--metrics-listen", "0"]).await;
    let base = server.base_url().to_owned();
    let metrics = server.metrics_url().expect("metrics line").to_owned();
    assert!(
        metrics.starts_with("http://127.0.0.1:"),
        "a bare port is loopback: {metrics}"
    );
    let http = reqwest::Client::new();

    let (text, before) = scrape(&http, &metrics).await;
    for described in [
        "# TYPE relayger_db_pool_max gauge",
        "# TYPE relayger_db_pool_in_use gauge",
        "# TYPE relayger_db_pool_waiting gauge",
    ] {
        assert!(text.contains(described), "{described} missing:\n{text}");
    }
    assert_eq!(sample(&before, "relayger_db_pool_max", &[]), 16.0);
    assert_eq!(sample(&before, "relayger_grants_total", &[]), 0.0);

    let (person_token, agent_token, room) = asker_and_agent(&http, &base).await;
    let (person_token, agent_token) = (person_token.as_str(), agent_token.as_str());
    let runtime = post_for(
        &http,
        format!("{base}/v1/runtimes"),
        agent_token,
        json!({"name": "metered", "from": "now"}),
        "id",
    )
    .await;

    let ask = |text: &'static str| {
        post(
            &http,
            format!("{base}/v1/messages"),
            person_token,
            json!({"roomId": room, "text": text, "ask": true}),
        )
    };
    let claim_one = || {
        post(
            &http,
            format!("{base}/v1/runtimes/{runtime}/claim"),
            agent_token,
            json!({"maxJobs": 1}),
        )
    };
    // Two questions: one answered, one skipped by the worker.
    for (text, result) in [
        ("first?", json!({"reply": "yes"})),
        ("second?", json!({"skip": "not_for_me"})),
    ] {
        ask(text).await;
        let claim = claim_one().await;
        let job = &claim["jobs"][0];
        post(
            &http,
            format!(
                "{base}/v1/runtimes/{runtime}/jobs/{}/finish",
                job["jobId"].as_str().expect("job id")
            ),
            agent_token,
            json!({"owner": job["owner"], "version": job["version"], "result": result}),
        )
        .await;
    }
    // Two more, and a claim of one: one job claimed, one left pending.
    ask("third?").await;
    ask("fourth?").await;
    let claim = claim_one().await;
    assert_eq!(claim["jobs"].as_array().map(Vec::len), Some(1), "{claim}");
    // The runtime's socket stays open over the scrape.
    let mut socket = open_socket(
        format!(
            "{}/v1/runtimes/{runtime}/socket",
            base.replacen("http", "ws", 1)
        ),
        agent_token,
    )
    .await;

    let (text, after) = scrape(&http, &metrics).await;
    let moved = |name: &str, labels: &[(&str, &str)]| moved(&after, &before, name, labels);
    assert_eq!(moved("relayger_grants_total", &[]), 3.0, "{text}");
    assert_eq!(
        moved("relayger_claims_total", &[("result", "granted")]),
        3.0,
        "{text}"
    );
    assert_eq!(sample(&after, "relayger_open_sockets", &[]), 1.0, "{text}");
    // What the server sent to PostgreSQL for all that: statements, and a
    // round trip for each plus one for each prepare, less the statements
    // pipelined behind another (a claim sends several in one flight).
    let statements = moved("relayger_db_statements_total", &[]);
    assert!(statements >= 12.0, "{text}");
    let pipelined = moved("relayger_db_pipelined_total", &[]);
    assert!(pipelined >= 3.0, "each of the 3 claims pipelines: {text}");
    assert_eq!(
        moved("relayger_db_round_trips_total", &[]),
        statements
            + moved("relayger_db_prepares_total", &[("statement", "cached")])
            + moved("relayger_db_prepares_total", &[("statement", "uncached")])
            - pipelined,
        "{text}"
    );
    assert_eq!(
        moved("relayger_finishes_total", &[("outcome", "replied")]),
        1.0,
        "{text}"
    );
    assert_eq!(
        moved("relayger_finishes_total", &[("outcome", "skipped")]),
        1.0,
        "{text}"
    );
    assert_eq!(
        moved(
            "relayger_skips_total",
            &[("source", "worker"), ("reason", "not_for_me")]
        ),
        1.0,
        "{text}"
    );
    let claim_route = [
        ("method", "POST"),
        ("route", "/v1/runtimes/{id}/claim"),
        ("status", "200"),
    ];
    assert_eq!(
        moved("relayger_http_requests_total", &claim_route),
        3.0,
        "{text}"
    );
    assert_eq!(
        moved("relayger_http_request_duration_seconds_count", &claim_route),
        3.0,
        "{text}"
    );
    assert_eq!(
        moved("relayger_claim_duration_seconds_count", &[("result", "ok")]),
        3.0,
        "{text}"
    );
    assert_eq!(
        moved(
            "relayger_finish_duration_seconds_count",
            &[("result", "ok")]
        ),
        2.0,
        "{text}"
    );
    assert_eq!(
        sample(
            &after,
            "relayger_runtime_jobs",
            &[
                ("runtime", &runtime),
                ("runtime_name", "metered"),
                ("state", "pending")
            ]
        ),
        1.0,
        "{text}"
    );
    assert_eq!(
        sample(
            &after,
            "relayger_runtime_jobs",
            &[
                ("runtime", &runtime),
                ("runtime_name", "metered"),
                ("state", "claimed")
            ]
        ),
        1.0,
        "{text}"
    );
    assert!(
        !text.contains(person_token) && !text.contains(agent_token),
        "no secret in the metrics"
    );
    assert_eq!(signal_lags(&after, "local"), 0.0, "no frame sent yet");

    // A question wakes the runtime's socket: the time from its commit to
    // the frame is observed, as a wake of this instance.
    let (lagged, asked) =
        ask_until_a_lag_is_observed(&http, &metrics, &mut socket, "local", || ask("fifth?")).await;
    assert!(
        (1.0..=asked).contains(&signal_lags(&lagged, "local")),
        "one observation per frame"
    );
    let (text, _) = scrape(&http, &metrics).await;
    assert!(
        text.contains("# TYPE relayger_signal_lag_seconds histogram"),
        "{text}"
    );
    assert_eq!(signal_lags(&lagged, "notify"), 0.0);
    let lag = sample(
        &lagged,
        "relayger_signal_lag_seconds_sum",
        &[("path", "local")],
    );
    assert!((0.0..10.0).contains(&lag), "a plausible lag: {lag} s");
    drop(socket);
    drop(server);
    std::fs::remove_dir_all(&cwd).expect("cleanup");
}

/// A finish whose transaction rolls back (here a stale note version, which
/// undoes the reply, the completion and the log record with it) counts no
/// finish; the same job finished again counts once.
#[tokio::test]
async fn a_finish_rolled_back_counts_nothing_and_its_retry_counts_once() {
    let (_db, cwd, server) = logged_server("metrics-rollback", &["--metrics-listen", "0"]).await;
    let base = server.base_url().to_owned();
    let metrics = server.metrics_url().expect("metrics line").to_owned();
    let http = reqwest::Client::new();
    let (person_token, agent_token, room) = asker_and_agent(&http, &base).await;
    let runtime = post_for(
        &http,
        format!("{base}/v1/runtimes"),
        &agent_token,
        json!({"name": "noted", "from": "now"}),
        "id",
    )
    .await;
    let question = post_for(
        &http,
        format!("{base}/v1/messages"),
        &person_token,
        json!({"roomId": room, "text": "remember this?", "ask": true}),
        "messageId",
    )
    .await;
    let claim = post(
        &http,
        format!("{base}/v1/runtimes/{runtime}/claim"),
        &agent_token,
        json!({"maxJobs": 1}),
    )
    .await;
    let job = &claim["jobs"][0];
    let finish_url = format!(
        "{base}/v1/runtimes/{runtime}/jobs/{}/finish",
        job["jobId"].as_str().expect("job id")
    );
    let with_note = |version: u32| {
        json!({"owner": job["owner"], "version": job["version"], "result": {
            "reply": "noted",
            "note": {"key": "decision", "text": "kept", "version": version,
                     "sourceMessageIds": [question]},
        }})
    };
    let (_, before) = scrape(&http, &metrics).await;

    let refused = http
        .post(&finish_url)
        .bearer_auth(&agent_token)
        .json(&with_note(3))
        .send()
        .await
        .expect("finish");
    assert_eq!(refused.status().as_u16(), 409);
    let body: Value = refused.json().await.expect("json");
    assert_eq!(body["error"]["code"], "version_conflict", "{body}");
    let (text, rolled_back) = scrape(&http, &metrics).await;
    for outcome in ["replied", "handled", "failed"] {
        assert_eq!(
            moved(
                &rolled_back,
                &before,
                "relayger_finishes_total",
                &[("outcome", outcome)]
            ),
            0.0,
            "a rolled-back finish counts no {outcome}: {text}"
        );
    }

    post(&http, finish_url, &agent_token, with_note(0)).await;
    let (text, committed) = scrape(&http, &metrics).await;
    assert_eq!(
        moved(
            &committed,
            &before,
            "relayger_finishes_total",
            &[("outcome", "replied")]
        ),
        1.0,
        "{text}"
    );
    drop(server);
    std::fs::remove_dir_all(&cwd).expect("cleanup");
}

#[tokio::test]
async fn the_signal_lag_of_a_wake_from_another_instance_is_measured_from_its_notify() {
    let db = TestDatabase::create().await;
    let cwd_a = temp_dir("lag-a").expect("temp dir");
    let cwd_b = temp_dir("lag-b").expect("temp dir");
    let server_a = start_logged(&cwd_a, &db, &[]);
    let base_a = server_a.base_url().to_owned();
    let http = reqwest::Client::new();
    // B starts only once A has sent the NOTIFYs of the set-up (the contact
    // request and its accept wake the agent): B's LISTEN comes after them,
    // so every lag B measures is of a question asked below.
    let (tx, mut announcements) = tokio::sync::mpsc::channel(64);
    let listener = tokio::spawn(relayger_store::listen::listen(
        db.url().to_owned(),
        relayger_store::listen::ListenOptions::default(),
        uuid::Uuid::new_v4(),
        tx,
    ));
    assert_eq!(
        announcements.recv().await,
        Some(relayger_store::listen::Announcement::Listening)
    );
    let (person_token, agent_token, room, ids) = asker_and_agent_ids(&http, &base_a).await;
    // The accept's NOTIFY names both; the request's (the agent) went before
    // it on A's one notifier connection.
    hear_wake_of(&mut announcements, &ids).await;
    listener.abort();
    let server_b = start_logged(&cwd_b, &db, &["--metrics-listen", "0"]);
    let base_b = server_b.base_url();
    let metrics = server_b.metrics_url().expect("metrics line").to_owned();
    let mut socket = open_socket(
        format!("{}/v1/socket", base_b.replacen("http", "ws", 1)),
        &agent_token,
    )
    .await;

    // Asked through A; B hears A's NOTIFY and wakes the socket.
    let ask = || {
        post(
            &http,
            format!("{base_a}/v1/messages"),
            &person_token,
            json!({"roomId": room, "text": "across?", "ask": true}),
        )
    };
    let (lagged, asked) =
        ask_until_a_lag_is_observed(&http, &metrics, &mut socket, "notify", ask).await;
    assert!((1.0..=asked).contains(&signal_lags(&lagged, "notify")));
    assert_eq!(signal_lags(&lagged, "local"), 0.0, "nothing committed on B");
    let lag = sample(
        &lagged,
        "relayger_signal_lag_seconds_sum",
        &[("path", "notify")],
    );
    // One machine, one clock: no skew in the figure.
    assert!((0.0..10.0).contains(&lag), "a plausible lag: {lag} s");
    drop(socket);
    drop(server_b);
    drop(server_a);
    std::fs::remove_dir_all(&cwd_a).expect("cleanup");
    std::fs::remove_dir_all(&cwd_b).expect("cleanup");
}

#[tokio::test]
async fn metrics_are_off_unless_asked_for() {
    let (_db, cwd, server) = logged_server("metrics-off", &[]).await;
    assert_eq!(server.metrics_url(), None);
    // Nor does the API answer /metrics.
    let response = reqwest::get(format!("{}/metrics", server.base_url()))
        .await
        .expect("get");
    assert_eq!(response.status().as_u16(), 404);
    drop(server);
    std::fs::remove_dir_all(&cwd).expect("cleanup");
}

#[tokio::test]
async fn an_unusable_metrics_address_stops_the_server_with_a_clear_message() {
    let db = TestDatabase::create().await;
    let cwd = temp_dir("metrics-bad").expect("temp dir");
    let output = relayger_tests::run_server_command(
        &cwd,
        &[
            "--listen",
            "127.0.0.1:0",
            "--database-url",
            db.url(),
            "--metrics-listen",
            "nowhere.invalid:notaport",
        ],
    )
    .expect("run server");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--metrics-listen on nowhere.invalid:notaport"),
        "{stderr}"
    );
    assert!(
        !String::from_utf8_lossy(&output.stdout).contains("listening on"),
        "it never served"
    );
    std::fs::remove_dir_all(&cwd).expect("cleanup");
}
