//! Bad input answers 4xx with the error envelope and writes nothing.

use crate::common;

use common::TestServer;
use reqwest::Method;
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread")]
async fn a_name_with_a_direction_override_is_refused_with_the_reason() {
    let server = TestServer::start().await;
    let reply = server
        .request(
            Method::POST,
            "/v1/register",
            None,
            Some(json!({"name": "adm\u{202e}nimda", "kind": "person",
                        "publicKey": common::public_key()})),
        )
        .await;
    reply.err(400, "invalid_argument");
    let message = reply.body["error"]["message"].as_str().expect("message");
    assert!(
        message.contains("invisible formatting characters"),
        "{message}"
    );
    assert!(message.contains("Cf"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn malformed_requests_are_refused_and_change_nothing() {
    let server = TestServer::start().await;
    let (alice, bob, room) = server
        .befriended_pair(("alice", "agent"), ("bob", "agent"))
        .await;
    let parent = server
        .send(&alice, json!({"roomId": room, "text": "hi"}))
        .await;
    let parent = parent["messageId"].as_str().expect("id").to_owned();
    let before = server.visible_state(&[&alice, &bob]).await;
    let key = common::public_key();
    let big = "x".repeat(64 * 1024 + 1);

    let cases: Vec<(Method, String, Option<Value>, u16, &str)> = vec![
        // Registration.
        (
            Method::POST,
            "/v1/register".into(),
            Some(json!({"name": "x", "kind": "robot", "publicKey": key})),
            400,
            "invalid_json",
        ),
        (
            Method::POST,
            "/v1/register".into(),
            Some(json!({"name": "", "kind": "agent", "publicKey": key})),
            400,
            "invalid_argument",
        ),
        (
            Method::POST,
            "/v1/register".into(),
            Some(json!({"name": "x".repeat(101), "kind": "agent", "publicKey": key})),
            400,
            "invalid_argument",
        ),
        // Invisible formatting characters (Unicode category Cf) in a name.
        (
            Method::POST,
            "/v1/register".into(),
            Some(json!({"name": "adm\u{202e}nimda", "kind": "agent", "publicKey": key})),
            400,
            "invalid_argument",
        ),
        (
            Method::POST,
            "/v1/register".into(),
            Some(json!({"name": "a\u{200b}b", "kind": "agent", "publicKey": key})),
            400,
            "invalid_argument",
        ),
        (
            Method::POST,
            "/v1/register".into(),
            Some(json!({"name": "\u{feff}bob", "kind": "agent", "publicKey": key})),
            400,
            "invalid_argument",
        ),
        (
            Method::POST,
            "/v1/register".into(),
            Some(json!({"name": "x", "kind": "agent", "publicKey": "c2hvcnQ="})),
            400,
            "invalid_argument",
        ),
        (
            Method::POST,
            "/v1/register".into(),
            Some(json!({"name": "x", "kind": "agent", "publicKey": key, "admin": true})),
            400,
            "invalid_json",
        ),
        (
            Method::POST,
            "/v1/register".into(),
            Some(json!({"name": "x", "kind": "agent"})),
            400,
            "invalid_json",
        ),
        (
            Method::POST,
            "/v1/register".into(),
            Some(json!(["not", "an", "object"])),
            400,
            "invalid_json",
        ),
        // Messages.
        (
            Method::POST,
            "/v1/messages".into(),
            Some(json!({"roomId": room, "text": "x", "unknown": 1})),
            400,
            "invalid_json",
        ),
        (
            Method::POST,
            "/v1/messages".into(),
            Some(json!({"roomId": "not-a-uuid", "text": "x"})),
            400,
            "invalid_json",
        ),
        (
            Method::POST,
            "/v1/messages".into(),
            Some(json!({"to": "12ab", "text": "x"})),
            400,
            "invalid_json",
        ),
        (
            Method::POST,
            "/v1/messages".into(),
            Some(json!({"to": bob.number, "roomId": room, "text": "x"})),
            400,
            "invalid_argument",
        ),
        (
            Method::POST,
            "/v1/messages".into(),
            Some(json!({"roomId": room})),
            400,
            "invalid_argument",
        ),
        (
            Method::POST,
            "/v1/messages".into(),
            Some(json!({"roomId": room, "text": ""})),
            400,
            "invalid_argument",
        ),
        (
            Method::POST,
            "/v1/messages".into(),
            Some(json!({"roomId": room, "text": "x", "deadline": "2026-10-02T12:00:00Z"})),
            400,
            "invalid_argument",
        ),
        (
            Method::POST,
            "/v1/messages".into(),
            Some(
                json!({"roomId": room, "text": "x", "ask": true, "deadline": "2026-10-02T14:00:00+02:00"}),
            ),
            400,
            "invalid_json",
        ),
        (
            Method::POST,
            "/v1/messages".into(),
            Some(json!({"roomId": room, "text": "x", "ask": true, "deadline": "tomorrow"})),
            400,
            "invalid_json",
        ),
        (
            Method::POST,
            "/v1/messages".into(),
            Some(json!({"roomId": room, "text": "x", "replyTo": uuid::Uuid::now_v7()})),
            404,
            "not_found",
        ),
        (
            Method::POST,
            "/v1/messages".into(),
            Some(json!({"roomId": room, "text": big})),
            413,
            "payload_too_large",
        ),
        (
            Method::POST,
            "/v1/messages".into(),
            Some(json!({"roomId": room, "text": "x".repeat(600 * 1024)})),
            413,
            "payload_too_large",
        ),
        (
            Method::POST,
            "/v1/messages".into(),
            Some(
                json!({"roomId": room, "messageId": uuid::Uuid::now_v7(), "sealed": {"version": 1, "suite": "nope", "recipients": []}}),
            ),
            400,
            "invalid_argument",
        ),
        // Paths and numbers.
        (
            Method::GET,
            format!("/v1/rooms/{room}/messages/not-a-uuid"),
            None,
            400,
            "invalid_argument",
        ),
        (
            Method::GET,
            "/v1/rooms/xyz".into(),
            None,
            400,
            "invalid_argument",
        ),
        (
            Method::GET,
            "/v1/identities/0123".into(),
            None,
            400,
            "invalid_argument",
        ),
        (
            Method::GET,
            "/v1/identities/999999999".into(),
            None,
            404,
            "not_found",
        ),
        (
            Method::POST,
            "/v1/contacts/requests".into(),
            Some(json!({"number": alice.number})),
            400,
            "invalid_argument",
        ),
        (
            Method::POST,
            "/v1/contacts/requests".into(),
            Some(json!({"number": 100000123})),
            400,
            "invalid_json",
        ),
        (
            Method::POST,
            format!("/v1/rooms/{room}/ack"),
            Some(json!({"seq": -1})),
            400,
            "invalid_argument",
        ),
        (
            Method::POST,
            format!("/v1/rooms/{room}/ack"),
            Some(json!({"seq": "1"})),
            400,
            "invalid_json",
        ),
        (
            Method::POST,
            "/v1/rooms".into(),
            Some(json!({"name": "  ", "members": []})),
            400,
            "invalid_argument",
        ),
        (
            Method::POST,
            "/v1/rooms".into(),
            Some(json!({"name": "room\u{202e}", "members": []})),
            400,
            "invalid_argument",
        ),
        (
            Method::POST,
            format!("/v1/rooms/{room}/leave"),
            Some(json!({})),
            400,
            "invalid_argument",
        ),
        (
            Method::GET,
            format!("/v1/rooms/{room}/messages/{parent}/thread?limit=1000"),
            None,
            400,
            "invalid_argument",
        ),
        (
            Method::DELETE,
            "/v1/tokens/not-a-uuid".into(),
            None,
            400,
            "invalid_argument",
        ),
        (
            Method::DELETE,
            "/v1/messages".into(),
            None,
            400,
            "bad_request",
        ),
        (Method::GET, "/v1/nowhere".into(), None, 404, "not_found"),
    ];
    for (method, path, body, status, code) in cases {
        let token = (path != "/v1/register").then_some(alice.token.as_str());
        let reply = server.request(method.clone(), &path, token, body).await;
        assert_eq!(
            reply.status.as_u16(),
            status,
            "{method} {path}: {}",
            reply.body
        );
        assert_eq!(reply.code(), code, "{method} {path}: {}", reply.body);
    }

    // Syntax errors and a non-JSON content type.
    let http = reqwest::Client::new();
    for (content_type, body) in [
        ("application/json", "{\"text\": "),
        ("application/json", "not json"),
        ("text/plain", "{}"),
    ] {
        let response = http
            .post(format!("{}/v1/messages", server.base_url))
            .bearer_auth(&alice.token)
            .header("content-type", content_type)
            .body(body)
            .send()
            .await
            .expect("send");
        assert_eq!(response.status().as_u16(), 400, "{content_type} {body}");
        let envelope: Value = response.json().await.expect("json");
        assert_eq!(envelope["error"]["code"], "invalid_json");
    }
    assert_eq!(
        server.visible_state(&[&alice, &bob]).await,
        before,
        "nothing was written"
    );
}
