//! The identity WebSocket: content-free `inbox_changed` signals, woken
//! across server instances through LISTEN/NOTIFY, closed on revocation.

use crate::common;

use std::time::Duration;

use common::{TestServer, next_frame};
use serde_json::json;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

const WAIT: Duration = Duration::from_secs(10);

/// Asserts the socket's next frame within `WAIT` is `expected` (`None`:
/// the socket closes).
async fn assert_next_frame(socket: &mut common::WsStream, expected: Option<&str>, why: &str) {
    assert_eq!(next_frame(socket, WAIT).await.as_deref(), expected, "{why}");
}

async fn connect(ws_base: &str, token: &str) -> common::WsStream {
    connect_to(ws_base, "/v1/socket", token).await
}

async fn connect_to(
    ws_base: &str,
    path: &str,
    token: &str,
) -> tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>> {
    let mut request = format!("{ws_base}{path}")
        .into_client_request()
        .expect("request");
    request.headers_mut().insert(
        "authorization",
        format!("Bearer {token}").parse().expect("header"),
    );
    tokio_tungstenite::connect_async(request)
        .await
        .expect("connect")
        .0
}

#[tokio::test(flavor = "multi_thread")]
async fn a_message_and_a_contact_request_wake_the_identity_socket_without_content() {
    let (server, [alice, bob, carol]) =
        TestServer::with_users([("alice", "agent"), ("bob", "agent"), ("carol", "agent")]).await;
    server.befriend(&alice, &bob).await;
    let mut socket = connect(&server.ws_url(), &bob.token).await;

    server
        .send(
            &alice,
            json!({"to": bob.number, "text": "wake up, secret words", "ask": true}),
        )
        .await;
    let frame = next_frame(&mut socket, WAIT)
        .await
        .expect("a signal for the message");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&frame).expect("json"),
        json!({"event": "inbox_changed"})
    );

    server.ask_contact(&carol, &bob).await.ok();
    assert_next_frame(&mut socket, Some(INBOX_CHANGED), "a signal for the request").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_message_sent_through_one_server_wakes_a_socket_held_on_another() {
    let server_a = TestServer::start().await;
    let (b_url, _stop_b) = server_a.sibling().await;
    let (alice, bob, _) = server_a
        .befriended_pair(("alice", "agent"), ("bob", "agent"))
        .await;
    let mut socket = connect(&b_url.replacen("http://", "ws://", 1), &bob.token).await;

    server_a
        .send(&alice, json!({"to": bob.number, "text": "across servers"}))
        .await;
    assert_next_frame(
        &mut socket,
        Some(INBOX_CHANGED),
        "woken through LISTEN/NOTIFY",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn revoking_the_token_closes_its_socket() {
    let (server, [bob]) = TestServer::with_users([("bob", "agent")]).await;
    let second = server
        .post("/v1/tokens", &bob.token, json!({"scopes": ["read"]}))
        .await
        .ok();
    let mut socket = connect(&server.ws_url(), second["secret"].as_str().expect("secret")).await;
    server
        .delete(
            &format!("/v1/tokens/{}", second["id"].as_str().expect("id")),
            &bob.token,
        )
        .await
        .ok();
    assert_next_frame(&mut socket, None, "the socket closes").await;
}

/// The status of `GET /v1/me` with `token` on the server at `base_url`.
async fn me_status(base_url: &str, token: &str) -> u16 {
    reqwest::Client::new()
        .get(format!("{base_url}/v1/me"))
        .bearer_auth(token)
        .send()
        .await
        .expect("request")
        .status()
        .as_u16()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_revoked_token_is_refused_at_once_here_and_on_another_instance_sharing_the_database() {
    let server_a = TestServer::start().await;
    let (b_url, _stop_b) = server_a.sibling().await;
    let bob = server_a.register("bob", "agent").await;
    let second = server_a
        .post("/v1/tokens", &bob.token, json!({"scopes": ["read"]}))
        .await
        .ok();
    let secret = second["secret"].as_str().expect("secret");
    // Both instances have authenticated (and may remember) the token.
    for _ in 0..2 {
        assert_eq!(me_status(&server_a.base_url, secret).await, 200);
        assert_eq!(me_status(&b_url, secret).await, 200);
    }
    // A socket on B tells when B has heard of the revocation.
    let mut socket_b = connect(&b_url.replacen("http://", "ws://", 1), secret).await;

    server_a
        .delete(
            &format!("/v1/tokens/{}", second["id"].as_str().expect("id")),
            &bob.token,
        )
        .await
        .ok();
    assert_eq!(
        me_status(&server_a.base_url, secret).await,
        401,
        "refused on the revoking instance from the next request"
    );
    assert_next_frame(&mut socket_b, None, "B hears the revocation").await;
    assert_eq!(
        me_status(&b_url, secret).await,
        401,
        "refused on the other instance once it heard"
    );
    assert_eq!(
        me_status(&b_url, &bob.token).await,
        200,
        "other tokens stay"
    );
}

const INBOX_CHANGED: &str = r#"{"event":"inbox_changed"}"#;
const RUNTIME_CHANGED: &str = r#"{"event":"runtime_changed"}"#;

/// Every write of a runtime route signals `runtime_changed` to the sockets
/// opened with `?runtimeChanges=true` (the identity's and the runtime's),
/// and nothing to a socket that did not ask (a worker's).
#[tokio::test(flavor = "multi_thread")]
async fn runtime_changes_are_signalled_only_to_sockets_that_ask_for_them() {
    let bot = common::bot::Bot::start().await;
    let server = &bot.server;
    let token = bot.agent.token.clone();
    let (asker, room) = bot.contact("asker").await;
    let runtime = bot
        .runtime("watched", "now", json!({"maxAttempts": 1}))
        .await;
    let runtime_path = format!("/v1/runtimes/{runtime}/socket");
    let mut worker = server
        .ws_connect(&runtime_path, Some(&token))
        .await
        .expect("worker socket");
    let mut watchers = [
        server
            .ws_connect("/v1/socket?runtimeChanges=true", Some(&token))
            .await
            .expect("identity socket with changes"),
        server
            .ws_connect(&format!("{runtime_path}?runtimeChanges=true"), Some(&token))
            .await
            .expect("runtime socket with changes"),
    ];
    async fn expect_all(sockets: &mut [common::WsStream], frame: &str, after: &str) {
        for socket in sockets {
            assert_next_frame(socket, Some(frame), &format!("after {after}")).await;
        }
    }

    // A claim that grants nothing is a change too (it may expire leases).
    bot.claim(&runtime, 1).await.ok();
    expect_all(&mut watchers, RUNTIME_CHANGED, "an idle claim").await;
    // The worker's socket hears the question, and nothing before it.
    bot.ask(&asker, &room, "first?").await;
    expect_all(&mut watchers, INBOX_CHANGED, "a question").await;
    assert_next_frame(
        &mut worker,
        Some(INBOX_CHANGED),
        "the worker hears the question",
    )
    .await;

    let claim = bot.claim(&runtime, 1).await.ok();
    let job = claim["jobs"][0].clone();
    expect_all(&mut watchers, RUNTIME_CHANGED, "a claim").await;
    let job_path = format!(
        "/v1/runtimes/{runtime}/jobs/{}",
        job["jobId"].as_str().expect("job id")
    );
    let lease = json!({"owner": job["owner"], "version": job["version"]});
    server
        .post(&format!("{job_path}/heartbeat"), &token, lease.clone())
        .await
        .ok();
    expect_all(&mut watchers, RUNTIME_CHANGED, "a heartbeat").await;
    server
        .post(&format!("{job_path}/release"), &token, lease)
        .await
        .ok();
    expect_all(&mut watchers, RUNTIME_CHANGED, "a release").await;

    let claim = bot.claim(&runtime, 1).await.ok();
    let job = claim["jobs"][0].clone();
    expect_all(&mut watchers, RUNTIME_CHANGED, "the claim again").await;
    let finished = server
        .finish_job(&token, &runtime, &job, json!({"error": "no model"}))
        .await
        .ok();
    assert_eq!(finished["outcome"], "dead_letter", "{finished}");
    expect_all(&mut watchers, RUNTIME_CHANGED, "a finish").await;
    server
        .post(&format!("{job_path}/retry"), &token, json!({}))
        .await
        .ok();
    expect_all(&mut watchers, RUNTIME_CHANGED, "a retry").await;
    bot.configure(&runtime, json!({"maxAttempts": 2})).await;
    expect_all(&mut watchers, RUNTIME_CHANGED, "a configuration").await;

    // The worker's next frame is the next question's: no change reached it.
    bot.ask(&asker, &room, "second?").await;
    assert_next_frame(
        &mut worker,
        Some(INBOX_CHANGED),
        "the worker hears the question",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_runtime_change_through_one_server_reaches_a_watching_socket_held_on_another() {
    let bot = common::bot::Bot::start().await;
    let (b_url, _stop_b) = bot.server.sibling().await;
    let runtime = bot.runtime("watched", "now", json!({})).await;
    let mut socket = connect_to(
        &b_url.replacen("http://", "ws://", 1),
        "/v1/socket?runtimeChanges=true",
        &bot.agent.token,
    )
    .await;
    bot.claim(&runtime, 1).await.ok();
    assert_next_frame(
        &mut socket,
        Some(RUNTIME_CHANGED),
        "woken through LISTEN/NOTIFY",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_socket_query_other_than_runtime_changes_true_or_false_is_refused() {
    let (server, [bob]) = TestServer::with_users([("bob", "agent")]).await;
    for query in ["runtimeChanges=maybe", "wake=all"] {
        let refused = server
            .ws_connect(&format!("/v1/socket?{query}"), Some(&bob.token))
            .await
            .expect_err("refused");
        assert_eq!(refused.status, 400, "{query}: {}", refused.body);
        let body: serde_json::Value = serde_json::from_str(&refused.body).expect("json");
        assert_eq!(body["error"]["code"], "invalid_argument", "{query}");
    }
    let mut socket = server
        .ws_connect("/v1/socket?runtimeChanges=false", Some(&bob.token))
        .await
        .expect("false is allowed");
    drop(socket.close(None).await);
}

const DELIVERY_CHANGED: &str = r#"{"event":"delivery_changed"}"#;

/// The asker's identity socket hears each change of its question's
/// delivery, here and on another instance; what changed is read over HTTP.
#[tokio::test(flavor = "multi_thread")]
async fn a_question_s_delivery_changes_reach_its_asker_s_sockets_here_and_elsewhere() {
    let bot = common::bot::Bot::start().await;
    let server = &bot.server;
    let (b_url, _stop_b) = server.sibling().await;
    let (asker, room) = bot.contact("asker").await;
    let runtime = bot
        .runtime("answerer", "now", json!({"maxAttempts": 1}))
        .await;
    let mut here = connect(&server.ws_url(), &asker.token).await;
    let mut elsewhere = connect(&b_url.replacen("http://", "ws://", 1), &asker.token).await;

    let question = bot.ask(&asker, &room, "will you?").await;
    let delivery_path = format!("/v1/rooms/{room}/messages/{question}/delivery");
    let claim = bot.claim(&runtime, 1).await.ok();
    let job = claim["jobs"][0].clone();
    for socket in [&mut here, &mut elsewhere] {
        assert_next_frame(socket, Some(DELIVERY_CHANGED), "claimed").await;
    }
    let working = server.get(&delivery_path, &asker.token).await.ok();
    assert_eq!(working["state"], "working", "{working}");

    server
        .finish_job(
            &bot.agent.token,
            &runtime,
            &job,
            json!({"error": "secret text"}),
        )
        .await
        .ok();
    for socket in [&mut here, &mut elsewhere] {
        assert_next_frame(socket, Some(DELIVERY_CHANGED), "a dead letter").await;
    }
    let failed = server.get(&delivery_path, &asker.token).await.ok();
    assert_eq!(failed["state"], "failed", "{failed}");
    assert_eq!(failed["recipients"][0]["reason"], "attempts_exhausted");
    assert!(!failed.to_string().contains("secret text"), "{failed}");

    // Cancel is the sender's alone, and says what became of the question.
    let cancel_path = format!("/v1/rooms/{room}/messages/{question}/ask");
    let refused = server
        .request(
            reqwest::Method::DELETE,
            &cancel_path,
            Some(&bot.agent.token),
            None,
        )
        .await;
    refused.err(403, "forbidden");
    let canceled = server
        .request(
            reqwest::Method::DELETE,
            &cancel_path,
            Some(&asker.token),
            None,
        )
        .await
        .ok();
    assert_eq!(canceled["canceled"], true, "{canceled}");
    assert_eq!(
        canceled["state"], "failed",
        "it had already ended: failed stays"
    );
}
