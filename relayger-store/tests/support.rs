//! What the store's tests share: a test database with an agent on it,
//! people who are the agent's contacts, a runtime, questions, claims and
//! finishes, all through `Store`'s own methods; and a connection of the
//! test's own for what only SQL shows (row locks held, lock waits, rows).

#![allow(dead_code, unreachable_pub)]

use std::time::{Duration, Instant};

use diesel::sql_types::{BigInt, Bool};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl, SimpleAsyncConnection};
use relayger_core::ids::IdentityNumber;
use relayger_core::lease::DEFAULT_LEASE_MS;
use relayger_core::policy::Policy;
use relayger_core::wire::{
    ClaimResponse, ClaimedJob, FinishResponse, IdentityKind, JobResult, MessageEnvelope, Runtime,
    StartFrom,
};
use relayger_store::{
    AuthenticatedToken, Caller, MessageBody, NewIdentity, NewMessage, PoolOptions, Store,
    StoreError, secret_hash,
};
use relayger_testdb::TestDatabase;
use uuid::Uuid;

/// How long a test waits for something another task or backend does.
pub const WAIT: Duration = Duration::from_secs(10);

/// A registered identity and its token, as a request would present it.
#[derive(Clone)]
pub struct User(pub AuthenticatedToken);

impl User {
    pub fn id(&self) -> Uuid {
        self.0.identity.id
    }

    pub fn number(&self) -> IdentityNumber {
        self.0.identity.number()
    }

    pub fn caller(&self) -> Caller {
        self.0.caller()
    }
}

/// Registers an identity named `name` (a fixed public key, no invite).
pub async fn register(store: &Store, name: &str, kind: IdentityKind) -> User {
    register_with_key(store, name, kind, [7; 32]).await
}

/// Registers an identity named `name` with the X25519 `public_key`.
pub async fn register_with_key(
    store: &Store,
    name: &str,
    kind: IdentityKind,
    public_key: [u8; 32],
) -> User {
    let (_, token) = store
        .register(
            NewIdentity {
                display_name: name.to_owned(),
                kind,
                public_key,
                owner_id: None,
            },
            None,
            false,
        )
        .await
        .expect("register");
    let (_, authenticated) = store
        .authenticate(&secret_hash(&token.secret))
        .await
        .expect("authenticate")
        .expect("the new token");
    User(authenticated)
}

/// A fresh database, a store on it and an agent registered there.
pub struct Agent {
    pub db: TestDatabase,
    pub store: Store,
    pub agent: User,
}

impl Agent {
    pub async fn start() -> Agent {
        Agent::start_with(PoolOptions::default()).await
    }

    /// The agent on a store with its own pool sizing.
    pub async fn start_with(pool: PoolOptions) -> Agent {
        let db = TestDatabase::create().await;
        let store = Store::connect(db.url(), pool)
            .await
            .expect("connect to the test database");
        let agent = register(&store, "agent", IdentityKind::Agent).await;
        Agent { db, store, agent }
    }

    /// A person who is the agent's contact, and their direct room.
    pub async fn contact(&self, name: &str) -> (User, Uuid) {
        let person = register(&self.store, name, IdentityKind::Person).await;
        let room = befriend(&self.store, &person, &self.agent).await;
        (person, room)
    }

    /// Registers the agent's runtime `name` with `policy` (its JSON form).
    pub async fn runtime(&self, name: &str, from: StartFrom, policy: serde_json::Value) -> Uuid {
        let policy = Policy::parse(&policy.to_string()).expect("a valid policy");
        self.store
            .register_runtime(&self.agent.0.identity, name.to_owned(), from, policy)
            .await
            .expect("register the runtime")
            .0
            .id
    }

    /// `from` asks a question in `room`.
    pub async fn ask(&self, from: &User, room: Uuid, text: &str) -> MessageEnvelope {
        send(&self.store, from, room, text, true).await
    }

    /// One claim with the default lease.
    pub async fn claim(&self, runtime: Uuid, max_jobs: u32) -> ClaimResponse {
        self.claim_leased(runtime, max_jobs, DEFAULT_LEASE_MS).await
    }

    /// One claim with a lease of `lease_ms`.
    pub async fn claim_leased(&self, runtime: Uuid, max_jobs: u32, lease_ms: u64) -> ClaimResponse {
        self.store
            .claim(
                &self.agent.caller(),
                runtime,
                max_jobs,
                None,
                lease_ms,
                false,
            )
            .await
            .expect("claim")
            .response
    }

    /// One claim that must grant exactly one job: that job.
    pub async fn claim_one(&self, runtime: Uuid) -> ClaimedJob {
        let mut claimed = self.claim(runtime, 1).await;
        assert_eq!(claimed.jobs.len(), 1, "{claimed:?}");
        claimed.jobs.remove(0)
    }

    /// Finishes `job` with `result` as the agent.
    pub async fn finish(
        &self,
        runtime: Uuid,
        job: &ClaimedJob,
        result: JobResult,
    ) -> Result<FinishResponse, StoreError> {
        self.store
            .finish(
                &self.agent.caller(),
                runtime,
                job.job_id,
                &job.owner,
                job.version,
                result,
            )
            .await
    }

    /// Answers `job` with a reply of "ok".
    pub async fn reply(&self, runtime: Uuid, job: &ClaimedJob) -> FinishResponse {
        self.finish(runtime, job, reply("ok"))
            .await
            .expect("finished")
    }

    /// The runtime as `runtimes inspect` shows it.
    pub async fn inspect(&self, runtime: Uuid) -> Runtime {
        self.store
            .runtime(&self.agent.caller(), runtime)
            .await
            .expect("the runtime")
    }

    /// The kinds of the runtime's newest log records.
    pub async fn log_kinds(&self, runtime: Uuid) -> Vec<String> {
        self.store
            .runtime_log(&self.agent.caller(), runtime, None)
            .await
            .expect("the log")
            .into_iter()
            .map(|record| record.kind)
            .collect()
    }

    /// A connection of the test's own to the database.
    pub async fn connection(&self) -> AsyncPgConnection {
        connect(&self.db).await
    }

    /// Runs `sql` (one or more statements) on a connection of its own.
    pub async fn execute(&self, sql: &str) {
        execute(&mut self.connection().await, sql).await;
    }

    /// A query that yields one bigint column `n`.
    pub async fn query_n(&self, sql: &str) -> i64 {
        query_n(&mut self.connection().await, sql).await
    }

    /// A connection holding, until its COMMIT, the locks `lock_sql` takes.
    pub async fn hold_lock(&self, lock_sql: &str) -> AsyncPgConnection {
        let mut holder = self.connection().await;
        execute(&mut holder, &format!("BEGIN; {lock_sql}")).await;
        holder
    }

    /// A connection that has seen another backend wait on a lock (`what`
    /// names the wait, for the timeout's message).
    pub async fn watch_until_someone_waits(&self, what: &str) -> AsyncPgConnection {
        let mut watcher = self.connection().await;
        wait_for(&mut watcher, what, SOMEONE_WAITS_ON_A_LOCK).await;
        watcher
    }
}

/// A result that replies `text`.
pub fn reply(text: &str) -> JobResult {
    JobResult {
        reply: Some(text.to_owned()),
        ..JobResult::default()
    }
}

/// A result that fails the attempt with `error`.
pub fn failure(error: &str) -> JobResult {
    JobResult {
        error: Some(error.to_owned()),
        ..JobResult::default()
    }
}

/// Makes `a` and `b` contacts; returns their direct room.
pub async fn befriend(store: &Store, a: &User, b: &User) -> Uuid {
    store
        .request_contact(a.id(), b.number())
        .await
        .expect("request");
    store
        .accept_contact(b.id(), a.number())
        .await
        .expect("accept")
        .room_id
}

/// Sends `text` to `room` as `from` (a question with `ask`).
pub async fn send(
    store: &Store,
    from: &User,
    room: Uuid,
    text: &str,
    ask: bool,
) -> MessageEnvelope {
    let message = NewMessage {
        to: None,
        room_id: Some(room),
        message_id: None,
        body: MessageBody::Text(text.to_owned()),
        ask,
        deadline: None,
        reply_to: None,
    };
    store
        .send_message(&from.caller(), message, |_, _| Ok(()))
        .await
        .expect("send")
        .0
}

pub async fn connect(db: &TestDatabase) -> AsyncPgConnection {
    AsyncPgConnection::establish(db.url())
        .await
        .expect("connect to the test database")
}

pub async fn execute(conn: &mut AsyncPgConnection, sql: &str) {
    conn.batch_execute(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

#[derive(diesel::QueryableByName)]
struct N {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

/// A query that yields one bigint column `n`.
pub async fn query_n(conn: &mut AsyncPgConnection, sql: &str) -> i64 {
    query_row::<N>(conn, sql).await.n
}

#[derive(diesel::QueryableByName)]
struct Flag {
    #[diesel(sql_type = Bool)]
    flag: bool,
}

/// A query that yields one boolean column `flag`.
pub async fn query_flag(conn: &mut AsyncPgConnection, sql: &str) -> bool {
    query_row::<Flag>(conn, sql).await.flag
}

async fn query_row<R>(conn: &mut AsyncPgConnection, sql: &str) -> R
where
    R: diesel::QueryableByName<diesel::pg::Pg> + Send + 'static,
{
    diesel::sql_query(sql)
        .get_result(conn)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// Waits (bounded) until `sql`, a boolean query named `flag`, holds: a
/// lock wait or a lease running out sends no signal, so this polls.
pub async fn wait_for(conn: &mut AsyncPgConnection, what: &str, sql: &str) {
    let deadline = Instant::now() + WAIT;
    while !query_flag(conn, sql).await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Some other backend of this database waits on a lock.
pub const SOMEONE_WAITS_ON_A_LOCK: &str = "SELECT EXISTS (SELECT 1 FROM pg_stat_activity \
     WHERE datname = current_database() AND pid <> pg_backend_pid() \
     AND wait_event_type = 'Lock') AS flag";

/// The code a refusal carries, with the HTTP status that carries it (what
/// a client of the API would see); `None` for an answer.
pub fn refusal<T: std::fmt::Debug>(
    answer: &Result<T, StoreError>,
) -> Option<(u16, relayger_core::ErrorCode)> {
    match answer {
        Err(StoreError::Rejected { code, .. } | StoreError::RejectedWithDetails { code, .. }) => {
            Some((code.http_status(), *code))
        }
        Err(other) => panic!("not a refusal: {other:?}"),
        Ok(_) => None,
    }
}
