//! The API edge against hostile clients: room-restricted tokens stay inside
//! their rooms, slow clients cannot starve the server, sockets are bounded.

mod common;

use common::{TestServer, User};
use reqwest::Method;
use serde_json::{Value, json};

async fn new_token(server: &TestServer, user: &User, body: Value) -> Value {
    server.post("/v1/tokens", &user.token, body).await.ok()
}

fn secret(token: &Value) -> &str {
    token["secret"].as_str().expect("secret")
}

/// A token restricted to one room cannot act on the identity as a whole:
/// configure or delete a runtime (whose policy and notes span every room),
/// take a new runtime slot, create, list or revoke the identity's tokens, or
/// act on contacts. Each is 403 `token_restricted` and changes nothing. A
/// restricted worker still attaches to its runtime and claims its own
/// room's jobs (and only those).
#[tokio::test(flavor = "multi_thread")]
async fn a_room_restricted_token_acts_only_inside_its_rooms() {
    let server = TestServer::start().await;
    let agent = server.register("agent", "agent").await;
    let inside = server.register("inside", "person").await;
    let outside = server.register("outside", "person").await;
    let stranger = server.register("stranger", "person").await;
    let inside_room = server.befriend(&inside, &agent).await;
    let outside_room = server.befriend(&outside, &agent).await;
    let registration = json!({"name": "assistant", "from": "beginning"});
    let runtime = server
        .post("/v1/runtimes", &agent.token, registration.clone())
        .await
        .ok();
    let runtime_id = runtime["id"].as_str().expect("id");
    let restricted = new_token(
        &server,
        &agent,
        json!({"scopes": ["read", "write", "contacts"], "roomIds": [inside_room]}),
    )
    .await;
    let worker = secret(&restricted);
    let spare = new_token(&server, &agent, json!({"scopes": ["read"]})).await;
    for (room, from) in [(&inside_room, &inside), (&outside_room, &outside)] {
        server
            .send(
                from,
                json!({"roomId": room, "text": "question?", "ask": true}),
            )
            .await;
    }

    let runtime_path = format!("/v1/runtimes/{runtime_id}");
    let tables = [
        "runtimes",
        "tokens",
        "contact_requests",
        "contacts",
        "blocks",
    ];
    let mut before = Vec::new();
    for table in tables {
        before.push(server.count(table).await);
    }
    let refused: [(Method, String, Option<Value>); 9] = [
        (
            Method::POST,
            format!("{runtime_path}/configure"),
            Some(json!({"version": 1, "policy": {"allowedRooms": [inside_room]}})),
        ),
        (Method::DELETE, runtime_path.clone(), None),
        (
            Method::POST,
            "/v1/runtimes".into(),
            Some(json!({"name": "another", "from": "now"})),
        ),
        (
            Method::POST,
            "/v1/tokens".into(),
            Some(json!({"scopes": ["read"], "roomIds": [inside_room]})),
        ),
        (Method::GET, "/v1/tokens".into(), None),
        (
            Method::DELETE,
            format!("/v1/tokens/{}", spare["id"].as_str().expect("id")),
            None,
        ),
        (
            Method::POST,
            "/v1/contacts/requests".into(),
            Some(json!({"number": stranger.number})),
        ),
        (
            Method::POST,
            format!("/v1/contacts/{}/block", outside.number),
            None,
        ),
        (
            Method::DELETE,
            format!("/v1/contacts/{}", outside.number),
            None,
        ),
    ];
    for (method, path, body) in refused {
        server
            .request(method.clone(), &path, Some(worker), body)
            .await
            .err(403, "token_restricted");
    }
    for (table, count) in tables.into_iter().zip(before) {
        assert_eq!(server.count(table).await, count, "{table} unchanged");
    }
    let inspected = server.get(&runtime_path, &agent.token).await.ok();
    assert_eq!(inspected["version"], 1, "the policy was not configured");

    // The restricted worker attaches to the runtime that exists and claims
    // only its room's question.
    let attached = server.post("/v1/runtimes", worker, registration).await.ok();
    assert_eq!(attached["id"], runtime["id"]);
    let claim = server
        .post(
            &format!("{runtime_path}/claim"),
            worker,
            json!({"maxJobs": 10}),
        )
        .await
        .ok();
    let jobs = claim["jobs"].as_array().expect("jobs");
    assert_eq!(jobs.len(), 1, "{claim}");
    assert_eq!(
        jobs[0]["message"]["conversationId"],
        inside_room.as_str(),
        "{claim}"
    );

    // A restricted token may still revoke itself.
    server
        .delete(
            &format!("/v1/tokens/{}", restricted["id"].as_str().expect("id")),
            worker,
        )
        .await
        .ok();
    server.get("/v1/me", worker).await.err(401, "unauthorized");
}
