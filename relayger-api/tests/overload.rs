//! Overload: with every database connection busy the server sheds requests
//! (429 before admission, 503 when no connection frees up in time) instead
//! of queueing without bound, keeps answering `/healthz`, loses nothing that
//! it accepted and writes nothing that it shed. Request bodies and WebSocket
//! messages are size-limited.

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::TestServer;
use diesel_async::{AsyncPgConnection, RunQueryDsl, SimpleAsyncConnection};
use futures_util::{SinkExt, StreamExt};
use relayger_api::ApiConfig;
use relayger_store::PoolOptions;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

const SENDERS: usize = 12;
const POOL: usize = 2;
const IN_FLIGHT: usize = 6;

#[derive(diesel::QueryableByName)]
struct Count {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    n: i64,
}

/// Backends of this test's database waiting for a row lock.
async fn lock_waiters(conn: &mut AsyncPgConnection, database: &str) -> i64 {
    diesel::sql_query(
        "SELECT count(*) AS n FROM pg_stat_activity \
         WHERE datname = $1 AND wait_event_type = 'Lock'",
    )
    .bind::<diesel::sql_types::Text, _>(database)
    .get_result::<Count>(conn)
    .await
    .expect("pg_stat_activity")
    .n
}

#[tokio::test(flavor = "multi_thread")]
async fn an_exhausted_pool_sheds_load_keeps_healthz_answering_and_loses_nothing() {
    let server = TestServer::start_tuned(
        ApiConfig {
            max_in_flight: IN_FLIGHT,
            ..ApiConfig::default()
        },
        PoolOptions {
            max_connections: POOL,
            acquire_timeout: Duration::from_millis(300),
        },
    )
    .await;
    let (alice, bob, room) = server
        .befriended_pair(("alice", "agent"), ("bob", "agent"))
        .await;

    // Hold the room's row lock: every send into the room now keeps its
    // database connection until we let go.
    let mut holder = server
        .hold_lock(&format!(
            "SELECT 1 FROM rooms WHERE id = '{room}' FOR UPDATE"
        ))
        .await;

    let (done, mut finished) = tokio::sync::mpsc::unbounded_channel();
    for i in 0..SENDERS {
        let http = reqwest::Client::new();
        let url = format!("{}/v1/messages", server.base_url);
        let token = alice.token.clone();
        let body = json!({"roomId": room, "text": format!("load {i}"), "ask": true});
        let done = done.clone();
        tokio::spawn(async move {
            let response = http
                .post(url)
                .bearer_auth(token)
                .json(&body)
                .send()
                .await
                .expect("the server answers");
            let status = response.status().as_u16();
            let retry_after = response
                .headers()
                .get("retry-after")
                .map(|v| v.to_str().unwrap_or_default().to_owned());
            let body: Value = response.json().await.expect("a JSON body");
            let _ = done.send((status, retry_after, body));
        });
    }
    drop(done);

    // Wait (on the database's own view) until the senders that got a
    // connection are blocked on the lock and every other one was answered.
    let mut watcher = server.raw_connection().await;
    let mut shed = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        while let Ok(answer) = finished.try_recv() {
            shed.push(answer);
        }
        let blocked = lock_waiters(&mut watcher, server.db.name()).await;
        if usize::try_from(blocked).expect("count") + shed.len() == SENDERS {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "senders neither blocked nor answered: {blocked} blocked, {} answered",
            shed.len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let mut by_status = BTreeMap::new();
    for (status, retry_after, body) in &shed {
        *by_status.entry(*status).or_insert(0) += 1;
        let code = body["error"]["code"].as_str().unwrap_or_default();
        match status {
            429 => assert_eq!(code, "rate_limited", "{body}"),
            503 => assert_eq!(code, "unavailable", "{body}"),
            other => panic!("a request answered {other} while the room was locked: {body}"),
        }
        assert_eq!(retry_after.as_deref(), Some("1"), "Retry-After on {status}");
    }
    assert!(
        by_status.get(&429).is_some_and(|n| *n >= 1),
        "{by_status:?}"
    );
    assert!(
        by_status.get(&503).is_some_and(|n| *n >= 1),
        "{by_status:?}"
    );

    // The pool is exhausted, yet health answers at once and says so.
    let health = tokio::time::timeout(
        Duration::from_secs(2),
        reqwest::get(format!("{}/healthz", server.base_url)),
    )
    .await
    .expect("/healthz answers while the pool is exhausted")
    .expect("health request");
    assert_eq!(health.status().as_u16(), 200);
    let health: Value = health.json().await.expect("health body");
    assert_eq!(health["database"]["status"], "ok", "{health}");
    assert_eq!(health["connections"]["max"], json!(POOL), "{health}");
    assert_eq!(health["connections"]["inUse"], json!(POOL), "{health}");

    // Let go: the blocked senders commit, gapless; the shed ones wrote nothing.
    holder.batch_execute("COMMIT").await.expect("unlock");
    let mut accepted = 0;
    while let Some((status, _, body)) = finished.recv().await {
        assert_eq!(status, 201, "{body}");
        accepted += 1;
    }
    assert_eq!(accepted + shed.len(), SENDERS);
    assert!(accepted >= 1);
    // The room's messages as Bob's inbox shows them (none acknowledged).
    let inbox = server.get("/v1/inbox?limit=500", &bob.token).await.ok();
    let seqs: Vec<i64> = inbox["rooms"]
        .as_array()
        .expect("rooms")
        .iter()
        .filter(|r| r["roomId"] == room.as_str())
        .flat_map(|r| r["messages"].as_array().expect("messages").clone())
        .map(|m| m["seq"].as_i64().expect("seq"))
        .collect();
    let expected: Vec<i64> = (1..=i64::try_from(accepted).expect("count")).collect();
    assert_eq!(seqs, expected, "exactly the accepted messages, gapless");

    // And the server is itself again.
    let after = server
        .send(&alice, json!({"roomId": room, "text": "after the storm"}))
        .await;
    assert_eq!(after["seq"], json!(accepted + 1), "{after}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_websocket_message_over_the_limit_closes_the_socket() {
    let (server, [alice]) = TestServer::with_users([("alice", "agent")]).await;
    let mut request =
        tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(format!(
            "{}/v1/socket",
            server.ws_url()
        ))
        .expect("request");
    request.headers_mut().insert(
        "authorization",
        format!("Bearer {}", alice.token).parse().expect("header"),
    );
    let (mut socket, _) = tokio_tungstenite::connect_async(request)
        .await
        .expect("upgrade");
    // A small message is ignored; the socket stays open and answers pings.
    socket
        .send(Message::Text("hello".into()))
        .await
        .expect("small message");
    socket
        .send(Message::Ping(b"still there".to_vec().into()))
        .await
        .expect("ping");
    let pong = tokio::time::timeout(Duration::from_secs(5), socket.next())
        .await
        .expect("an answer")
        .expect("open")
        .expect("frame");
    assert!(matches!(pong, Message::Pong(_)), "{pong:?}");

    socket
        .send(Message::Text("x".repeat(4096).into()))
        .await
        .expect("send");
    let closed = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match socket.next().await {
                None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return,
                Some(Ok(_)) => {}
            }
        }
    })
    .await;
    assert!(
        closed.is_ok(),
        "the socket stays open after an oversized message"
    );
}
