//! Closed registration: only with a single-use invite.

use crate::common;

use common::TestServer;
use relayger_api::Registration;
use reqwest::Method;
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn a_closed_server_registers_only_with_an_unused_invite() {
    let server = TestServer::start_with(Registration::Closed).await;
    let register = |invite: Option<String>| {
        let server = &server;
        async move {
            let mut body =
                json!({"name": "newcomer", "kind": "person", "publicKey": common::public_key()});
            if let Some(invite) = invite {
                body["invite"] = json!(invite);
            }
            server
                .request(Method::POST, "/v1/register", None, Some(body))
                .await
        }
    };
    register(None).await.err(403, "registration_closed");
    register(Some("inv_unknown".into()))
        .await
        .err(403, "registration_closed");

    let code = server
        .db
        .store()
        .await
        .create_invite()
        .await
        .expect("invite");
    assert!(code.starts_with("inv_"));
    let first = register(Some(code.clone())).await;
    assert_eq!(first.status.as_u16(), 201, "{}", first.body);
    // The refusals stored no identity: the first admitted one holds the
    // first number.
    let number = first.body["identity"]["number"].as_str().expect("number");
    assert_eq!(number, common::first_number());
    register(Some(code)).await.err(403, "registration_closed");
    // Nor did the second use of the invite: the first identity is the only one.
    let token = first.body["token"]["secret"].as_str().expect("secret");
    assert!(
        !server
            .number_taken(token, &common::next_number(number))
            .await
    );
}
