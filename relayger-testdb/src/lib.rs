//! Relayger's test support: per-test databases on a real PostgreSQL.
//!
//! `TEST_DATABASE_URL` names a server (the test script starts a throwaway
//! cluster with this crate's `relayger-testdb` binary and exports it). The
//! first test to need a database migrates a template once — coordinated
//! across test processes by an advisory lock — and every test then gets its
//! own copy with `CREATE DATABASE … TEMPLATE … STRATEGY FILE_COPY`, so tests
//! run in parallel and never see each other's rows or NOTIFY channels.
//!
//! A crate of its own, used only as a dev-dependency or by the test crate:
//! no shipped binary links it, and no feature of a shipped crate exists for
//! tests.

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Text};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use relayger_store::{MIGRATIONS_HASH, PoolOptions, SESSION_LIMITS, Store, run_migrations};

/// The line relayger-store's pause points log (`pause.rs`), written
/// backwards: only relayger-store's own test build compiles the pause
/// points, so a binary that holds the line forwards has them in it. Kept
/// reversed so that a program looking for it does not hold it itself.
const PAUSE_POINT_LINE_REVERSED: &[u8] = b"tniop esuap a ta dleh si noitcasnart a :erots-regyaler";

/// Whether the binary at `path` has relayger-store's pause points compiled
/// in. (relayger-store's tests check that their own binary has; the
/// end-to-end tests check that the shipped binaries have not.)
pub fn has_pause_points(path: &std::path::Path) -> std::io::Result<bool> {
    let bytes = std::fs::read(path)?;
    let line: Vec<u8> = PAUSE_POINT_LINE_REVERSED.iter().rev().copied().collect();
    Ok(bytes
        .windows(line.len())
        .any(|window| window == line.as_slice()))
}

/// Advisory-lock key that serialises template creation across processes.
const TEMPLATE_LOCK: i64 = 0x7265_6c61_7967;

/// A fresh, migrated database that is dropped when the value is dropped.
#[derive(Debug)]
pub struct TestDatabase {
    name: String,
    url: String,
    admin_url: String,
}

#[derive(QueryableByName)]
struct Exists {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

impl TestDatabase {
    /// Creates a database cloned from the migrated template.
    ///
    /// # Panics
    /// When `TEST_DATABASE_URL` is unset or the server refuses: a test that
    /// needs PostgreSQL cannot run without one, and says how to get it.
    pub async fn create() -> TestDatabase {
        let admin_url = admin_url();
        let template = ensure_template(&admin_url).await;
        Self::create_from(
            admin_url,
            &format!("TEMPLATE {template} STRATEGY FILE_COPY"),
        )
        .await
    }

    /// Creates an empty database with no migrations applied.
    pub async fn create_empty() -> TestDatabase {
        Self::create_from(admin_url(), "").await
    }

    async fn create_from(admin_url: String, clause: &str) -> TestDatabase {
        let name = format!("relayger_test_{}", uuid::Uuid::new_v4().simple());
        let mut admin = connect(&admin_url).await;
        execute(&mut admin, &format!("CREATE DATABASE {name} {clause}")).await;
        TestDatabase {
            url: with_database(&admin_url, &name),
            name,
            admin_url,
        }
    }

    /// The database's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The database's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Gives the database [`SESSION_LIMITS`] as its own defaults (those this
    /// PostgreSQL knows), as `ALTER ROLE … SET` would for a role: every new
    /// session starts with them.
    pub async fn set_session_limits(&self) {
        let mut conn = AsyncPgConnection::establish(&self.url)
            .await
            .expect("connect to the test database");
        for (name, value) in SESSION_LIMITS {
            #[derive(QueryableByName)]
            struct Known {
                #[diesel(sql_type = BigInt)]
                count: i64,
            }
            let known: Known = diesel::sql_query(format!(
                "SELECT count(*) AS count FROM pg_settings WHERE name = '{name}'"
            ))
            .get_result(&mut conn)
            .await
            .expect("pg_settings");
            if known.count == 1 {
                diesel::sql_query(format!(
                    "ALTER DATABASE \"{}\" SET {name} = '{value}'",
                    self.name
                ))
                .execute(&mut conn)
                .await
                .expect(name);
            }
        }
    }

    /// A connection pool on this database.
    pub async fn store(&self) -> Store {
        Store::connect(&self.url, PoolOptions::default())
            .await
            .expect("connect to the test database")
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        // Drop on a thread of its own: Drop cannot await, and the test's
        // runtime may be shutting down.
        let admin_url = self.admin_url.clone();
        let name = self.name.clone();
        let dropper = std::thread::spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            runtime.block_on(async {
                if let Ok(mut admin) = AsyncPgConnection::establish(&admin_url).await {
                    let _ =
                        diesel::sql_query(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                            .execute(&mut admin)
                            .await;
                }
            });
        });
        let _ = dropper.join();
    }
}

fn admin_url() -> String {
    std::env::var("TEST_DATABASE_URL").unwrap_or_else(|_| {
        panic!(
            "TEST_DATABASE_URL is not set: run the suite with scripts/test, which starts a \
             throwaway PostgreSQL, or point TEST_DATABASE_URL at a server you own"
        )
    })
}

/// Makes sure the template for this build's migrations exists; returns its name.
async fn ensure_template(admin_url: &str) -> String {
    let template = format!("relayger_template_{MIGRATIONS_HASH}");
    let mut admin = connect(admin_url).await;
    execute(
        &mut admin,
        &format!("SELECT pg_advisory_lock({TEMPLATE_LOCK})"),
    )
    .await;
    let exists: Exists =
        diesel::sql_query("SELECT count(*) AS n FROM pg_database WHERE datname = $1")
            .bind::<Text, _>(&template)
            .get_result(&mut admin)
            .await
            .expect("query pg_database");
    if exists.n == 0 {
        // Build under a scratch name and rename at the end, so a crash while
        // migrating never leaves a half-built template behind.
        let building = format!("{template}_building");
        execute(
            &mut admin,
            &format!("DROP DATABASE IF EXISTS {building} WITH (FORCE)"),
        )
        .await;
        execute(&mut admin, &format!("CREATE DATABASE {building}")).await;
        run_migrations(&with_database(admin_url, &building))
            .await
            .expect("migrate the template database");
        execute(
            &mut admin,
            &format!("ALTER DATABASE {building} RENAME TO {template}"),
        )
        .await;
        execute(
            &mut admin,
            &format!("ALTER DATABASE {template} WITH IS_TEMPLATE true"),
        )
        .await;
    }
    execute(
        &mut admin,
        &format!("SELECT pg_advisory_unlock({TEMPLATE_LOCK})"),
    )
    .await;
    template
}

async fn connect(url: &str) -> AsyncPgConnection {
    AsyncPgConnection::establish(url)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to TEST_DATABASE_URL: {e}"))
}

async fn execute(conn: &mut AsyncPgConnection, sql: &str) {
    diesel::sql_query(sql)
        .execute(conn)
        .await
        .unwrap_or_else(|e| panic!("`{sql}` failed: {e}"));
}

/// Replaces the database name in a `postgres://…/name?params` URL.
pub fn with_database(url: &str, database: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    // The path starts at the first '/' after "scheme://authority".
    let authority_start = base.find("://").map_or(0, |i| i + 3);
    let path_start = base[authority_start..]
        .find('/')
        .map_or(base.len(), |i| authority_start + i);
    let mut out = format!("{}/{database}", &base[..path_start]);
    if let Some(query) = query {
        out.push('?');
        out.push_str(query);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::with_database;

    #[test]
    fn with_database_replaces_only_the_path() {
        let cases = [
            (
                "postgres://u@127.0.0.1:5432/postgres",
                "t1",
                "postgres://u@127.0.0.1:5432/t1",
            ),
            (
                "postgres://u:p@h:1/db?sslmode=disable",
                "t2",
                "postgres://u:p@h:1/t2?sslmode=disable",
            ),
            ("postgres://u@h:1", "t3", "postgres://u@h:1/t3"),
        ];
        for (url, name, want) in cases {
            assert_eq!(with_database(url, name), want);
        }
    }
}

/// A session limit as a session sees it.
#[derive(Debug, QueryableByName)]
struct SessionSetting {
    #[diesel(sql_type = Text)]
    name: String,
    /// `current_setting(name)`.
    #[diesel(sql_type = Text)]
    value: String,
    /// Where it came from (`pg_settings.source`): `session` when set on the
    /// connection, `database` or `user` from `ALTER … SET`, `default`.
    #[diesel(sql_type = Text)]
    source: String,
}

/// Asserts that `conn`'s session has every one of [`SESSION_LIMITS`] this
/// PostgreSQL knows, each from `source` (`pg_settings.source`: `database`
/// for `ALTER DATABASE … SET`, `session` when set on the connection).
pub async fn assert_session_limits_from(conn: &mut AsyncPgConnection, source: &str) {
    let names: Vec<&str> = SESSION_LIMITS.iter().map(|(name, _)| *name).collect();
    let limits: Vec<SessionSetting> = diesel::sql_query(
        "SELECT name, current_setting(name) AS value, source FROM pg_settings \
         WHERE name = ANY($1) ORDER BY name",
    )
    .bind::<diesel::sql_types::Array<Text>, _>(names)
    .load(conn)
    .await
    .expect("pg_settings");
    assert!(!limits.is_empty(), "no session limit known");
    for limit in limits {
        let (_, value) = SESSION_LIMITS
            .iter()
            .find(|(name, _)| *name == limit.name)
            .expect("one of the limits");
        assert_eq!(limit.value, *value, "{limit:?}");
        assert_eq!(limit.source, source, "{limit:?}");
    }
}
