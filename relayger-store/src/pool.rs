//! The connection pool and the `Store` handle every query goes through.

use std::time::Duration;

use diesel::prelude::*;
use diesel::sql_types::BigInt;
use diesel_async::pooled_connection::AsyncDieselConnectionManager;
use diesel_async::pooled_connection::deadpool::{Object, Pool};
use diesel_async::{AsyncPgConnection, RunQueryDsl};

use crate::StoreError;

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

/// A cheap-to-clone handle on the database.
#[derive(Clone)]
pub struct Store {
    pool: Pool<AsyncPgConnection>,
    /// One connection of its own for health probes, so `/healthz` still
    /// answers truthfully while every request connection is busy.
    probe: Pool<AsyncPgConnection>,
    database_url: String,
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
        let store = Store {
            pool: build_pool(
                database_url,
                options.max_connections,
                options.acquire_timeout,
            )?,
            probe: build_pool(database_url, 1, options.acquire_timeout)?,
            database_url: database_url.to_owned(),
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

    /// The URL this store connects to (may contain a password).
    pub fn database_url(&self) -> &str {
        &self.database_url
    }

    pub(crate) async fn conn(&self) -> Result<Object<AsyncPgConnection>, StoreError> {
        Ok(self.pool.get().await?)
    }

    /// Number of applied migrations; fails when the database does not answer.
    /// Runs on the probe connection, never waiting behind requests.
    pub async fn schema_migration_count(&self) -> Result<u32, StoreError> {
        let mut conn = self.probe.get().await?;
        let row: Count =
            diesel::sql_query("SELECT count(*) AS count FROM __diesel_schema_migrations")
                .get_result(&mut conn)
                .await?;
        Ok(u32::try_from(row.count).unwrap_or(u32::MAX))
    }
}

fn build_pool(
    database_url: &str,
    max_size: usize,
    acquire_timeout: Duration,
) -> Result<Pool<AsyncPgConnection>, StoreError> {
    let manager = AsyncDieselConnectionManager::<AsyncPgConnection>::new(database_url);
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
