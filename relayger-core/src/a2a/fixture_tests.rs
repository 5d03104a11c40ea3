//! Real JSON the Python SDK (`a2a-sdk` 1.3.0) writes
//! (`google.protobuf.json_format.MessageToJson` of `a2a_pb2` objects, in
//! `fixtures/`, written by `fixtures/generate.py`): the Rust types read
//! each and write it back equal.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::card::{AgentCard, SecurityScheme};
use super::requests::{
    CancelTaskRequest, GetTaskRequest, ListTasksRequest, ListTasksResponse, SendMessageRequest,
    SendMessageResponse, SubscribeToTaskRequest,
};
use super::rules::{RemoteEnd, remote_end};
use super::types::{Message, Role, StreamResponse, Task, TaskState};

fn round_trip<T: DeserializeOwned + Serialize>(name: &str, text: &str) -> T {
    let original: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{name}: {e}"));
    let typed: T =
        serde_json::from_value(original.clone()).unwrap_or_else(|e| panic!("{name}: {e}"));
    let written = serde_json::to_value(&typed).expect("serialize");
    assert_eq!(written, original, "{name} does not write back equal");
    typed
}

macro_rules! fixture {
    ($type:ty, $file:literal) => {
        round_trip::<$type>($file, include_str!(concat!("fixtures/", $file)))
    };
}

#[test]
fn the_python_sdks_json_reads_and_writes_back_equal() {
    let card = fixture!(AgentCard, "agent-card.json");
    assert_eq!(card.supported_interfaces[0].protocol_binding, "JSONRPC");
    assert_eq!(card.capabilities.streaming, Some(true));
    assert!(matches!(
        card.security_schemes.get("relaygerToken"),
        Some(SecurityScheme::HttpAuthSecurityScheme(http)) if http.scheme == "Bearer"
    ));
    assert_eq!(card.interface("jsonrpc"), card.supported_interfaces.first());

    let send = fixture!(SendMessageRequest, "send-message-request.json");
    let configuration = send.configuration.expect("configuration");
    assert!(configuration.return_immediately);
    assert_eq!(configuration.history_length, Some(2));
    let question = send.message.expect("message");
    assert_eq!(question.role, Role::User);
    assert_eq!(question.parts[0].as_text(), Some("hello there"));

    let continued = fixture!(SendMessageRequest, "send-message-continue.json");
    assert!(!continued.message.expect("message").task_id.is_empty());

    let done = fixture!(Task, "task-completed.json");
    assert_eq!(
        remote_end(&done),
        Some(RemoteEnd::Answered(Some("HELLO THERE".into())))
    );
    assert_eq!(done.history.len(), 2);
    let response = fixture!(SendMessageResponse, "send-message-response.json");
    assert_eq!(response, SendMessageResponse::Task(done));

    let failed = fixture!(Task, "task-failed.json");
    assert_eq!(failed.status.state, TaskState::Failed);
    assert_eq!(
        failed.status.timestamp.expect("timestamp").to_string(),
        "2026-12-07T11:00:01.250Z"
    );

    let update = fixture!(StreamResponse, "stream-status-update.json");
    assert!(
        matches!(update, StreamResponse::StatusUpdate(event) if event.status.state == TaskState::Working)
    );
    let first = fixture!(StreamResponse, "stream-task.json");
    assert!(
        matches!(first, StreamResponse::Task(task) if task.status.state == TaskState::Submitted)
    );
    let chunk = fixture!(StreamResponse, "stream-artifact-update.json");
    assert!(
        matches!(chunk, StreamResponse::ArtifactUpdate(event) if event.append && !event.last_chunk)
    );
    let said = fixture!(StreamResponse, "stream-message.json");
    assert!(matches!(said, StreamResponse::Message(_)));

    let get = fixture!(GetTaskRequest, "get-task-request.json");
    // `historyLength: 0` is present (proto3 optional), unlike a default.
    assert_eq!(get.history_length, Some(0));
    let list = fixture!(ListTasksRequest, "list-tasks-request.json");
    assert_eq!(list.status, TaskState::Working);
    assert_eq!(list.include_artifacts, Some(true));
    let page = fixture!(ListTasksResponse, "list-tasks-response.json");
    assert_eq!(
        (page.total_size, page.next_page_token.as_str()),
        (3, "next")
    );
    fixture!(CancelTaskRequest, "cancel-task-request.json");
    fixture!(SubscribeToTaskRequest, "subscribe-to-task-request.json");

    let kinds = fixture!(Message, "part-kinds.json");
    let texts: Vec<_> = kinds.parts.iter().map(|part| part.as_text()).collect();
    assert_eq!(texts, [Some("t"), None, None, None]);
}

#[test]
fn unknown_fields_are_read_leniently_but_bad_shapes_are_not() {
    let task: Task = serde_json::from_value(serde_json::json!({
        "id": "t", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}, "later": 1
    }))
    .expect("lenient");
    assert_eq!(task.status.state, TaskState::Working);
    for bad in [
        serde_json::json!({"id": "t", "status": {"state": "WORKING"}}),
        serde_json::json!({"id": 5}),
        serde_json::json!({"id": "t", "status": {"timestamp": "yesterday"}}),
    ] {
        assert!(
            serde_json::from_value::<Task>(bad.clone()).is_err(),
            "{bad}"
        );
    }
}
