//! Relayger's PostgreSQL layer.
//!
//! All SQL lives here: the diesel schema, queries and transactions, embedded
//! migrations, and the self-managed PostgreSQL that gives `relayger-server`
//! its zero-configuration mode. Nothing above this crate writes SQL.

pub mod embedded;
mod error;
mod migrate;
mod pool;
pub mod schema;
#[cfg(feature = "test-support")]
pub mod test_support;

pub use error::StoreError;
pub use migrate::{
    MIGRATIONS, MIGRATIONS_HASH, applied_migrations, create_database_if_missing, run_migrations,
};
pub use pool::{PoolOptions, Store};
