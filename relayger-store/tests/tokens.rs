//! A token's secret is shown once and never stored: only its hash is.

use diesel::sql_types::Text;
use diesel_async::RunQueryDsl;
use relayger_core::wire::{IdentityKind, Scope};
use relayger_store::NewIdentity;
use relayger_testdb::TestDatabase;

use crate::support::connect;

#[tokio::test(flavor = "multi_thread")]
async fn only_the_hashes_of_token_secrets_are_stored() {
    let db = TestDatabase::create().await;
    let store = db.store().await;
    let (identity, registration) = store
        .register(
            NewIdentity {
                display_name: "alice".to_owned(),
                kind: IdentityKind::Agent,
                public_key: [7; 32],
                owner_id: None,
            },
            None,
            false,
        )
        .await
        .expect("register");
    let read_only = store
        .create_token(identity.id, &[Scope::Read], None, None)
        .await
        .expect("a second token");

    #[derive(diesel::QueryableByName)]
    struct Hash {
        #[diesel(sql_type = Text)]
        h: String,
    }
    let mut conn = connect(&db).await;
    let hashes: Vec<Hash> =
        diesel::sql_query("SELECT encode(secret_hash, 'escape') AS h FROM tokens")
            .load(&mut conn)
            .await
            .expect("hashes");
    assert_eq!(hashes.len(), 2);
    for secret in [&registration.secret, &read_only.secret] {
        assert!(hashes.iter().all(|h| !h.h.contains(secret.as_str())));
    }
}
