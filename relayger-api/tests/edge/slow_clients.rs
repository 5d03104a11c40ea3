//! Slow and stalled clients: stalled bodies, timeouts, the connection cap, bodies over the limit.

use super::*;

/// 600 connections send the headers of a 500 KB body, a few bytes of it,
/// and stall. They hold connections, not in-flight slots (512 by default):
/// a normal request, a write and `/healthz` all answer within a second
/// while every one of them is still open.
#[tokio::test(flavor = "multi_thread")]
async fn six_hundred_stalled_bodies_leave_normal_requests_answering_within_a_second() {
    const STALLED: usize = 600;
    let server = TestServer::start().await;
    let (alice, bob, room) = server
        .befriended_pair(("alice", "person"), ("bob", "person"))
        .await;
    let address = address(&server);
    let head = stalled_send_head(&address, &alice.token);
    let mut opening = Vec::new();
    for _ in 0..STALLED {
        let (address, head) = (address.clone(), head.clone());
        opening.push(tokio::spawn(async move { stall(&address, &head).await }));
    }
    let mut stalled = Vec::new();
    for task in opening {
        stalled.push(task.await.expect("stalled connection"));
    }
    let health = wait_for_clients(&server, |c| {
        c["readingBodies"].as_u64().unwrap_or(0) >= STALLED as u64
    })
    .await;
    assert!(
        health["clients"]["connections"].as_u64().unwrap_or(0) >= STALLED as u64,
        "{health}"
    );

    let started = Instant::now();
    let me = server.get("/v1/me", &bob.token).await.ok();
    let read_ms = started.elapsed().as_millis();
    assert_eq!(me["number"], bob.number.as_str());
    let started = Instant::now();
    server
        .send(&bob, json!({"roomId": room, "text": "still answering"}))
        .await;
    let write_ms = started.elapsed().as_millis();
    let started = Instant::now();
    let health = reqwest::get(format!("{}/healthz", server.base_url))
        .await
        .expect("healthz");
    assert_eq!(health.status(), 200);
    let health_ms = started.elapsed().as_millis();
    // For the record (`--no-capture`): the figure in SECURITY.md.
    println!(
        "with {STALLED} stalled bodies: GET /v1/me {read_ms} ms, send {write_ms} ms, /healthz {health_ms} ms"
    );
    for ms in [read_ms, write_ms, health_ms] {
        assert!(
            ms < 1000,
            "answered in {ms} ms with {STALLED} stalled bodies"
        );
    }
    // They were all still stalled while the requests above were answered.
    let clients = wait_for_clients(&server, |_| true).await;
    assert!(
        clients["clients"]["readingBodies"].as_u64().unwrap_or(0) >= STALLED as u64,
        "{clients}"
    );
    drop(stalled);
}

/// A body that stops arriving is answered 408 `request_timeout` once the
/// body timeout is up, and nothing is stored; headers that never end close
/// the connection once the header timeout is up.
#[tokio::test(flavor = "multi_thread")]
async fn slow_headers_and_bodies_time_out() {
    let server = TestServer::start_config(ApiConfig {
        header_read_timeout: Duration::from_millis(300),
        body_read_timeout: Duration::from_millis(300),
        ..ApiConfig::default()
    })
    .await;
    let alice = server.register("alice", "person").await;
    let address = address(&server);

    let mut body = stall(&address, &stalled_send_head(&address, &alice.token)).await;
    let answer = read_until_closed(&mut body, Duration::from_secs(10)).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains(r#""code":"request_timeout""#), "{answer}");
    // Nothing stored: Alice, alone on the server, has no message and no room.
    let inbox = server.get("/v1/inbox", &alice.token).await.ok();
    assert_eq!(inbox["rooms"], json!([]), "{inbox}");
    let rooms = server.get("/v1/rooms", &alice.token).await.ok();
    assert_eq!(rooms["rooms"], json!([]), "{rooms}");

    let mut headers = stall(
        &address,
        &format!("GET /v1/me HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer"),
    )
    .await;
    let answer = read_until_closed(&mut headers, Duration::from_secs(10)).await;
    assert!(!answer.contains("200 OK"), "{answer}");
}

/// Past `max_connections` a new connection is closed at once; when the
/// stalled ones go, the server takes connections again.
#[tokio::test(flavor = "multi_thread")]
async fn connections_past_the_cap_are_closed_at_once() {
    const CAP: usize = 4;
    let server = TestServer::start_config(ApiConfig {
        max_connections: CAP,
        ..ApiConfig::default()
    })
    .await;
    let alice = server.register("alice", "person").await;
    let address = address(&server);
    let head = stalled_send_head(&address, &alice.token);
    let mut stalled = Vec::new();
    for _ in 0..CAP {
        stalled.push(stall(&address, &head).await);
    }
    let answered = probe(&address).await;
    assert!(answered.is_empty(), "at the cap: {answered}");
    drop(stalled);
    wait_for_probe(&address, false).await;
}

/// A body somewhat over the 512 KiB limit is read to its end and answered
/// 413 `payload_too_large`: the client gets the envelope, not a reset
/// connection, also with many at once.
#[tokio::test(flavor = "multi_thread")]
async fn a_body_over_the_limit_is_answered_413_not_reset() {
    let server = TestServer::start().await;
    let (alice, _, room) = server
        .befriended_pair(("alice", "person"), ("bob", "person"))
        .await;
    let body = json!({"roomId": room, "text": "x".repeat(600 * 1024)});
    let mut sends = Vec::new();
    for _ in 0..20 {
        let (url, token, body) = (
            format!("{}/v1/messages", server.base_url),
            alice.token.clone(),
            body.clone(),
        );
        sends.push(tokio::spawn(async move {
            let response = reqwest::Client::new()
                .post(url)
                .bearer_auth(token)
                .json(&body)
                .send()
                .await
                .expect("an answer, not a reset");
            let status = response.status().as_u16();
            let body: Value = response.json().await.expect("the envelope");
            (status, body)
        }));
    }
    for send in sends {
        let (status, body) = send.await.expect("join");
        assert_eq!(status, 413, "{body}");
        assert_eq!(body["error"]["code"], "payload_too_large", "{body}");
    }
}
