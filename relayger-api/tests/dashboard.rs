//! The web dashboard's server side: the embedded page with its security
//! headers, the token carried as a WebSocket subprotocol (browsers cannot set
//! `Authorization` on a socket), and the hourly budget figure it shows.
//! The page itself is driven in a real browser by `tests/tests/dashboard.rs`.

use crate::common;

use std::time::Duration;

use common::bot::Bot;
use common::{TestServer, next_frame};
use relayger_api::{CONTENT_SECURITY_POLICY_VALUE, SOCKET_PROTOCOL, TOKEN_PROTOCOL_PREFIX};
use serde_json::json;
use tokio_tungstenite::tungstenite::Error;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

const WAIT: Duration = Duration::from_secs(10);

/// An upgrade offering `protocols`; the socket and the protocol the server
/// chose, or the refusal's status and body.
async fn connect_offering(
    server: &TestServer,
    path: &str,
    protocols: &str,
) -> Result<(common::WsStream, Option<String>), (u16, String)> {
    let mut request = format!("{}{path}", server.ws_url())
        .into_client_request()
        .expect("request");
    request
        .headers_mut()
        .insert("sec-websocket-protocol", protocols.parse().expect("header"));
    match tokio_tungstenite::connect_async(request).await {
        Ok((socket, response)) => {
            let chosen = response
                .headers()
                .get("sec-websocket-protocol")
                .map(|value| value.to_str().expect("ascii").to_owned());
            Ok((socket, chosen))
        }
        Err(Error::Http(response)) => Err((
            response.status().as_u16(),
            String::from_utf8_lossy(response.body().as_deref().unwrap_or_default()).into_owned(),
        )),
        Err(other) => panic!("upgrade failed without an HTTP answer: {other}"),
    }
}

fn offer(token: &str) -> String {
    format!("{SOCKET_PROTOCOL}, {TOKEN_PROTOCOL_PREFIX}{token}")
}

#[tokio::test(flavor = "multi_thread")]
async fn the_dashboard_is_served_without_a_token_under_a_strict_content_security_policy() {
    let server = TestServer::start().await;
    let http = reqwest::Client::new();
    let page = http
        .get(format!("{}/", server.base_url))
        .send()
        .await
        .expect("GET /");
    assert_eq!(page.status(), 200);
    let headers = page.headers().clone();
    assert_eq!(
        headers["content-security-policy"],
        CONTENT_SECURITY_POLICY_VALUE
    );
    assert!(CONTENT_SECURITY_POLICY_VALUE.contains("script-src 'self';"));
    assert!(!CONTENT_SECURITY_POLICY_VALUE.contains("unsafe-inline"));
    assert_eq!(headers["x-content-type-options"], "nosniff");
    assert_eq!(headers["x-frame-options"], "DENY");
    assert!(
        headers["content-type"]
            .to_str()
            .expect("ascii")
            .starts_with("text/html")
    );
    let html = page.text().await.expect("body");
    assert!(
        html.contains(r#"<script type="module" src="/dashboard/app.js"></script>"#),
        "{html}"
    );

    for (path, kind) in [
        ("/dashboard/app.js", "text/javascript"),
        ("/dashboard/api.js", "text/javascript"),
        ("/dashboard/style.css", "text/css"),
    ] {
        let asset = http
            .get(format!("{}{path}", server.base_url))
            .send()
            .await
            .expect("asset");
        assert_eq!(asset.status(), 200, "{path}");
        assert!(
            asset.headers()["content-type"]
                .to_str()
                .expect("ascii")
                .starts_with(kind),
            "{path}"
        );
        assert!(!asset.text().await.expect("body").is_empty(), "{path}");
    }

    // Unknown paths beside the page still answer with the envelope.
    server
        .get("/dashboard/missing.js", "")
        .await
        .err(404, "not_found");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_browser_socket_authenticates_with_the_token_subprotocol_and_the_token_is_not_echoed() {
    let bot = Bot::start().await;
    let (person, room) = bot.contact("person").await;
    let runtime = bot.runtime("dash", "now", json!({})).await;

    let (mut socket, chosen) = connect_offering(
        &bot.server,
        &format!("/v1/runtimes/{runtime}/socket"),
        &offer(&bot.agent.token),
    )
    .await
    .expect("the subprotocol token opens the runtime socket");
    assert_eq!(chosen.as_deref(), Some(SOCKET_PROTOCOL));

    bot.ask(&person, &room, "are you there?").await;
    let frame = next_frame(&mut socket, WAIT).await.expect("a signal");
    assert_eq!(frame, r#"{"event":"inbox_changed"}"#);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_socket_subprotocol_with_a_bad_token_or_another_identitys_runtime_is_refused() {
    let bot = Bot::start().await;
    let runtime = bot.runtime("dash", "now", json!({})).await;
    let stranger = bot.server.register("stranger", "agent").await;
    let path = format!("/v1/runtimes/{runtime}/socket");

    let (status, body) = connect_offering(&bot.server, &path, &offer("rlg_not_a_token"))
        .await
        .expect_err("refused");
    assert_eq!(status, 401, "{body}");
    assert!(body.contains(r#""code":"unauthorized""#), "{body}");

    // The token entry alone, without the dashboard's protocol, is not read.
    let (status, _) = connect_offering(
        &bot.server,
        &path,
        &format!("{TOKEN_PROTOCOL_PREFIX}{}", bot.agent.token),
    )
    .await
    .expect_err("refused");
    assert_eq!(status, 401);

    // Only an upgrade reads the subprotocol: a plain request is not signed in.
    let plain = reqwest::Client::new()
        .get(format!("{}/v1/me", bot.server.base_url))
        .header("sec-websocket-protocol", offer(&bot.agent.token))
        .send()
        .await
        .expect("GET /v1/me");
    assert_eq!(plain.status(), 401);

    let (status, body) = connect_offering(&bot.server, &path, &offer(&stranger.token))
        .await
        .expect_err("refused");
    assert_eq!(status, 404, "{body}");
}

#[tokio::test(flavor = "multi_thread")]
async fn stats_count_the_budget_used_in_the_rolling_hour() {
    let bot = Bot::start().await;
    let (person, room) = bot.contact("person").await;
    let runtime = bot
        .runtime("budget", "now", json!({"maxCallsPerHour": 5}))
        .await;
    let stats_path = format!("/v1/runtimes/{runtime}/stats");
    let before = bot.server.get(&stats_path, &bot.agent.token).await.ok();
    assert_eq!(before["budgetUsedLastHour"], 0, "{before}");

    bot.ask(&person, &room, "one").await;
    let claimed = bot.claim(&runtime, 1).await.ok();
    assert_eq!(claimed["jobs"].as_array().expect("jobs").len(), 1);
    let after = bot.server.get(&stats_path, &bot.agent.token).await.ok();
    assert_eq!(after["budgetUsedLastHour"], 1, "{after}");
}
