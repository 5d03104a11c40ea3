//! Bounded sockets: frame and message size, sockets per token, token re-checks.

use super::*;

/// A frame whose header announces more than 1 KiB closes the socket at
/// once, before its payload is sent; so does a message over 1 KiB sent in
/// small frames.
#[tokio::test(flavor = "multi_thread")]
async fn oversized_socket_frames_and_messages_close_the_socket() {
    use futures_util::SinkExt;
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
    use tokio_tungstenite::tungstenite::protocol::frame::{Frame, FrameHeader};
    let (server, [alice]) = TestServer::with_users([("alice", "person")]).await;

    let mut socket = server
        .ws_connect("/v1/socket", Some(&alice.token))
        .await
        .expect("socket");
    // A binary frame of 1 MB is announced; only its first bytes follow.
    let mut header = vec![0x82, 0x80 | 127];
    header.extend_from_slice(&1_000_000u64.to_be_bytes());
    header.extend_from_slice(&[1, 2, 3, 4]);
    header.extend_from_slice(&[0; 16]);
    match socket.get_mut() {
        tokio_tungstenite::MaybeTlsStream::Plain(stream) => {
            stream.write_all(&header).await.expect("write");
        }
        _ => unreachable!("the test server is plain TCP"),
    }
    assert!(
        closes_within(&mut socket, Duration::from_secs(5)).await,
        "a 1 MB frame header closes the socket"
    );

    let mut socket = server
        .ws_connect("/v1/socket", Some(&alice.token))
        .await
        .expect("socket");
    for i in 0..4 {
        let header = FrameHeader {
            is_final: i == 3,
            opcode: if i == 0 {
                OpCode::Data(Data::Binary)
            } else {
                OpCode::Data(Data::Continue)
            },
            ..FrameHeader::default()
        };
        let frame = Frame::from_payload(header, vec![b'x'; 1000].into());
        if socket.send(Message::Frame(frame)).await.is_err() {
            break;
        }
    }
    assert!(
        closes_within(&mut socket, Duration::from_secs(5)).await,
        "a 4 KB message in 1 KB frames closes the socket"
    );
}

/// One token holds at most `max_sockets_per_token` sockets; the next
/// upgrade is 429 `rate_limited`, another token still connects, and a
/// closed socket frees its place.
#[tokio::test(flavor = "multi_thread")]
async fn sockets_per_token_are_capped() {
    const CAP: usize = 3;
    let server = TestServer::start_config(ApiConfig {
        max_sockets_per_token: CAP,
        ..ApiConfig::default()
    })
    .await;
    let alice = server.register("alice", "person").await;
    let bob = server.register("bob", "person").await;
    let mut open = Vec::new();
    for _ in 0..CAP {
        open.push(
            server
                .ws_connect("/v1/socket", Some(&alice.token))
                .await
                .expect("socket"),
        );
    }
    let refused = server
        .ws_connect("/v1/socket", Some(&alice.token))
        .await
        .expect_err("past the cap");
    assert_eq!(refused.status, 429, "{}", refused.body);
    assert!(refused.body.contains("rate_limited"), "{}", refused.body);
    server
        .ws_connect("/v1/socket", Some(&bob.token))
        .await
        .expect("another token connects");
    let mut first = open.remove(0);
    first.close(None).await.expect("close");
    assert!(closes_within(&mut first, Duration::from_secs(5)).await);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match server.ws_connect("/v1/socket", Some(&alice.token)).await {
            Ok(_) => break,
            Err(refused) => {
                assert_eq!(refused.status, 429, "{}", refused.body);
                assert!(Instant::now() < deadline, "the place was never freed");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

/// An open socket whose token re-check cannot reach the database (every
/// pool connection is held) closes instead of staying open on trust.
#[tokio::test(flavor = "multi_thread")]
async fn a_socket_whose_token_check_cannot_reach_the_database_closes() {
    use diesel_async::SimpleAsyncConnection;
    let server = TestServer::start_tuned(
        ApiConfig {
            socket_check_interval: Duration::from_millis(200),
            ..ApiConfig::default()
        },
        PoolOptions {
            max_connections: 1,
            acquire_timeout: Duration::from_millis(200),
        },
    )
    .await;
    let (alice, bob, room) = server
        .befriended_pair(("alice", "person"), ("bob", "person"))
        .await;
    let mut socket = server
        .ws_connect("/v1/socket", Some(&alice.token))
        .await
        .expect("socket");
    assert!(
        !closes_within(&mut socket, Duration::from_millis(700)).await,
        "open while the database answers"
    );

    // Hold the room's row lock, then a send into the room holds the pool's
    // only connection while it waits for the lock.
    let mut holder = server.raw_connection().await;
    holder
        .batch_execute(&format!(
            "BEGIN; SELECT 1 FROM rooms WHERE id = '{room}' FOR UPDATE"
        ))
        .await
        .expect("lock the room");
    let url = format!("{}/v1/messages", server.base_url);
    let token = bob.token.clone();
    let send = tokio::spawn(async move {
        reqwest::Client::new()
            .post(url)
            .bearer_auth(token)
            .json(&json!({"roomId": room, "text": "blocked"}))
            .send()
            .await
            .map(|r| r.status().as_u16())
    });
    assert!(
        closes_within(&mut socket, Duration::from_secs(10)).await,
        "the socket closes when its token cannot be checked"
    );
    holder.batch_execute("ROLLBACK").await.expect("unlock");
    assert_eq!(send.await.expect("send").expect("answered"), 201);
}
