//! The runtime under faults, over real HTTP and PostgreSQL: lost responses
//! and retried finishes, clients that vanish mid-request, and a LISTEN
//! connection that dies. (Lease writes that wait on row locks are the
//! store's tests: relayger-store/tests/locks.rs.)

mod finishes;
mod listen;
mod vanished_clients;

use crate::common;

use std::time::{Duration, Instant};

use common::{Reply, TestServer, User, next_frame};
use diesel::QueryableByName;
use diesel::sql_types::Bool;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use relayger_store::listen::ListenOptions;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

/// A person and an agent who are contacts, and the agent's runtime.
struct Bot {
    base: common::bot::Bot,
    asker: User,
    room: String,
    runtime: String,
}

impl Bot {
    /// `GET path` as the agent, expecting success.
    async fn agent_get(&self, path: &str) -> Value {
        self.base
            .server
            .get(path, &self.base.agent.token)
            .await
            .ok()
    }

    async fn start(policy: Value) -> Bot {
        Bot::on(TestServer::start().await, policy).await
    }

    async fn on(server: TestServer, policy: Value) -> Bot {
        let base = common::bot::Bot::on(server).await;
        let (asker, room) = base.contact("asker").await;
        let runtime = base.runtime("faults", "now", policy).await;
        Bot {
            base,
            asker,
            room,
            runtime,
        }
    }

    async fn ask(&self, text: &str) -> String {
        self.base.ask(&self.asker, &self.room, text).await
    }

    /// One claim for at most one job: the response body.
    async fn claim(&self) -> Value {
        self.base.claim(&self.runtime, 1).await.ok()
    }

    async fn claim_one(&self) -> Value {
        let body = self.claim().await;
        assert_eq!(body["jobs"].as_array().expect("jobs").len(), 1, "{body}");
        body["jobs"][0].clone()
    }

    /// Claims one job, waiting out a retry backoff (bounded).
    async fn claim_after_backoff(&self) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let body = self.claim().await;
            if let Some(job) = body["jobs"]
                .as_array()
                .and_then(|jobs| <[Value]>::first(jobs))
            {
                return job.clone();
            }
            assert!(Instant::now() < deadline, "nothing to claim: {body}");
            // The backoff is a time, not an event: wait a little of it out.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn finish_path(&self, job: &Value) -> String {
        format!(
            "/v1/runtimes/{}/jobs/{}/finish",
            self.runtime,
            job["jobId"].as_str().expect("job id")
        )
    }

    fn finish_body(job: &Value, result: Value) -> Value {
        json!({"owner": job["owner"], "version": job["version"], "result": result})
    }

    async fn finish(&self, job: &Value, result: Value) -> Reply {
        self.base
            .server
            .post(
                &self.finish_path(job),
                &self.base.agent.token,
                Bot::finish_body(job, result),
            )
            .await
    }
}

/// A second, raw connection to the server's database (locks held by a test).
async fn execute(conn: &mut AsyncPgConnection, sql: &str) {
    diesel::sql_query(sql)
        .execute(conn)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

#[derive(QueryableByName)]
struct Flag {
    #[diesel(sql_type = Bool)]
    flag: bool,
}

async fn query_flag(conn: &mut AsyncPgConnection, sql: &str) -> bool {
    let row: Flag = diesel::sql_query(sql)
        .get_result(conn)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    row.flag
}

/// Waits (bounded) until `sql`, a boolean query named `flag`, holds.
async fn wait_for(conn: &mut AsyncPgConnection, what: &str, sql: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !query_flag(conn, sql).await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Some other backend of this database waits on a lock.
const SOMEONE_WAITS_ON_A_LOCK: &str = "SELECT EXISTS (SELECT 1 FROM pg_stat_activity \
     WHERE datname = current_database() AND pid <> pg_backend_pid() \
     AND wait_event_type = 'Lock') AS flag";

/// A raw connection that has seen another backend wait on a lock (`what`
/// names the wait, for the timeout's message).
async fn watch_until_someone_waits(server: &TestServer, what: &str) -> AsyncPgConnection {
    let mut watcher = server.raw_connection().await;
    wait_for(&mut watcher, what, SOMEONE_WAITS_ON_A_LOCK).await;
    watcher
}

/// No backend of this database waits on a lock.
const NOBODY_WAITS_ON_A_LOCK: &str = "SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity \
     WHERE datname = current_database() AND pid <> pg_backend_pid() \
     AND wait_event_type = 'Lock') AS flag";
