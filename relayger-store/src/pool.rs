//! The connection pool and the `Store` handle every query goes through.

use std::time::Duration;

use diesel::prelude::*;
use diesel::result::QueryResult;
use diesel::sql_types::BigInt;
use diesel_async::pooled_connection::deadpool::{Object, Pool};
use diesel_async::pooled_connection::{
    AsyncDieselConnectionManager, ManagerConfig, PoolableConnection, RecyclingMethod,
};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl, SimpleAsyncConnection};
use futures_util::FutureExt;

use crate::StoreError;
use crate::instrument::{Counters, Counting, StatementCounts};
use crate::prepared::CachedExt;

/// Pool sizing. The defaults suit one server process on a small machine.
#[derive(Debug, Clone)]
pub struct PoolOptions {
    pub max_connections: usize,
    /// How long a request waits for a free connection before it is shed.
    pub acquire_timeout: Duration,
}

impl Default for PoolOptions {
    fn default() -> Self {
        PoolOptions {
            max_connections: 16,
            acquire_timeout: Duration::from_secs(5),
        }
    }
}

/// Limits every pooled connection runs under, the backstop behind dropping a
/// connection whose request vanished mid-transaction ([`PooledConnection`]).
/// Every store transaction is a handful of short statements, so none of
/// these is reached in normal work:
/// - `idle_in_transaction_session_timeout`: a session left idle inside a
///   transaction (its client gone: a server cut from PostgreSQL tells it
///   nothing) is ended and its locks released, within 3 s, so another
///   server's claims of a runtime whose row it held wait no longer (a store
///   transaction is idle only between its pipelined flights, milliseconds);
/// - `lock_timeout`: a statement waits at most this long for a row lock (the
///   request is rolled back and answered 503, retry);
/// - `statement_timeout`: no statement runs longer;
/// - `client_connection_check_interval` (PostgreSQL 14 and later): a backend
///   whose connection closed stops waiting on a lock or running a statement
///   within this interval instead of at its end.
///
/// A new connection sets those its session does not already have. Through
/// a transaction pooler a session setting would land on whichever server
/// connection the pooler picked, so there the role (`ALTER ROLE … SET`)
/// or the pooler (PgBouncer's `connect_query`) gives every server
/// connection these values, and the server then sets none (SCALING.md).
pub const SESSION_LIMITS: [(&str, &str); 4] = [
    ("idle_in_transaction_session_timeout", "3s"),
    ("lock_timeout", "15s"),
    ("statement_timeout", "1min"),
    ("client_connection_check_interval", "1s"),
];

/// The statement that applies [`SESSION_LIMITS`] to a new connection:
/// settings already in effect (from the role, the database or a pooler's
/// connect query) and settings the server does not know (an older
/// PostgreSQL) are left alone.
fn session_limits_sql() -> String {
    let settings = SESSION_LIMITS
        .iter()
        .map(|(name, value)| {
            format!(
                "SELECT set_config(name, '{value}', false) FROM pg_settings \
                 WHERE name = '{name}' AND current_setting(name) <> '{value}';"
            )
        })
        .collect::<Vec<_>>();
    settings.join(" ")
}

/// A connection from the pool. Dropped while a transaction is still open —
/// the request future was dropped mid-transaction because its client
/// vanished (a reset, a killed worker, a client timeout) — the connection is
/// taken out of the pool and closed at once, so PostgreSQL rolls the
/// transaction back and releases its locks now, not when the pool next
/// hands out and recycles that connection. One place for every transaction.
///
/// The same holds for a statement outside a transaction that is dropped
/// while it runs (it may be waiting on a row lock): mark it with
/// [`PooledConnection::statement`].
pub(crate) struct PooledConnection(Option<Object<AsyncPgConnection>>, bool);

impl PooledConnection {
    /// Runs one autocommit statement; if its future is dropped before it
    /// answers, the connection is closed rather than pooled.
    pub(crate) async fn statement<T>(
        &mut self,
        run: impl AsyncFnOnce(&mut AsyncPgConnection) -> T,
    ) -> T {
        self.1 = true;
        let out = run(self).await;
        self.1 = false;
        out
    }

    /// Runs `body` as one transaction that `body` opens with [`begin`] in
    /// its first flight and closes with [`commit_after`] in its last, so
    /// neither costs a round trip of its own (diesel-async's `transaction`
    /// sends each alone). Until `body` has committed, the connection counts
    /// as inside a transaction: dropped, it is closed rather than pooled
    /// (PostgreSQL rolls back). When `body` fails, whatever it left open is
    /// rolled back here. The job events it raised are counted once it has
    /// committed ([`crate::metrics::count_when_committed`]).
    pub(crate) async fn pipelined_transaction<T>(
        &mut self,
        body: impl AsyncFnOnce(&mut AsyncPgConnection) -> Result<Committed<T>, StoreError>,
    ) -> Result<T, StoreError> {
        self.1 = true;
        crate::metrics::count_when_committed(async {
            match body(&mut **self).await {
                Ok(Committed(value)) => {
                    self.1 = false;
                    Ok(value)
                }
                Err(err) => {
                    // Outside a transaction (none begun, or the `COMMIT` of a
                    // failed one already ended it) this only warns.
                    if transaction_control(self, "ROLLBACK").await.is_ok() {
                        self.1 = false;
                    }
                    Err(err)
                }
            }
        })
        .await
    }
}

/// Proof that a pipelined transaction's `BEGIN` was sent ([`begin`]).
#[derive(Debug)]
pub(crate) struct Begun(());

/// What a pipelined transaction's body answers once it has committed
/// ([`commit_after`]).
#[derive(Debug)]
pub(crate) struct Committed<T>(T);

impl<T> Committed<T> {
    /// The committed value turned into the transaction's answer.
    pub(crate) fn map<U>(self, f: impl FnOnce(T) -> U) -> Committed<U> {
        Committed(f(self.0))
    }
}

/// A transaction-control statement as a kept prepared statement: like every
/// statement it waits for its turn at the connection's statement cache, so
/// it is sent after the statements polled before it even when one of those
/// must be prepared first (a simple query would overtake it).
fn transaction_control<'a>(
    mut conn: &'a AsyncPgConnection,
    sql: &'static str,
) -> impl Future<Output = QueryResult<usize>> + Send + 'a {
    diesel::sql_query(sql).cached().execute(&mut conn)
}

/// `BEGIN` of a [`PooledConnection::pipelined_transaction`], to be polled
/// first in its first flight (pipelined statements run in the order sent).
pub(crate) fn begin(
    conn: &AsyncPgConnection,
) -> impl Future<Output = QueryResult<Begun>> + Send + '_ {
    let begin = transaction_control(conn, "BEGIN");
    async move { begin.await.map(|_| Begun(())) }
}

/// `COMMIT` sent right behind `last`, the transaction's last statements:
/// one flight. `last` must send all its statements when first polled
/// (statements polled together do). Should `last` fail, the `COMMIT` that
/// follows it ends the failed transaction as a rollback; should it fail
/// after its statements ran (a check of their answers), they are already
/// committed.
pub(crate) async fn commit_after<T>(
    conn: &AsyncPgConnection,
    _begun: Begun,
    last: impl Future<Output = Result<T, StoreError>>,
) -> Result<Committed<T>, StoreError> {
    // Made before `last` is first polled, so it counts as sent with it
    // ([`crate::instrument`] counts a statement when it is made) even when
    // `last` answers within its first poll; it is sent after `last`'s
    // statements all the same (its turn at the statement cache comes when
    // it is first polled).
    let commit = transaction_control(conn, "COMMIT");
    let commit = async { commit.await.map_err(StoreError::from) };
    let (value, _) = futures_util::try_join!(last, commit)?;
    Ok(Committed(value))
}

/// A whole pipelined transaction in one flight: `BEGIN`, then `statements`
/// (which must send all their statements when first polled), then
/// `COMMIT`. Should a statement fail, the `COMMIT` ends the failed
/// transaction as a rollback.
pub(crate) async fn in_one_flight<T>(
    conn: &AsyncPgConnection,
    statements: impl Future<Output = Result<T, StoreError>>,
) -> Result<Committed<T>, StoreError> {
    let begin = transaction_control(conn, "BEGIN");
    let begin = async { begin.await.map_err(StoreError::from) };
    let commit = transaction_control(conn, "COMMIT");
    let commit = async { commit.await.map_err(StoreError::from) };
    let (_, value, _) = futures_util::try_join!(begin, statements, commit)?;
    Ok(Committed(value))
}

impl std::ops::Deref for PooledConnection {
    type Target = AsyncPgConnection;

    fn deref(&self) -> &AsyncPgConnection {
        self.0.as_ref().expect("present until dropped")
    }
}

impl std::ops::DerefMut for PooledConnection {
    fn deref_mut(&mut self) -> &mut AsyncPgConnection {
        self.0.as_mut().expect("present until dropped")
    }
}

impl Drop for PooledConnection {
    fn drop(&mut self) {
        if let Some(mut conn) = self.0.take() {
            // Broken: a transaction still open (or failed mid-way), a
            // statement still running, or the connection closed. Closing it
            // makes PostgreSQL stop and roll back.
            if conn.is_broken() || self.1 {
                drop(Object::take(conn));
            }
        }
    }
}

/// A cheap-to-clone handle on the database.
#[derive(Clone)]
pub struct Store {
    pool: Pool<AsyncPgConnection>,
    /// One connection of its own for health probes, so `/healthz` still
    /// answers truthfully while every request connection is busy.
    probe: Pool<AsyncPgConnection>,
    database_url: String,
    /// Where LISTEN connects when not to `database_url`: a direct session
    /// connection when requests go through a transaction-pooling PgBouncer.
    listen_url: Option<String>,
    /// Committed wakes of this process ([`crate::wake`]).
    pub(crate) wakes: crate::wake::WakeBus,
    /// What both pools' connections sent ([`crate::instrument`]).
    counters: std::sync::Arc<Counters>,
    /// Where the jobs this instance granted are, for one-statement finishes.
    pub(crate) granted: std::sync::Arc<crate::runtime::granted::GrantedJobs>,
}

/// How busy the request pool is, for health reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolLoad {
    /// The most connections the pool opens.
    pub max: usize,
    /// Connections handed out to requests right now.
    pub in_use: usize,
    /// Requests waiting for a connection.
    pub waiting: usize,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL may carry a password: never print it.
        f.debug_struct("Store")
            .field("status", &self.pool.status())
            .finish_non_exhaustive()
    }
}

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    count: i64,
}

impl Store {
    /// Builds the pool and proves the database answers.
    pub async fn connect(database_url: &str, options: PoolOptions) -> Result<Store, StoreError> {
        let counters = std::sync::Arc::new(Counters::default());
        let store = Store {
            pool: build_pool(
                database_url,
                options.max_connections,
                options.acquire_timeout,
                &counters,
            )?,
            probe: build_pool(database_url, 1, options.acquire_timeout, &counters)?,
            database_url: database_url.to_owned(),
            listen_url: None,
            wakes: crate::wake::WakeBus::default(),
            counters,
            granted: std::sync::Arc::default(),
        };
        drop(store.conn().await?);
        Ok(store)
    }

    /// The request pool's load right now (no database round trip).
    pub fn pool_load(&self) -> PoolLoad {
        let status = self.pool.status();
        PoolLoad {
            max: status.max_size,
            in_use: status.size.saturating_sub(status.available),
            waiting: status.waiting,
        }
    }

    /// Statements, prepares and round trips this store's connections sent
    /// since it was built (no database round trip).
    pub fn statement_counts(&self) -> StatementCounts {
        self.counters.read()
    }

    /// The URL this store connects to (may contain a password).
    pub fn database_url(&self) -> &str {
        &self.database_url
    }

    /// LISTEN connects to `url` instead of the pool's URL: a session of its
    /// own past a transaction-pooling PgBouncer, which cannot hold LISTEN.
    #[must_use]
    pub fn with_listen_url(mut self, url: Option<String>) -> Store {
        self.listen_url = url;
        self
    }

    /// The URL the LISTEN connection uses (may contain a password).
    pub fn listen_url(&self) -> &str {
        self.listen_url.as_deref().unwrap_or(&self.database_url)
    }

    pub(crate) async fn conn(&self) -> Result<PooledConnection, StoreError> {
        Ok(PooledConnection(Some(self.pool.get().await?), false))
    }

    /// Number of applied migrations; fails when the database does not answer.
    /// Runs on the probe connection, never waiting behind requests.
    /// A probe dropped before it answers (`/healthz` gives up after 2 s)
    /// closes its connection: one whose link died silently would otherwise
    /// be handed to every later probe, and the database would look down
    /// until TCP gave up on it, long after it is back.
    pub async fn schema_migration_count(&self) -> Result<u32, StoreError> {
        let mut conn = PooledConnection(Some(self.probe.get().await?), false);
        let row: Count = conn
            .statement(async |conn| {
                diesel::sql_query("SELECT count(*) AS count FROM __diesel_schema_migrations")
                    .get_result(conn)
                    .await
            })
            .await?;
        Ok(u32::try_from(row.count).unwrap_or(u32::MAX))
    }
}

fn build_pool(
    database_url: &str,
    max_size: usize,
    acquire_timeout: Duration,
    counters: &std::sync::Arc<Counters>,
) -> Result<Pool<AsyncPgConnection>, StoreError> {
    let mut config = ManagerConfig::default();
    // No test query per checkout: a connection that broke is already
    // dropped by [`PooledConnection`], and one that died idle fails its
    // first statement (the request answers 503 and is retried).
    config.recycling_method = RecyclingMethod::Fast;
    let counters = std::sync::Arc::clone(counters);
    config.custom_setup = Box::new(move |url| {
        let counters = std::sync::Arc::clone(&counters);
        async move {
            let mut conn = AsyncPgConnection::establish(url).await?;
            conn.batch_execute(&session_limits_sql())
                .await
                .map_err(diesel::ConnectionError::CouldntSetupConfiguration)?;
            // Counted from here on: the set-up above is no request's work.
            conn.set_instrumentation(Counting::new(counters));
            Ok(conn)
        }
        .boxed()
    });
    let manager =
        AsyncDieselConnectionManager::<AsyncPgConnection>::new_with_config(database_url, config);
    Pool::builder(manager)
        .max_size(max_size)
        .wait_timeout(Some(acquire_timeout))
        .create_timeout(Some(acquire_timeout))
        .runtime(deadpool_runtime())
        .build()
        .map_err(|e| StoreError::Pool(e.to_string()))
}

fn deadpool_runtime() -> deadpool::Runtime {
    deadpool::Runtime::Tokio1
}

#[cfg(test)]
mod pipelined_tests;

#[cfg(test)]
mod tests {
    use diesel::sql_types::Text;

    use super::*;
    use crate::test_support::TestDatabase;

    #[derive(QueryableByName)]
    struct Setting {
        #[diesel(sql_type = Text)]
        value: String,
    }

    #[tokio::test]
    async fn pooled_connections_carry_the_session_limits() {
        let db = TestDatabase::create().await;
        let store = db.store().await;
        let mut conn = store.conn().await.expect("connection");
        for (name, value) in SESSION_LIMITS {
            let row: Setting =
                diesel::sql_query(format!("SELECT current_setting('{name}') AS value"))
                    .get_result(&mut conn)
                    .await
                    .expect(name);
            assert_eq!(row.value, value, "{name}");
        }
    }

    #[tokio::test]
    async fn limits_already_in_effect_are_not_set_again_on_the_session() {
        let db = TestDatabase::create().await;
        // As `ALTER ROLE … SET` or a pooler's connect query would give
        // every server connection.
        db.set_session_limits().await;
        let store = db.store().await;
        let mut conn = store.conn().await.expect("connection");
        // None set again on the session.
        crate::test_support::assert_session_limits_from(&mut conn, "database").await;
    }

    #[tokio::test]
    async fn a_connection_dropped_inside_a_transaction_leaves_the_pool_and_rolls_back() {
        let db = TestDatabase::create().await;
        let store = db.store().await;
        let mut conn = store.conn().await.expect("connection");
        // A transaction whose future is dropped mid-way, as a request's is
        // when its client vanishes.
        let (wrote, written) = tokio::sync::oneshot::channel();
        let transaction = conn.transaction(async move |conn| -> Result<(), StoreError> {
            diesel::sql_query("CREATE TABLE left_open (id int)")
                .execute(conn)
                .await?;
            let _ = wrote.send(());
            std::future::pending().await
        });
        tokio::select! {
            _ = transaction => panic!("the transaction never ends"),
            _ = written => {}
        }
        assert!(conn.is_broken(), "an open transaction marks it broken");
        drop(conn);
        assert_eq!(store.pool.status().size, 0, "taken out of the pool");
        // Its backend ends (rolling back) without anyone asking.
        let mut conn = store.conn().await.expect("connection");
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            let row: Count = diesel::sql_query(
                "SELECT count(*) AS count FROM pg_stat_activity \
                 WHERE datname = current_database() AND pid <> pg_backend_pid()",
            )
            .get_result(&mut conn)
            .await
            .expect("pg_stat_activity");
            if row.count == 0 {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "the backend lives on");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        drop(conn);
        assert_eq!(
            store.pool.status().size,
            1,
            "a clean connection stays pooled"
        );
    }

    #[tokio::test]
    async fn a_health_probe_dropped_before_it_answers_closes_its_connection() {
        use diesel_async::SimpleAsyncConnection;
        let db = TestDatabase::create().await;
        let store = db.store().await;
        // The probe's query waits, as on a link that died silently.
        let mut holder = store.conn().await.expect("connection");
        holder
            .batch_execute("BEGIN; LOCK TABLE __diesel_schema_migrations IN ACCESS EXCLUSIVE MODE")
            .await
            .expect("lock the migrations table");
        let probe =
            tokio::time::timeout(Duration::from_millis(300), store.schema_migration_count()).await;
        assert!(probe.is_err(), "the probe waits on the lock");
        assert_eq!(
            store.probe.status().size,
            0,
            "the probe's connection left the pool, not handed to the next probe"
        );
        holder.batch_execute("ROLLBACK").await.expect("unlock");
        drop(holder);
        let count = store
            .schema_migration_count()
            .await
            .expect("the next probe");
        assert!(count > 0, "{count} migrations");
        assert_eq!(
            store.probe.status().size,
            1,
            "a probe that answered stays pooled"
        );
    }
}
