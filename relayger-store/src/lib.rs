//! Relayger's PostgreSQL layer.
//!
//! All SQL lives here: the diesel schema, queries and transactions, embedded
//! migrations, and the self-managed PostgreSQL that gives `relayger-server`
//! its zero-configuration mode. Nothing above this crate writes SQL.

mod caller;
mod contacts;
pub mod embedded;
mod error;
mod identities;
mod instrument;
pub mod listen;
mod messages;
pub mod metrics;
mod migrate;
mod pause;
mod pool;
mod prepared;
#[cfg(test)]
mod races_tests;
mod rooms;
mod runtime;
pub mod schema;
#[cfg(test)]
mod test_support;
// The store's own test helpers, shared by its unit tests and its
// integration tests (`tests/support.rs` names this crate `relayger_store`).
#[cfg(test)]
extern crate self as relayger_store;
#[cfg(test)]
#[path = "../tests/support.rs"]
mod support;
pub mod wake;

pub use caller::Caller;
pub use error::StoreError;
pub use identities::{AuthenticatedToken, IdentityRow, NewIdentity, secret_hash};
pub use instrument::StatementCounts;
pub use messages::{MessageBody, NewMessage, QuestionPage, SealedValidator};
pub use migrate::{
    MIGRATIONS, MIGRATIONS_HASH, applied_migrations, create_database_if_missing, run_migrations,
};
pub use pool::{PoolLoad, PoolOptions, SESSION_LIMITS, Store};
pub use relayger_core::limits::{MAX_JOBS_PER_CLAIM, MAX_LOG_PAGE, MAX_RUNTIMES_PER_AGENT};
pub use rooms::RoomsState;
pub use runtime::claim::Claimed;

/// Every statement of the runtime's hot paths as (its file below
/// `src/runtime/`, its text), for the store's tests: they prepare each one
/// against the migrated schema.
#[doc(hidden)]
pub fn runtime_statements() -> &'static [(&'static str, &'static str)] {
    runtime::statements::STATEMENTS
}
pub use runtime::finish::JobFinishInput;
