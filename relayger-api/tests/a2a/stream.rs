//! `SendStreamingMessage` over real HTTP: Server-Sent Events in order, each
//! a JSON-RPC response, driven by the delivery's changes.

use std::time::Duration;

use serde_json::{Value, json};

use super::{World, text_message};

/// Reads one SSE event's data at a time from a streaming response (comment
/// lines are keep-alives).
struct Events {
    response: reqwest::Response,
    buffer: String,
}

impl Events {
    /// The next event's JSON, or `None` once the stream ended.
    async fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let data: Vec<&str> = block
                    .lines()
                    .filter_map(|line| line.strip_prefix("data:"))
                    .map(str::trim_start)
                    .collect();
                if data.is_empty() {
                    continue;
                }
                return Some(serde_json::from_str(&data.join("\n")).expect("event JSON"));
            }
            let chunk = tokio::time::timeout(Duration::from_secs(10), self.response.chunk())
                .await
                .expect("an event within 10 s")
                .expect("chunk")?;
            self.buffer
                .push_str(std::str::from_utf8(&chunk).expect("utf-8"));
        }
    }
}

fn state_of(event: &Value) -> (&str, &str) {
    let result = &event["result"];
    if let Some(task) = result.get("task") {
        ("task", task["status"]["state"].as_str().expect("state"))
    } else if let Some(update) = result.get("statusUpdate") {
        (
            "statusUpdate",
            update["status"]["state"].as_str().expect("state"),
        )
    } else if result.get("artifactUpdate").is_some() {
        ("artifactUpdate", "")
    } else {
        panic!("an unexpected event: {event}")
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stream_shows_the_task_then_working_then_completed_and_ends() {
    let w = World::new().await;
    let response = reqwest::Client::new()
        .post(format!("{}/a2a/{}", w.server().base_url, w.number()))
        .bearer_auth(&w.asker.token)
        .header("accept", "text/event-stream")
        .json(&json!({
            "jsonrpc": "2.0", "id": 11, "method": "SendStreamingMessage",
            "params": {"message": text_message("stream me")}
        }))
        .send()
        .await
        .expect("post");
    assert_eq!(response.status(), 200);
    assert!(
        response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"))
    );
    let mut events = Events {
        response,
        buffer: String::new(),
    };
    let first = events.next().await.expect("the task");
    assert_eq!(first["id"], 11);
    assert_eq!(state_of(&first), ("task", "TASK_STATE_SUBMITTED"));
    let task_id = first["result"]["task"]["id"].clone();

    let job = w.claim().await;
    let working = events.next().await.expect("working");
    assert_eq!(state_of(&working), ("statusUpdate", "TASK_STATE_WORKING"));
    assert_eq!(working["result"]["statusUpdate"]["taskId"], task_id);

    w.server()
        .finish_job(
            &w.bot.agent.token,
            &w.runtime,
            &job,
            json!({"reply": "STREAM ME"}),
        )
        .await
        .ok();
    let artifact = events.next().await.expect("the reply as an artifact");
    assert_eq!(state_of(&artifact), ("artifactUpdate", ""));
    assert_eq!(
        artifact["result"]["artifactUpdate"]["artifact"]["parts"],
        json!([{"text": "STREAM ME"}])
    );
    let done = events.next().await.expect("completed");
    assert_eq!(state_of(&done), ("statusUpdate", "TASK_STATE_COMPLETED"));
    assert_eq!(
        done["result"]["statusUpdate"]["status"]["message"]["parts"],
        json!([{"text": "STREAM ME"}])
    );
    assert_eq!(
        events.next().await,
        None,
        "the stream ends with the final state"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_subscription_follows_a_task_to_its_cancel() {
    let w = World::new().await;
    let task = w.submit("watch me").await;
    let response = reqwest::Client::new()
        .post(format!("{}/a2a/{}", w.server().base_url, w.number()))
        .bearer_auth(&w.asker.token)
        .json(&json!({
            "jsonrpc": "2.0", "id": "s", "method": "SubscribeToTask",
            "params": {"id": task["id"]}
        }))
        .send()
        .await
        .expect("post");
    let mut events = Events {
        response,
        buffer: String::new(),
    };
    let first = events.next().await.expect("the task");
    assert_eq!(state_of(&first), ("task", "TASK_STATE_SUBMITTED"));
    super::result(w.call("CancelTask", json!({"id": task["id"]})).await);
    let canceled = events.next().await.expect("canceled");
    assert_eq!(state_of(&canceled), ("statusUpdate", "TASK_STATE_CANCELED"));
    assert_eq!(events.next().await, None);
}
