//! The scan over HTTP: rooms joined later, wakes across servers, races with sends.

use super::*;

#[tokio::test(flavor = "multi_thread")]
async fn a_message_through_one_server_wakes_a_runtime_socket_on_another() {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let s = setup().await;
    let runtime = s.runtime("woken", json!({})).await;
    let (b_url, _stop) = s.server.sibling().await;
    let mut request = format!(
        "{}/v1/runtimes/{runtime}/socket",
        b_url.replacen("http://", "ws://", 1)
    )
    .into_client_request()
    .expect("request");
    request.headers_mut().insert(
        "authorization",
        format!("Bearer {}", s.agent.token).parse().expect("header"),
    );
    let (mut socket, _) = tokio_tungstenite::connect_async(request)
        .await
        .expect("connect");
    s.ask("wake the worker").await;
    let frame = common::next_frame(&mut socket, Duration::from_secs(10))
        .await
        .expect("signal");
    assert_eq!(frame, r#"{"event":"inbox_changed"}"#);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_room_joined_later_is_scanned_from_its_first_message() {
    let s = setup().await;
    let runtime = s.runtime("joiner", json!({})).await;
    // A group the agent is not in yet already holds a question.
    let friend = s.server.register("friend", "person").await;
    s.server.befriend(&s.asker, &friend).await;
    let group = s
        .server
        .create_room(&s.asker, "later", json!([friend.number]))
        .await
        .ok()["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let old = s
        .server
        .send(
            &s.asker,
            json!({"roomId": group, "text": "asked before you came", "ask": true}),
        )
        .await;
    s.claim_none(&runtime).await;
    // The agent joins: no new message is needed for the old question to be found.
    s.server.add_member(&s.asker, &group, &s.agent).await.ok();
    let job = s.claim_one(&runtime).await;
    assert_eq!(job["message"]["messageId"], old["messageId"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_question_sent_while_a_claim_scans_its_room_is_never_lost() {
    let s = setup().await;
    let runtime = s
        .runtime(
            "racer",
            json!({"concurrency": 64, "maxCallsPerHour": 10000}),
        )
        .await;
    let mut answered = 0;
    for round in 0..40 {
        // A plain message marks the room; then a claim and a question race.
        s.server
            .send(
                &s.asker,
                json!({"roomId": s.room, "text": format!("note {round}")}),
            )
            .await;
        let claim = {
            let server = s.server.clone();
            let token = s.agent.token.clone();
            let path = format!("/v1/runtimes/{runtime}/claim");
            tokio::spawn(
                async move { server.post(&path, &token, json!({"maxJobs": 8})).await.ok() },
            )
        };
        let question = s.ask(&format!("question {round}")).await;
        let mut seen: Vec<Value> = claim.await.expect("task")["jobs"]
            .as_array()
            .expect("jobs")
            .clone();
        seen.extend(
            s.claim(&runtime, 8).await.ok()["jobs"]
                .as_array()
                .expect("jobs")
                .clone(),
        );
        assert!(
            seen.iter()
                .any(|j| j["message"]["messageId"] == question.as_str()),
            "round {round}: the question was not scanned"
        );
        for job in &seen {
            s.finish(&runtime, job, json!({"reply": "ok"})).await.ok();
            answered += 1;
        }
    }
    assert_eq!(answered, 40);
}
