//! relayger-testdb's per-test databases for this crate's own unit tests.
//!
//! relayger-testdb depends on this crate, so in a unit test its `Store` is
//! another compilation of this crate, not `crate::Store`: this wrapper hands
//! out a pool of the crate under test.

use std::ops::Deref;

use relayger_core::wire::{Identity, IdentityKind};
pub(crate) use relayger_testdb::assert_session_limits_from;

use crate::{AuthenticatedToken, NewIdentity, PoolOptions, Store, secret_hash};

/// A fresh, migrated database that is dropped when the value is dropped.
#[derive(Debug)]
pub(crate) struct TestDatabase(relayger_testdb::TestDatabase);

impl TestDatabase {
    /// A database cloned from the migrated template.
    pub(crate) async fn create() -> TestDatabase {
        TestDatabase(relayger_testdb::TestDatabase::create().await)
    }

    /// A connection pool of this crate on the database.
    pub(crate) async fn store(&self) -> Store {
        Store::connect(self.url(), PoolOptions::default())
            .await
            .expect("connect to the test database")
    }
}

impl Deref for TestDatabase {
    type Target = relayger_testdb::TestDatabase;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

/// Registers an identity named `name` (a fixed public key, no invite):
/// the identity and its token as a request would present it.
pub(crate) async fn register(
    store: &Store,
    name: &str,
    kind: IdentityKind,
) -> (Identity, AuthenticatedToken) {
    let (identity, token) = store
        .register(
            NewIdentity {
                display_name: name.to_owned(),
                kind,
                public_key: [7; 32],
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
    (identity, authenticated)
}
