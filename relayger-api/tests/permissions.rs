//! The permission matrix: every endpoint × (no token, revoked token, missing
//! scope, token restricted to another room, non-member, blocked contact).
//! Denials are 401/403/404 with nothing but the error envelope.

mod common;

use common::{Reply, TestServer};
use reqwest::Method;
use serde_json::{Value, json};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Needs {
    /// Any valid token.
    Token,
    Read,
    Write,
    /// `contacts` scope and an unrestricted token.
    Contacts,
    /// `write` and an unrestricted token.
    WriteUnrestricted,
}

struct Endpoint {
    method: Method,
    path: String,
    body: Option<Value>,
    needs: Needs,
    /// Touches the content of the shared room.
    room: bool,
}

const SECRET_TEXT: &str = "the secret plan";

#[track_caller]
fn denied(reply: &Reply, status: u16, what: &str) {
    assert_eq!(reply.status.as_u16(), status, "{what}: {}", reply.body);
    let object = reply.body.as_object().expect("an object");
    assert_eq!(
        object.keys().collect::<Vec<_>>(),
        ["error"],
        "{what}: only the envelope"
    );
    assert!(
        !reply.body.to_string().contains(SECRET_TEXT),
        "{what}: leaked content"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn every_endpoint_denies_without_the_right_token_scope_or_membership() {
    let server = TestServer::start().await;
    let alice = server.register("alice", "agent").await;
    let bob = server.register("bob", "agent").await;
    let carol = server.register("carol", "agent").await;
    let room = server.befriend(&alice, &bob).await;
    let group = server
        .post(
            "/v1/rooms",
            &alice.token,
            json!({"name": "elsewhere", "members": [bob.number]}),
        )
        .await
        .ok()["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let message = server
        .send(
            &alice,
            json!({"roomId": room, "text": SECRET_TEXT, "ask": true}),
        )
        .await;
    let message_id = message["messageId"].as_str().expect("id").to_owned();

    let token = |scopes: Value, rooms: Option<Value>| {
        let server = &server;
        let alice = &alice;
        async move {
            let mut body = json!({"scopes": scopes});
            if let Some(rooms) = rooms {
                body["roomIds"] = rooms;
            }
            server.post("/v1/tokens", &alice.token, body).await.ok()["secret"]
                .as_str()
                .expect("secret")
                .to_owned()
        }
    };
    let read_only = token(json!(["read"]), None).await;
    let write_only = token(json!(["write"]), None).await;
    let no_contacts = token(json!(["read", "write"]), None).await;
    let restricted = token(json!(["read", "write", "contacts"]), Some(json!([group]))).await;
    let revoked = token(json!(["read", "write", "contacts"]), None).await;
    let revoked_id = server.get("/v1/tokens", &alice.token).await.ok()["tokens"]
        .as_array()
        .expect("tokens")
        .iter()
        .find(|t| {
            t["current"] == false
                && t["scopes"].as_array().map(Vec::len) == Some(3)
                && t["roomIds"].is_null()
        })
        .expect("the revocable token")["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let _ = &revoked_id;

    let endpoints = vec![
        Endpoint {
            method: Method::GET,
            path: "/v1/me".into(),
            body: None,
            needs: Needs::Token,
            room: false,
        },
        Endpoint {
            method: Method::GET,
            path: format!("/v1/identities/{}", bob.number),
            body: None,
            needs: Needs::Read,
            room: false,
        },
        Endpoint {
            method: Method::GET,
            path: "/v1/tokens".into(),
            body: None,
            needs: Needs::Read,
            room: false,
        },
        Endpoint {
            method: Method::GET,
            path: "/v1/contacts".into(),
            body: None,
            needs: Needs::Read,
            room: false,
        },
        Endpoint {
            method: Method::GET,
            path: "/v1/contacts/requests".into(),
            body: None,
            needs: Needs::Contacts,
            room: false,
        },
        Endpoint {
            method: Method::POST,
            path: "/v1/contacts/requests".into(),
            body: Some(json!({"number": carol.number})),
            needs: Needs::Contacts,
            room: false,
        },
        Endpoint {
            method: Method::POST,
            path: format!("/v1/contacts/requests/{}/accept", carol.number),
            body: Some(json!({})),
            needs: Needs::Contacts,
            room: false,
        },
        Endpoint {
            method: Method::POST,
            path: format!("/v1/contacts/requests/{}/decline", carol.number),
            body: Some(json!({})),
            needs: Needs::Contacts,
            room: false,
        },
        Endpoint {
            method: Method::DELETE,
            path: format!("/v1/contacts/requests/{}", carol.number),
            body: None,
            needs: Needs::Contacts,
            room: false,
        },
        Endpoint {
            method: Method::POST,
            path: format!("/v1/contacts/{}/block", bob.number),
            body: Some(json!({})),
            needs: Needs::Contacts,
            room: false,
        },
        Endpoint {
            method: Method::DELETE,
            path: format!("/v1/contacts/{}/block", bob.number),
            body: None,
            needs: Needs::Contacts,
            room: false,
        },
        Endpoint {
            method: Method::DELETE,
            path: format!("/v1/contacts/{}", bob.number),
            body: None,
            needs: Needs::Contacts,
            room: false,
        },
        Endpoint {
            method: Method::GET,
            path: "/v1/rooms".into(),
            body: None,
            needs: Needs::Read,
            room: false,
        },
        Endpoint {
            method: Method::POST,
            path: "/v1/rooms".into(),
            body: Some(json!({"name": "new", "members": []})),
            needs: Needs::WriteUnrestricted,
            room: false,
        },
        Endpoint {
            method: Method::POST,
            path: "/v1/agents".into(),
            body: Some(json!({"name": "x", "publicKey": common::public_key()})),
            needs: Needs::WriteUnrestricted,
            room: false,
        },
        Endpoint {
            method: Method::GET,
            path: format!("/v1/rooms/{room}"),
            body: None,
            needs: Needs::Read,
            room: true,
        },
        Endpoint {
            method: Method::POST,
            path: format!("/v1/rooms/{room}/members"),
            body: Some(json!({"number": carol.number})),
            needs: Needs::Write,
            room: true,
        },
        Endpoint {
            method: Method::POST,
            path: format!("/v1/rooms/{room}/leave"),
            body: Some(json!({})),
            needs: Needs::Write,
            room: true,
        },
        Endpoint {
            method: Method::POST,
            path: format!("/v1/rooms/{room}/ack"),
            body: Some(json!({"seq": 1})),
            needs: Needs::Write,
            room: true,
        },
        Endpoint {
            method: Method::GET,
            path: format!("/v1/rooms/{room}/messages/{message_id}"),
            body: None,
            needs: Needs::Read,
            room: true,
        },
        Endpoint {
            method: Method::GET,
            path: format!("/v1/rooms/{room}/messages/{message_id}/thread"),
            body: None,
            needs: Needs::Read,
            room: true,
        },
        Endpoint {
            method: Method::POST,
            path: "/v1/messages".into(),
            body: Some(json!({"roomId": room, "text": "x"})),
            needs: Needs::Write,
            room: true,
        },
        Endpoint {
            method: Method::GET,
            path: "/v1/inbox".into(),
            body: None,
            needs: Needs::Read,
            room: false,
        },
        Endpoint {
            method: Method::GET,
            path: "/v1/socket".into(),
            body: None,
            needs: Needs::Read,
            room: false,
        },
    ];

    // Revoke now: the next request with it must fail everywhere.
    server
        .delete(&format!("/v1/tokens/{revoked_id}"), &alice.token)
        .await
        .ok();
    let messages_before = server.count("messages").await;

    for e in &endpoints {
        let what = format!("{} {}", e.method, e.path);
        let call = async |token: Option<&str>| {
            server
                .request(e.method.clone(), &e.path, token, e.body.clone())
                .await
        };

        denied(&call(None).await, 401, &format!("{what} without a token"));
        denied(
            &call(Some("rlg_not-a-real-token")).await,
            401,
            &format!("{what} with an unknown token"),
        );
        denied(
            &call(Some(&revoked)).await,
            401,
            &format!("{what} with a revoked token"),
        );

        let lacking = match e.needs {
            Needs::Token => None,
            Needs::Read => Some(&write_only),
            Needs::Write | Needs::WriteUnrestricted => Some(&read_only),
            Needs::Contacts => Some(&no_contacts),
        };
        if let Some(token) = lacking {
            denied(
                &call(Some(token)).await,
                403,
                &format!("{what} without its scope"),
            );
        }
        if matches!(e.needs, Needs::Contacts | Needs::WriteUnrestricted) {
            denied(
                &call(Some(&restricted)).await,
                403,
                &format!("{what} with a room-restricted token"),
            );
        }
        if e.room {
            denied(
                &call(Some(&restricted)).await,
                404,
                &format!("{what} restricted to another room"),
            );
            denied(
                &server
                    .request(
                        e.method.clone(),
                        &e.path,
                        Some(&carol.token),
                        e.body.clone(),
                    )
                    .await,
                404,
                &format!("{what} by a non-member"),
            );
        }
    }

    // A restricted token sees only its rooms in lists.
    let rooms = server.get("/v1/rooms", &restricted).await.ok();
    let ids: Vec<&str> = rooms["rooms"]
        .as_array()
        .expect("rooms")
        .iter()
        .map(|r| r["id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, [group.as_str()]);
    assert!(
        !server
            .get("/v1/inbox", &restricted)
            .await
            .ok()
            .to_string()
            .contains(SECRET_TEXT)
    );

    // Blocked contact: Bob loses every room endpoint of the direct room.
    server
        .post(
            &format!("/v1/contacts/{}/block", bob.number),
            &alice.token,
            json!({}),
        )
        .await
        .ok();
    for e in endpoints.iter().filter(|e| e.room) {
        denied(
            &server
                .request(e.method.clone(), &e.path, Some(&bob.token), e.body.clone())
                .await,
            404,
            &format!("{} {} by a blocked contact", e.method, e.path),
        );
    }
    assert_eq!(
        server.count("messages").await,
        messages_before,
        "no denied request wrote a message"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn tokens_never_exceed_their_creator() {
    let server = TestServer::start().await;
    let alice = server.register("alice", "agent").await;
    let read_only = server
        .post("/v1/tokens", &alice.token, json!({"scopes": ["read"]}))
        .await
        .ok();
    let read_only = read_only["secret"].as_str().expect("secret");
    server
        .post(
            "/v1/tokens",
            read_only,
            json!({"scopes": ["read", "write"]}),
        )
        .await
        .err(403, "forbidden");
    server
        .post("/v1/tokens", &alice.token, json!({"scopes": []}))
        .await
        .err(400, "invalid_argument");
    server
        .post("/v1/tokens", &alice.token, json!({"scopes": ["admin"]}))
        .await
        .err(400, "invalid_json");
    // Restricting to a room the identity is not in is refused.
    server
        .post(
            "/v1/tokens",
            &alice.token,
            json!({"scopes": ["read"], "roomIds": [uuid::Uuid::now_v7()]}),
        )
        .await
        .err(404, "not_found");
    // Revoking twice keeps the first revocation time.
    let spare = server
        .post("/v1/tokens", &alice.token, json!({"scopes": ["read"]}))
        .await
        .ok();
    let spare_path = format!("/v1/tokens/{}", spare["id"].as_str().expect("id"));
    let first = server.delete(&spare_path, &alice.token).await.ok();
    assert!(first["revokedAt"].is_string());
    let again = server.delete(&spare_path, &alice.token).await.ok();
    assert_eq!(again["revokedAt"], first["revokedAt"]);
    server
        .delete(
            &format!("/v1/tokens/{}", uuid::Uuid::now_v7()),
            &alice.token,
        )
        .await
        .err(404, "not_found");
    // Secrets are never listed and only hashes are stored.
    let list = server.get("/v1/tokens", &alice.token).await.ok();
    assert!(!list.to_string().contains("rlg_"));
    assert!(
        list["tokens"]
            .as_array()
            .expect("tokens")
            .iter()
            .any(|t| t["current"] == true)
    );
    use diesel::sql_types::Text;
    use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
    #[derive(diesel::QueryableByName)]
    struct Hash {
        #[diesel(sql_type = Text)]
        h: String,
    }
    let mut conn = AsyncPgConnection::establish(server.db.url())
        .await
        .expect("connect");
    let hashes: Vec<Hash> =
        diesel::sql_query("SELECT encode(secret_hash, 'escape') AS h FROM tokens")
            .load(&mut conn)
            .await
            .expect("hashes");
    assert!(hashes.iter().all(|h| !h.h.contains(&alice.token)));
}
