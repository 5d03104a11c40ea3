//! The API edge against hostile clients: room-restricted tokens stay inside
//! their rooms, slow clients cannot starve the server, sockets are bounded.

mod rate_limits;
mod slow_clients;
mod sockets;

use crate::common;

use std::time::{Duration, Instant};

use common::{TestServer, User};
use relayger_api::{ApiConfig, RateLimit};
use relayger_store::PoolOptions;
use reqwest::Method;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

async fn new_token(server: &TestServer, user: &User, body: Value) -> Value {
    server.post("/v1/tokens", &user.token, body).await.ok()
}

fn secret(token: &Value) -> &str {
    token["secret"].as_str().expect("secret")
}

/// A token restricted to one room cannot act on the identity as a whole:
/// configure or delete a runtime (whose policy and notes span every room),
/// take a new runtime slot, create, list or revoke the identity's tokens, or
/// act on contacts. Each is 403 `token_restricted` and changes nothing. A
/// restricted worker still attaches to its runtime and claims its own
/// room's jobs (and only those).
#[tokio::test(flavor = "multi_thread")]
async fn a_room_restricted_token_acts_only_inside_its_rooms() {
    let (server, [agent, inside, outside, stranger]) = TestServer::with_users([
        ("agent", "agent"),
        ("inside", "person"),
        ("outside", "person"),
        ("stranger", "person"),
    ])
    .await;
    let inside_room = server.befriend(&inside, &agent).await;
    let outside_room = server.befriend(&outside, &agent).await;
    let registration = json!({"name": "assistant", "from": "beginning"});
    let runtime = server
        .post("/v1/runtimes", &agent.token, registration.clone())
        .await
        .ok();
    let runtime_id = runtime["id"].as_str().expect("id");
    let restricted = new_token(
        &server,
        &agent,
        json!({"scopes": ["read", "write", "contacts"], "roomIds": [inside_room]}),
    )
    .await;
    let worker = secret(&restricted);
    let spare = new_token(&server, &agent, json!({"scopes": ["read"]})).await;
    for (room, from) in [(&inside_room, &inside), (&outside_room, &outside)] {
        server
            .send(
                from,
                json!({"roomId": room, "text": "question?", "ask": true}),
            )
            .await;
    }

    let runtime_path = format!("/v1/runtimes/{runtime_id}");
    let everyone = [&agent, &inside, &outside, &stranger];
    let before = server.visible_state(&everyone).await;
    let refused: [(Method, String, Option<Value>); 9] = [
        (
            Method::POST,
            format!("{runtime_path}/configure"),
            Some(json!({"version": 1, "policy": {"allowedRooms": [inside_room]}})),
        ),
        (Method::DELETE, runtime_path.clone(), None),
        (
            Method::POST,
            "/v1/runtimes".into(),
            Some(json!({"name": "another", "from": "now"})),
        ),
        (
            Method::POST,
            "/v1/tokens".into(),
            Some(json!({"scopes": ["read"], "roomIds": [inside_room]})),
        ),
        (Method::GET, "/v1/tokens".into(), None),
        (
            Method::DELETE,
            format!("/v1/tokens/{}", spare["id"].as_str().expect("id")),
            None,
        ),
        (
            Method::POST,
            "/v1/contacts/requests".into(),
            Some(json!({"number": stranger.number})),
        ),
        (
            Method::POST,
            format!("/v1/contacts/{}/block", outside.number),
            None,
        ),
        (
            Method::DELETE,
            format!("/v1/contacts/{}", outside.number),
            None,
        ),
    ];
    for (method, path, body) in refused {
        server
            .request(method.clone(), &path, Some(worker), body)
            .await
            .err(403, "token_restricted");
    }
    assert_eq!(
        server.visible_state(&everyone).await,
        before,
        "a refused request changed what they see"
    );
    let inspected = server.get(&runtime_path, &agent.token).await.ok();
    assert_eq!(inspected["version"], 1, "the policy was not configured");

    // The restricted worker attaches to the runtime that exists and claims
    // only its room's question.
    let attached = server.post("/v1/runtimes", worker, registration).await.ok();
    assert_eq!(attached["id"], runtime["id"]);
    let claim = server
        .post(
            &format!("{runtime_path}/claim"),
            worker,
            json!({"maxJobs": 10}),
        )
        .await
        .ok();
    let jobs = claim["jobs"].as_array().expect("jobs");
    assert_eq!(jobs.len(), 1, "{claim}");
    assert_eq!(
        jobs[0]["message"]["conversationId"],
        inside_room.as_str(),
        "{claim}"
    );

    // A restricted token may still revoke itself.
    server
        .delete(
            &format!("/v1/tokens/{}", restricted["id"].as_str().expect("id")),
            worker,
        )
        .await
        .ok();
    server.get("/v1/me", worker).await.err(401, "unauthorized");
}

/// The server's `host:port`.
fn address(server: &TestServer) -> String {
    server.base_url.trim_start_matches("http://").to_owned()
}

/// Opens a connection and sends `head` (request line and headers, maybe
/// the start of a body), then sends nothing more.
async fn stall(address: &str, head: &str) -> TcpStream {
    let mut stream = TcpStream::connect(address).await.expect("connect");
    stream.write_all(head.as_bytes()).await.expect("write");
    stream
}

/// Everything the server writes until it closes the connection, within
/// `within` (a panic if it keeps the connection open longer).
async fn read_until_closed(stream: &mut TcpStream, within: Duration) -> String {
    let mut answer = Vec::new();
    tokio::time::timeout(within, stream.read_to_end(&mut answer))
        .await
        .expect("the server closes the connection in time")
        .ok();
    String::from_utf8_lossy(&answer).into_owned()
}

/// `/healthz`'s view of the clients, polled until `ready` holds (bounded).
async fn wait_for_clients(server: &TestServer, ready: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let health: Value = reqwest::get(format!("{}/healthz", server.base_url))
            .await
            .expect("healthz")
            .json()
            .await
            .expect("JSON");
        if ready(&health["clients"]) {
            return health;
        }
        assert!(
            Instant::now() < deadline,
            "clients never got there: {health}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn stalled_send_head(address: &str, token: &str) -> String {
    format!(
        "POST /v1/messages HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nContent-Length: 512000\r\n\r\n{{\"roomId\":"
    )
}

/// A fresh connection's `GET /healthz` (`Connection: close`): what came
/// back before the server closed it, empty when it was closed at once.
async fn probe(address: &str) -> String {
    let mut probe = TcpStream::connect(address).await.expect("connect");
    // A write may fail on a connection the server already closed.
    let _ = probe
        .write_all(
            format!("GET /healthz HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .await;
    read_until_closed(&mut probe, Duration::from_secs(10)).await
}

/// Polls fresh connections until one is closed at once (`closed`) or
/// answered (`!closed`), within a bound.
async fn wait_for_probe(address: &str, closed: bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let answer = probe(address).await;
        if answer.is_empty() == closed {
            return;
        }
        assert!(Instant::now() < deadline, "probe never {closed}: {answer}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Whether the server ends the socket (close frame, error or end of stream)
/// within `within`; `false` when it is still open then.
async fn closes_within(socket: &mut common::WsStream, within: Duration) -> bool {
    use futures_util::StreamExt;
    use tokio_tungstenite::tungstenite::Message;
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, socket.next()).await {
            Err(_) => return false,
            Ok(None | Some(Err(_)) | Some(Ok(Message::Close(_)))) => return true,
            Ok(Some(Ok(_))) => {}
        }
    }
}

/// With a certificate the server speaks HTTPS itself: a client that trusts
/// the certificate registers and reads over TLS; plain HTTP to the same
/// port gets no answer.
#[tokio::test(flavor = "multi_thread")]
async fn the_server_terminates_tls_with_its_certificate() {
    use relayger_api::{AppState, TlsConfig};
    use relayger_store::Store;
    use relayger_testdb::TestDatabase;
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()])
        .expect("a self-signed certificate");
    let cert_pem = certified.cert.pem();
    let key_pem = certified.key_pair.serialize_pem();
    assert!(TlsConfig::from_pem(cert_pem.as_bytes(), b"not a key").is_err());
    let tls = TlsConfig::from_pem(cert_pem.as_bytes(), key_pem.as_bytes()).expect("TLS config");

    let db = TestDatabase::create().await;
    let store = Store::connect(db.url(), PoolOptions::default())
        .await
        .expect("connect");
    let state = AppState::new(
        store,
        ApiConfig {
            tls: Some(tls),
            ..ApiConfig::default()
        },
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let stop = tokio_util::sync::CancellationToken::new();
    let shutdown = stop.clone();
    let ready = state.clone();
    let server = tokio::spawn(async move {
        relayger_api::serve(listener, state, async move { shutdown.cancelled().await }).await
    });
    ready.wait_until_listening().await;

    let client = reqwest::Client::builder()
        .add_root_certificate(
            reqwest::Certificate::from_pem(cert_pem.as_bytes()).expect("certificate"),
        )
        .resolve("localhost", addr)
        .build()
        .expect("client");
    let base = format!("https://localhost:{}", addr.port());
    let registered: Value = client
        .post(format!("{base}/v1/register"))
        .json(&json!({"name": "alice", "kind": "person", "publicKey": common::public_key()}))
        .send()
        .await
        .expect("register over TLS")
        .json()
        .await
        .expect("JSON");
    let token = registered["token"]["secret"].as_str().expect("secret");
    let me = client
        .get(format!("{base}/v1/me"))
        .bearer_auth(token)
        .send()
        .await
        .expect("me over TLS");
    assert_eq!(me.status(), 200);

    // Plain HTTP on the TLS port: the handshake fails, nothing is served.
    let mut plain = TcpStream::connect(addr).await.expect("connect");
    plain
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await
        .expect("write");
    let answer = read_until_closed(&mut plain, Duration::from_secs(10)).await;
    assert!(!answer.contains("200"), "{answer}");

    stop.cancel();
    server.await.expect("join").expect("serve");
}

/// Low-order X25519 public keys (all zero, one, the order-8 points, p − 1)
/// are refused at registration and for new agents, and nothing is stored:
/// nothing can be sealed to them, so every sealed send to a room holding
/// such an identity would fail.
#[tokio::test(flavor = "multi_thread")]
async fn low_order_public_keys_are_refused_at_registration() {
    use base64::Engine as _;
    let (server, [owner]) = TestServer::with_users([("owner", "person")]).await;
    let hex = |h: &str| -> Vec<u8> {
        (0..h.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&h[i..i + 2], 16).expect("hex"))
            .collect()
    };
    let mut one = [0u8; 32];
    one[0] = 1;
    let low_order = [
        vec![0u8; 32],
        one.to_vec(),
        hex("e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800"),
        hex("5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157"),
        hex("ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f"),
    ];
    for key in low_order {
        let key = base64::engine::general_purpose::STANDARD.encode(key);
        server
            .request(
                Method::POST,
                "/v1/register",
                None,
                Some(json!({"name": "weak", "kind": "person", "publicKey": key})),
            )
            .await
            .err(400, "invalid_argument");
        server
            .post(
                "/v1/agents",
                &owner.token,
                json!({"name": "weak", "publicKey": key}),
            )
            .await
            .err(400, "invalid_argument");
    }
    // Nothing stored: the owner is still the newest identity.
    let after_owner = common::next_number(&owner.number);
    assert!(!server.number_taken(&owner.token, &after_owner).await);
    // A real key still registers.
    server.register("strong", "person").await;
}
