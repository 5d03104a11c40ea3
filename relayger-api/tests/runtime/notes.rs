//! The runtime's notes: shared by its agent's tokens, private from others.

use super::*;

#[tokio::test(flavor = "multi_thread")]
async fn notes_are_shared_by_the_agents_tokens_and_private_from_everyone_else() {
    let s = setup().await;
    let runtime = s.runtime("memory", json!({})).await;
    let source = s.ask("context").await;
    let path = format!("/v1/runtimes/{runtime}/notes/{}/decision", s.room);
    let note = s
        .server
        .request(reqwest::Method::PUT, &path, Some(&s.agent.token), Some(json!({"version": 0, "text": "Decision from the last conversation", "sourceMessageIds": [source]})))
        .await
        .ok();
    assert_eq!(note["version"], 1);
    let other_token = s
        .server
        .post("/v1/tokens", &s.agent.token, json!({"scopes": ["read"]}))
        .await
        .ok();
    let list_path = format!("/v1/runtimes/{runtime}/notes/{}", s.room);
    let seen = s
        .server
        .get(&list_path, other_token["secret"].as_str().expect("secret"))
        .await
        .ok();
    assert_eq!(
        seen["notes"][0]["text"],
        "Decision from the last conversation"
    );
    // The asker (another identity) cannot see the runtime's notes.
    s.server
        .get(&list_path, &s.asker.token)
        .await
        .err(404, "not_found");
    // A source from another room is refused; an update needs the version.
    s.server
        .request(
            reqwest::Method::PUT,
            &path,
            Some(&s.agent.token),
            Some(json!({"version": 0, "text": "again"})),
        )
        .await
        .err(409, "version_conflict");
    s.server
        .request(
            reqwest::Method::PUT,
            &path,
            Some(&s.agent.token),
            Some(json!({"version": 1, "text": "x", "sourceMessageIds": [uuid::Uuid::now_v7()]})),
        )
        .await
        .err(400, "invalid_argument");
    // Once the contact ends, the notes of that room cannot be read.
    s.server
        .delete(&format!("/v1/contacts/{}", s.asker.number), &s.agent.token)
        .await
        .ok();
    s.server
        .get(&list_path, &s.agent.token)
        .await
        .err(404, "not_found");
}
