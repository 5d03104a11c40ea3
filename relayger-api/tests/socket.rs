//! The identity WebSocket: content-free `inbox_changed` signals, woken
//! across server instances through LISTEN/NOTIFY, closed on revocation.

mod common;

use std::time::Duration;

use common::{TestServer, next_frame};
use serde_json::json;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

const WAIT: Duration = Duration::from_secs(10);

async fn connect(
    ws_base: &str,
    token: &str,
) -> tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>> {
    let mut request = format!("{ws_base}/v1/socket")
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
    let server = TestServer::start().await;
    let alice = server.register("alice", "agent").await;
    let bob = server.register("bob", "agent").await;
    let carol = server.register("carol", "agent").await;
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

    server
        .post(
            "/v1/contacts/requests",
            &carol.token,
            json!({"number": bob.number}),
        )
        .await
        .ok();
    let frame = next_frame(&mut socket, WAIT)
        .await
        .expect("a signal for the request");
    assert_eq!(frame, r#"{"event":"inbox_changed"}"#);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_message_sent_through_one_server_wakes_a_socket_held_on_another() {
    let server_a = TestServer::start().await;
    let (b_url, _stop_b) = server_a.sibling().await;
    let alice = server_a.register("alice", "agent").await;
    let bob = server_a.register("bob", "agent").await;
    server_a.befriend(&alice, &bob).await;
    let mut socket = connect(&b_url.replacen("http://", "ws://", 1), &bob.token).await;

    server_a
        .send(&alice, json!({"to": bob.number, "text": "across servers"}))
        .await;
    let frame = next_frame(&mut socket, WAIT)
        .await
        .expect("woken through LISTEN/NOTIFY");
    assert_eq!(frame, r#"{"event":"inbox_changed"}"#);
}

#[tokio::test(flavor = "multi_thread")]
async fn revoking_the_token_closes_its_socket() {
    let server = TestServer::start().await;
    let bob = server.register("bob", "agent").await;
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
    assert_eq!(
        next_frame(&mut socket, WAIT).await,
        None,
        "the socket closes"
    );
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
    assert_eq!(
        next_frame(&mut socket_b, WAIT).await,
        None,
        "B hears the revocation"
    );
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
