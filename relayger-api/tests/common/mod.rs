//! An in-process server on a real socket and a real PostgreSQL database, and
//! a small HTTP client for the tests.

#![allow(dead_code, unreachable_pub)]

pub mod bot;

use std::time::Duration;

use base64::Engine as _;
use relayger_api::{ApiConfig, AppState, Registration};
use relayger_store::{PoolOptions, Store};
use relayger_testdb::TestDatabase;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

pub struct TestServer {
    pub base_url: String,
    pub db: TestDatabase,
    shutdown: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
    http: reqwest::Client,
}

/// A registered identity as the tests use it.
#[derive(Debug, Clone)]
pub struct User {
    pub id: String,
    pub number: String,
    pub token: String,
    pub token_id: String,
}

pub struct Reply {
    pub status: StatusCode,
    pub body: Value,
    pub headers: reqwest::header::HeaderMap,
}

impl Reply {
    pub fn code(&self) -> &str {
        self.body["error"]["code"].as_str().unwrap_or("")
    }

    #[track_caller]
    pub fn ok(self) -> Value {
        assert!(self.status.is_success(), "{}: {}", self.status, self.body);
        self.body
    }

    #[track_caller]
    pub fn err(&self, status: u16, code: &str) {
        assert_eq!(self.status.as_u16(), status, "{}", self.body);
        assert_eq!(self.code(), code, "{}", self.body);
        assert!(
            self.body["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty())
        );
    }
}

/// Serves `state` on a fresh local port until the token is cancelled, once
/// it listens: its base URL, the token and the serving task.
async fn serve(state: AppState) -> (String, CancellationToken, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base_url = format!("http://{}", listener.local_addr().expect("addr"));
    let shutdown = CancellationToken::new();
    let stop = shutdown.clone();
    let ready = state.clone();
    let task = tokio::spawn(async move {
        relayger_api::serve(listener, state, async move { stop.cancelled().await })
            .await
            .expect("serve");
    });
    ready.wait_until_listening().await;
    (base_url, shutdown, task)
}

impl TestServer {
    pub async fn start() -> TestServer {
        Self::start_with(Registration::Open).await
    }

    /// A fresh server and `users` (each a name and a kind), registered in
    /// order: the opening of most tests.
    pub async fn with_users<const N: usize>(users: [(&str, &str); N]) -> (TestServer, [User; N]) {
        let server = Self::start().await;
        let registered = server.register_all(users).await;
        (server, registered)
    }

    pub async fn start_with(registration: Registration) -> TestServer {
        Self::start_config(ApiConfig {
            registration,
            ..ApiConfig::default()
        })
        .await
    }

    /// A server with a short lease (milliseconds).
    pub async fn start_with_lease(lease_ms: u64) -> TestServer {
        Self::start_config(ApiConfig {
            lease_ms,
            ..ApiConfig::default()
        })
        .await
    }

    pub async fn start_config(config: ApiConfig) -> TestServer {
        Self::start_tuned(config, PoolOptions::default()).await
    }

    /// A server with its own settings and connection pool sizing.
    pub async fn start_tuned(config: ApiConfig, pool: PoolOptions) -> TestServer {
        let db = TestDatabase::create().await;
        let store = Store::connect(db.url(), pool)
            .await
            .expect("connect to the test database");
        let (base_url, shutdown, task) = serve(AppState::new(store, config)).await;
        TestServer {
            base_url,
            db,
            shutdown,
            task: Some(task),
            http: reqwest::Client::new(),
        }
    }

    /// A second server process-equivalent on the same database.
    pub async fn sibling(&self) -> (String, CancellationToken) {
        let store = self.db.store().await;
        let (base_url, shutdown, _task) = serve(AppState::new(store, ApiConfig::default())).await;
        (base_url, shutdown)
    }

    pub async fn request(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> Reply {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base_url));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.expect("request");
        let status = response.status();
        let headers = response.headers().clone();
        let text = response.text().await.expect("body");
        let body = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("non-JSON body ({e}): {text}"))
        };
        Reply {
            status,
            body,
            headers,
        }
    }

    /// The raw body bytes of a GET (for byte-budget checks).
    pub async fn get_raw(&self, path: &str, token: &str) -> (StatusCode, String) {
        let response = self
            .http
            .get(format!("{}{path}", self.base_url))
            .bearer_auth(token)
            .send()
            .await
            .expect("request");
        let status = response.status();
        (status, response.text().await.expect("body"))
    }

    pub async fn get(&self, path: &str, token: &str) -> Reply {
        self.request(Method::GET, path, Some(token), None).await
    }

    pub async fn post(&self, path: &str, token: &str, body: Value) -> Reply {
        self.request(Method::POST, path, Some(token), Some(body))
            .await
    }

    pub async fn delete(&self, path: &str, token: &str) -> Reply {
        self.request(Method::DELETE, path, Some(token), None).await
    }

    /// Registers `users` (each a name and a kind) in order.
    pub async fn register_all<const N: usize>(&self, users: [(&str, &str); N]) -> [User; N] {
        let mut registered = Vec::with_capacity(N);
        for (name, kind) in users {
            registered.push(self.register(name, kind).await);
        }
        let Ok(registered) = registered.try_into() else {
            unreachable!("one user per entry")
        };
        registered
    }

    pub async fn register(&self, name: &str, kind: &str) -> User {
        self.register_with_key(name, kind, &public_key()).await
    }

    pub async fn register_with_key(&self, name: &str, kind: &str, key: &str) -> User {
        let body = self
            .request(
                Method::POST,
                "/v1/register",
                None,
                Some(json!({"name": name, "kind": kind, "publicKey": key})),
            )
            .await
            .ok();
        User {
            id: body["identity"]["id"].as_str().expect("id").to_owned(),
            number: body["identity"]["number"]
                .as_str()
                .expect("number")
                .to_owned(),
            token: body["token"]["secret"].as_str().expect("secret").to_owned(),
            token_id: body["token"]["id"].as_str().expect("token id").to_owned(),
        }
    }

    /// Registers `a` and `b` (each a name and a kind); `a` asks `b`, who
    /// accepts. Both users and their direct room's id.
    pub async fn befriended_pair(&self, a: (&str, &str), b: (&str, &str)) -> (User, User, String) {
        let a = self.register(a.0, a.1).await;
        let b = self.register(b.0, b.1).await;
        let room = self.befriend(&a, &b).await;
        (a, b, room)
    }

    /// Makes `a` and `b` contacts; returns their direct room id.
    pub async fn befriend(&self, a: &User, b: &User) -> String {
        self.ask_contact(a, b).await.ok();
        let contact = self.answer_contact(b, a, "accept").await.ok();
        contact["roomId"].as_str().expect("room").to_owned()
    }

    /// `from` asks `to` to become a contact.
    pub async fn ask_contact(&self, from: &User, to: &User) -> Reply {
        self.post(
            "/v1/contacts/requests",
            &from.token,
            json!({"number": to.number}),
        )
        .await
    }

    /// `who` answers `requester`'s contact request (`accept` or `decline`).
    pub async fn answer_contact(&self, who: &User, requester: &User, answer: &str) -> Reply {
        let path = format!("/v1/contacts/requests/{}/{answer}", requester.number);
        self.post(&path, &who.token, json!({})).await
    }

    pub async fn send(&self, from: &User, body: Value) -> Value {
        self.try_send(from, body).await.ok()
    }

    /// `POST /v1/agents` with the bearer `token`: an agent named `name`.
    pub async fn create_agent(&self, token: &str, name: &str) -> Reply {
        let body = json!({"name": name, "publicKey": public_key()});
        self.post("/v1/agents", token, body).await
    }

    /// `creator` creates a group room named `name` with `members` (a JSON
    /// array of identity numbers).
    pub async fn create_room(&self, creator: &User, name: &str, members: Value) -> Reply {
        let body = json!({"name": name, "members": members});
        self.post("/v1/rooms", &creator.token, body).await
    }

    /// `who` blocks `whom`.
    pub async fn block(&self, who: &User, whom: &User) -> Reply {
        let path = format!("/v1/contacts/{}/block", whom.number);
        self.post(&path, &who.token, json!({})).await
    }

    /// `who` adds `member` to the group `room`.
    pub async fn add_member(&self, who: &User, room: &str, member: &User) -> Reply {
        let path = format!("/v1/rooms/{room}/members");
        self.post(&path, &who.token, json!({"number": member.number}))
            .await
    }

    /// `POST /v1/messages` as `from`, for a test that expects a refusal.
    pub async fn try_send(&self, from: &User, body: Value) -> Reply {
        self.post("/v1/messages", &from.token, body).await
    }

    /// The room's last seq as its member `member` reads it: what a refused
    /// send must not move. Seqs are gapless, so it is also how many
    /// messages the room holds.
    pub async fn last_seq(&self, member: &User, room: &str) -> i64 {
        let view = self
            .get(&format!("/v1/rooms/{room}"), &member.token)
            .await
            .ok();
        view["lastSeq"].as_i64().expect("lastSeq")
    }

    /// How many messages the rooms `member` is in hold, read over HTTP: the
    /// sum of their last seqs (seqs are gapless). For an agent these are
    /// all the rooms its replies can go to.
    pub async fn messages_in_rooms_of(&self, member: &User) -> i64 {
        let list = self.get("/v1/rooms?limit=100", &member.token).await.ok();
        assert!(list["next"].is_null(), "more rooms than one page: {list}");
        list["rooms"]
            .as_array()
            .expect("rooms")
            .iter()
            .map(|room| room["lastSeq"].as_i64().expect("lastSeq"))
            .sum()
    }

    /// Everything `users` can read of their own state over HTTP: who they
    /// are, their tokens, contacts, contact requests, rooms (with members
    /// and last seqs), inboxes (their read cursors) and runtimes; and
    /// whether an identity newer than all of them exists. What a refused
    /// request must leave as it was.
    pub async fn visible_state(&self, users: &[&User]) -> Vec<String> {
        let mut state = Vec::new();
        for user in users {
            for path in [
                "/v1/me",
                "/v1/tokens?limit=500",
                "/v1/contacts",
                "/v1/contacts/requests?limit=500",
                "/v1/rooms?limit=100",
                "/v1/inbox?limit=500",
                "/v1/runtimes",
            ] {
                let reply = self.get(path, &user.token).await;
                state.push(format!(
                    "{path} as {}: {} {}",
                    user.number, reply.status, reply.body
                ));
            }
        }
        let newest = users
            .iter()
            .max_by_key(|user| user.number.parse::<u64>().expect("a number"))
            .expect("a user");
        let next = next_number(&newest.number);
        let taken = self.number_taken(&newest.token, &next).await;
        state.push(format!("identity {next} taken: {taken}"));
        state
    }

    /// Whether an identity holds `number`, as `GET /v1/identities/{number}`
    /// tells the holder of `token`.
    pub async fn number_taken(&self, token: &str, number: &str) -> bool {
        let reply = self.get(&format!("/v1/identities/{number}"), token).await;
        if reply.status == StatusCode::NOT_FOUND {
            reply.err(404, "not_found");
            return false;
        }
        assert_eq!(reply.ok()["number"], number);
        true
    }

    /// A connection of its own to the test database, for the fault tests
    /// that hold row locks or watch the database's sessions.
    pub async fn raw_connection(&self) -> diesel_async::AsyncPgConnection {
        use diesel_async::{AsyncConnection, AsyncPgConnection};
        AsyncPgConnection::establish(self.db.url())
            .await
            .expect("connect to the test database")
    }

    /// A connection holding, until its COMMIT, the locks `lock_sql` takes.
    pub async fn hold_lock(&self, lock_sql: &str) -> diesel_async::AsyncPgConnection {
        use diesel_async::SimpleAsyncConnection;
        let mut holder = self.raw_connection().await;
        holder
            .batch_execute(&format!("BEGIN; {lock_sql}"))
            .await
            .unwrap_or_else(|e| panic!("{lock_sql}: {e}"));
        holder
    }

    pub fn ws_url(&self) -> String {
        self.base_url.replacen("http://", "ws://", 1)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.shutdown.cancel();
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// The identity number handed out after `number`: numbers come from one
/// sequence, in order, so the identities a server holds are the numbers up
/// to the newest one, and an identity stored by anything shows as the next
/// number taken.
pub fn next_number(number: &str) -> String {
    (number.parse::<u64>().expect("a number") + 1).to_string()
}

/// The first identity number a server hands out.
pub fn first_number() -> String {
    relayger_core::ids::IdentityNumber::from_sequence(1)
        .expect("the first number")
        .as_str()
        .to_owned()
}

/// A random-looking but valid X25519 public key (tests that do not seal).
pub fn public_key() -> String {
    let bytes: Vec<u8> = uuid::Uuid::new_v4()
        .as_bytes()
        .iter()
        .chain(uuid::Uuid::new_v4().as_bytes())
        .copied()
        .collect();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Waits for a WebSocket text frame, failing after `timeout`.
pub async fn next_frame<S>(socket: &mut S, timeout: Duration) -> Option<String>
where
    S: futures_util::Stream<
            Item = Result<
                tokio_tungstenite::tungstenite::Message,
                tokio_tungstenite::tungstenite::Error,
            >,
        > + Unpin,
{
    use futures_util::StreamExt;
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let item = tokio::time::timeout_at(deadline, socket.next())
            .await
            .ok()??;
        match item.ok()? {
            tokio_tungstenite::tungstenite::Message::Text(text) => return Some(text.to_string()),
            tokio_tungstenite::tungstenite::Message::Close(_) => return None,
            _ => {}
        }
    }
}

pub type WsStream =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A refused WebSocket upgrade: the HTTP status and body the server answered.
#[derive(Debug)]
pub struct RefusedUpgrade {
    pub status: u16,
    pub body: String,
}

impl TestServer {
    /// Tries a WebSocket upgrade on `path` with an optional bearer token;
    /// a refusal comes back with the server's status and body.
    pub async fn ws_connect(
        &self,
        path: &str,
        token: Option<&str>,
    ) -> Result<WsStream, RefusedUpgrade> {
        use tokio_tungstenite::tungstenite::Error;
        use tokio_tungstenite::tungstenite::client::IntoClientRequest;
        let mut request = format!("{}{path}", self.ws_url())
            .into_client_request()
            .expect("request");
        if let Some(token) = token {
            request.headers_mut().insert(
                "authorization",
                format!("Bearer {token}").parse().expect("header"),
            );
        }
        match tokio_tungstenite::connect_async(request).await {
            Ok((socket, _)) => Ok(socket),
            Err(Error::Http(response)) => Err(RefusedUpgrade {
                status: response.status().as_u16(),
                body: String::from_utf8_lossy(response.body().as_deref().unwrap_or_default())
                    .into_owned(),
            }),
            Err(other) => panic!("upgrade failed without an HTTP answer: {other}"),
        }
    }
}

impl TestServer {
    /// `POST /v1/runtimes/{runtime}/claim` as the agent holding `token`.
    pub async fn claim_jobs(&self, token: &str, runtime: &str, max_jobs: u32) -> Reply {
        self.post(
            &format!("/v1/runtimes/{runtime}/claim"),
            token,
            json!({"maxJobs": max_jobs}),
        )
        .await
    }

    /// Finishes a claimed `job` (as the claim answered it) with `result`.
    pub async fn finish_job(
        &self,
        token: &str,
        runtime: &str,
        job: &Value,
        result: Value,
    ) -> Reply {
        self.post(
            &format!(
                "/v1/runtimes/{runtime}/jobs/{}/finish",
                job["jobId"].as_str().expect("id")
            ),
            token,
            json!({"owner": job["owner"], "version": job["version"], "result": result}),
        )
        .await
    }
}
