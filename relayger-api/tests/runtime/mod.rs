//! The runtime over real HTTP and PostgreSQL: registration, claims racing,
//! fencing, idempotent finishes, budgets, active hours, notes, stats.

mod claims;
mod finishes;
mod notes;
mod pacing;
mod scan;

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::{TestServer, User};
use serde_json::{Value, json};

struct Setup {
    server: Arc<TestServer>,
    asker: User,
    agent: User,
    room: String,
}

async fn setup_with(server: TestServer) -> Setup {
    let (asker, agent, room) = server
        .befriended_pair(("asker", "person"), ("agent", "agent"))
        .await;
    Setup {
        server: Arc::new(server),
        asker,
        agent,
        room,
    }
}

async fn setup() -> Setup {
    setup_with(TestServer::start().await).await
}

impl Setup {
    /// `POST /v1/runtimes` as the agent.
    async fn register(&self, body: Value) -> common::Reply {
        self.server
            .post("/v1/runtimes", &self.agent.token, body)
            .await
    }

    async fn runtime(&self, name: &str, policy: Value) -> String {
        let reply = self
            .register(json!({"name": name, "from": "now", "policy": policy}))
            .await
            .ok();
        reply["id"].as_str().expect("id").to_owned()
    }

    /// `GET /v1/runtimes/{runtime}` as the agent.
    async fn inspect(&self, runtime: &str) -> Value {
        self.server
            .get(&format!("/v1/runtimes/{runtime}"), &self.agent.token)
            .await
            .ok()
    }

    /// `POST /v1/runtimes/{runtime}/configure` as the agent.
    async fn configure(&self, runtime: &str, body: Value) -> common::Reply {
        self.server
            .post(
                &format!("/v1/runtimes/{runtime}/configure"),
                &self.agent.token,
                body,
            )
            .await
    }

    /// Configures `runtime` with `policy` at its current version.
    async fn reconfigure(&self, runtime: &str, policy: Value) -> common::Reply {
        let version = self.inspect(runtime).await["version"].clone();
        self.configure(runtime, json!({"version": version, "policy": policy}))
            .await
    }

    /// `POST {job_path}/{action}` (heartbeat, release) as the agent.
    async fn job_action(&self, job_path: &str, action: &str, body: Value) -> common::Reply {
        self.server
            .post(&format!("{job_path}/{action}"), &self.agent.token, body)
            .await
    }

    async fn ask(&self, text: &str) -> String {
        self.server
            .send(
                &self.asker,
                json!({"roomId": self.room, "text": text, "ask": true}),
            )
            .await["messageId"]
            .as_str()
            .expect("id")
            .to_owned()
    }

    async fn claim(&self, runtime: &str, max_jobs: u32) -> common::Reply {
        self.server
            .claim_jobs(&self.agent.token, runtime, max_jobs)
            .await
    }

    /// Claims and asserts nothing came: the body, for its `retryAt`.
    async fn claim_none(&self, runtime: &str) -> Value {
        let body = self.claim(runtime, 1).await.ok();
        assert!(body["jobs"].as_array().expect("jobs").is_empty(), "{body}");
        body
    }

    async fn claim_one(&self, runtime: &str) -> Value {
        let body = self.claim(runtime, 1).await.ok();
        assert_eq!(body["jobs"].as_array().expect("jobs").len(), 1, "{body}");
        body["jobs"][0].clone()
    }

    async fn finish(&self, runtime: &str, job: &Value, result: Value) -> common::Reply {
        self.server
            .finish_job(&self.agent.token, runtime, job, result)
            .await
    }

    async fn replies(&self) -> Vec<Value> {
        let thread = self.server.get("/v1/inbox", &self.asker.token).await.ok();
        thread["rooms"]
            .as_array()
            .expect("rooms")
            .iter()
            .flat_map(|r| r["messages"].as_array().expect("messages").clone())
            .filter(|m| m["byRuntime"] == true)
            .collect()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn registration_reattaches_conflicts_and_limits_at_eight() {
    let s = setup().await;
    let first = s
        .register(json!({"name": "reply-worker", "from": "now"}))
        .await;
    assert_eq!(first.status.as_u16(), 201);
    assert_eq!(first.body["version"], 1);
    assert_eq!(
        first.body["policy"]["maxCallsPerHour"], 60,
        "defaults filled"
    );
    let again = s
        .register(json!({"name": "reply-worker", "from": "now"}))
        .await;
    assert_eq!(again.status.as_u16(), 200);
    assert_eq!(again.body["id"], first.body["id"]);

    let conflict = s
        .register(json!({"name": "reply-worker", "from": "beginning"}))
        .await;
    conflict.err(409, "runtime_configuration_conflict");
    assert_eq!(
        conflict.body["error"]["details"]["from"], "now",
        "the stored configuration is shown"
    );
    s.register(json!({"name": "reply-worker", "from": "now", "policy": {"concurrency": 2}}))
        .await
        .err(409, "runtime_configuration_conflict");

    for i in 1..8 {
        s.register(json!({"name": format!("w{i}")})).await.ok();
    }
    s.register(json!({"name": "ninth"}))
        .await
        .err(409, "runtime_limit");
    // Deleting frees a name.
    let id = first.body["id"].as_str().expect("id");
    s.server
        .delete(&format!("/v1/runtimes/{id}"), &s.agent.token)
        .await
        .ok();
    s.register(json!({"name": "ninth"})).await.ok();
    // A person cannot register a runtime; bad policies name the field.
    s.server
        .post("/v1/runtimes", &s.asker.token, json!({"name": "x"}))
        .await
        .err(403, "forbidden");
    let bad = s
        .register(json!({"name": "y", "policy": {"maxCallsPerHours": 5}}))
        .await;
    assert_eq!(bad.status.as_u16(), 400);
    assert!(
        bad.body["error"]["message"]
            .as_str()
            .expect("message")
            .contains("maxCallsPerHours")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn from_now_skips_history_and_triggers_pick_questions() {
    let s = setup().await;
    s.ask("before the worker").await;
    let runtime = s.runtime("w", json!({})).await;
    let idle = s.claim(&runtime, 1).await.ok();
    assert!(
        idle["jobs"].as_array().expect("jobs").is_empty(),
        "history before --from now is not replayed"
    );
    s.server
        .send(
            &s.asker,
            json!({"roomId": s.room, "text": "report uploaded"}),
        )
        .await;
    let question = s.ask("hello from relayger").await;
    let job = s.claim_one(&runtime).await;
    assert_eq!(job["message"]["messageId"], question.as_str());
    assert_eq!(job["attempt"], 1);
    assert_eq!(job["leaseMs"], 30000);
    assert_eq!(job["handlerTimeoutMs"], 20000);
    assert_eq!(job["version"].as_str().expect("version").len(), 20);

    // A runtime registered from the beginning pages through history.
    let from_start = s
        .register(json!({"name": "historian", "from": "beginning"}))
        .await
        .ok()["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let jobs = s.claim(&from_start, 10).await.ok();
    assert_eq!(
        jobs["jobs"].as_array().expect("jobs").len(),
        1,
        "concurrency 1 caps the claim"
    );
    assert_eq!(jobs["jobs"][0]["message"]["text"], "before the worker");
}

#[tokio::test(flavor = "multi_thread")]
async fn another_identity_cannot_touch_the_runtime() {
    let s = setup().await;
    let runtime = s.runtime("private", json!({})).await;
    let stranger = s.server.register("stranger", "agent").await;
    for path in ["", "/log", "/stats", "/dead-letters"] {
        s.server
            .get(&format!("/v1/runtimes/{runtime}{path}"), &stranger.token)
            .await
            .err(404, "not_found");
        s.server
            .get(&format!("/v1/runtimes/{runtime}{path}"), &s.asker.token)
            .await
            .err(404, "not_found");
    }
    s.server
        .post(
            &format!("/v1/runtimes/{runtime}/claim"),
            &stranger.token,
            json!({}),
        )
        .await
        .err(404, "not_found");
    let read_only = s
        .server
        .post("/v1/tokens", &s.agent.token, json!({"scopes": ["read"]}))
        .await
        .ok();
    s.server
        .post(
            &format!("/v1/runtimes/{runtime}/claim"),
            read_only["secret"].as_str().expect("secret"),
            json!({}),
        )
        .await
        .err(403, "forbidden");
}
