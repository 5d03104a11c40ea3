//! An agent on its own test server, and what its runtime tests do with it:
//! contacts, runtimes, questions, claims and finishes over real HTTP.

use serde_json::{Value, json};

use super::{Reply, TestServer, User};

pub struct Bot {
    pub server: TestServer,
    pub agent: User,
}

impl Bot {
    pub async fn start() -> Bot {
        Bot::on(TestServer::start().await).await
    }

    /// The agent on a server started with other settings.
    pub async fn on(server: TestServer) -> Bot {
        let agent = server.register("agent", "agent").await;
        Bot { server, agent }
    }

    /// A person who is the agent's contact, and their direct room.
    pub async fn contact(&self, name: &str) -> (User, String) {
        let user = self.server.register(name, "person").await;
        let room = self.server.befriend(&user, &self.agent).await;
        (user, room)
    }

    pub async fn runtime(&self, name: &str, from: &str, policy: Value) -> String {
        self.server
            .post(
                "/v1/runtimes",
                &self.agent.token,
                json!({"name": name, "from": from, "policy": policy}),
            )
            .await
            .ok()["id"]
            .as_str()
            .expect("id")
            .to_owned()
    }

    pub async fn ask(&self, from: &User, room: &str, text: &str) -> String {
        self.server
            .send(from, json!({"roomId": room, "text": text, "ask": true}))
            .await["messageId"]
            .as_str()
            .expect("id")
            .to_owned()
    }

    pub async fn claim(&self, runtime: &str, max_jobs: u32) -> Reply {
        self.server
            .claim_jobs(&self.agent.token, runtime, max_jobs)
            .await
    }

    pub async fn finish(&self, runtime: &str, job: &Value) {
        self.server
            .finish_job(&self.agent.token, runtime, job, json!({"reply": "ok"}))
            .await
            .ok();
    }

    /// The runtime as `runtimes inspect` shows it.
    pub async fn inspect(&self, runtime: &str) -> Value {
        self.server
            .get(&format!("/v1/runtimes/{runtime}"), &self.agent.token)
            .await
            .ok()
    }

    /// Replaces the policy at the current configuration version.
    pub async fn configure(&self, runtime: &str, policy: Value) -> Value {
        let version = self.inspect(runtime).await["version"].clone();
        self.server
            .post(
                &format!("/v1/runtimes/{runtime}/configure"),
                &self.agent.token,
                json!({"version": version, "policy": policy}),
            )
            .await
            .ok()
    }

    /// One page of the runtime log, newest first.
    pub async fn log(&self, runtime: &str, limit: Option<u32>) -> Vec<Value> {
        let query = limit.map(|l| format!("?limit={l}")).unwrap_or_default();
        self.server
            .get(
                &format!("/v1/runtimes/{runtime}/log{query}"),
                &self.agent.token,
            )
            .await
            .ok()["records"]
            .as_array()
            .expect("records")
            .clone()
    }
}
