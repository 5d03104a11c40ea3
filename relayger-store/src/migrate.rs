//! Embedded schema migrations.
//!
//! diesel_migrations is synchronous; it runs over an `AsyncConnectionWrapper`
//! on a blocking thread so that it never stalls the async executor.

use diesel::Connection;
use diesel_async::AsyncPgConnection;
use diesel_async::async_connection_wrapper::AsyncConnectionWrapper;
use diesel_migrations::{EmbeddedMigrations, MigrationHarness, embed_migrations};

use crate::StoreError;

/// The SQL migrations of the repository's top-level `migrations/`, compiled
/// in (this crate's `migrations` is a link to it, which `cargo package`
/// follows, so the packaged crate carries the SQL).
pub const MIGRATIONS: EmbeddedMigrations = embed_migrations!("migrations");

/// A fingerprint of the migration files this crate was built with.
pub const MIGRATIONS_HASH: &str = env!("RELAYGER_MIGRATIONS_HASH");

/// Applies every pending migration and returns the versions applied; a re-run
/// on an up-to-date database applies nothing.
pub async fn run_migrations(database_url: &str) -> Result<Vec<String>, StoreError> {
    let url = database_url.to_owned();
    tokio::task::spawn_blocking(move || {
        let mut conn = AsyncConnectionWrapper::<AsyncPgConnection>::establish(&url)?;
        let applied = conn
            .run_pending_migrations(MIGRATIONS)
            .map_err(|e| StoreError::Migration(e.to_string()))?;
        Ok(applied.iter().map(ToString::to_string).collect())
    })
    .await
    .map_err(|e| StoreError::Migration(format!("migration task failed: {e}")))?
}

/// The versions already applied to the database, oldest first.
pub async fn applied_migrations(database_url: &str) -> Result<Vec<String>, StoreError> {
    let url = database_url.to_owned();
    tokio::task::spawn_blocking(move || {
        let mut conn = AsyncConnectionWrapper::<AsyncPgConnection>::establish(&url)?;
        let applied = conn
            .applied_migrations()
            .map_err(|e| StoreError::Migration(e.to_string()))?;
        let mut versions: Vec<String> = applied.iter().map(ToString::to_string).collect();
        versions.sort();
        Ok(versions)
    })
    .await
    .map_err(|e| StoreError::Migration(format!("migration task failed: {e}")))?
}

/// Creates `database` on the server behind `maintenance_url` unless it exists.
pub async fn create_database_if_missing(
    maintenance_url: &str,
    database: &str,
) -> Result<bool, StoreError> {
    use diesel::sql_types::{BigInt, Text};
    use diesel_async::{AsyncConnection, RunQueryDsl};

    #[derive(diesel::QueryableByName)]
    struct Found {
        #[diesel(sql_type = BigInt)]
        n: i64,
    }
    if !database
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return Err(StoreError::Migration(format!(
            "invalid database name {database:?}"
        )));
    }
    let mut conn = AsyncPgConnection::establish(maintenance_url).await?;
    let found: Found =
        diesel::sql_query("SELECT count(*) AS n FROM pg_database WHERE datname = $1")
            .bind::<Text, _>(database)
            .get_result(&mut conn)
            .await?;
    if found.n > 0 {
        return Ok(false);
    }
    diesel::sql_query(format!("CREATE DATABASE {database}"))
        .execute(&mut conn)
        .await?;
    Ok(true)
}
