//! The client's rules on what the Python SDK (`a2a-sdk` 1.3.0) really
//! sends: its SSE streams and JSON-RPC answers as captured in `fixtures/`
//! (from `tests/a2a/agent.py`), decoded chunk by chunk and folded to the
//! handler's result; and the end mapping, state by state.

use relayger_core::a2a::{
    Artifact, Message, Part, Role, StreamResponse, Task, TaskState, TaskStatus,
};
use relayger_core::wire::MAX_TEXT_BYTES;
use serde_json::json;

use super::end::{RemoteEnd, end_of_task, result};
use super::exchange::StreamState;
use super::rpc::{RemoteError, rpc_result};
use super::sse::SseDecoder;
use crate::{HandlerError, HandlerOutput};

const STREAM_UPPER: &str = include_str!("fixtures/stream-upper.sse");
const STREAM_REVERSE: &str = include_str!("fixtures/stream-reverse.sse");
const STREAM_FAIL: &str = include_str!("fixtures/stream-fail.sse");
const STREAM_REJECT: &str = include_str!("fixtures/stream-reject.sse");
const SEND_MESSAGE: &str = include_str!("fixtures/send-message.json");
const GET_TASK: &str = include_str!("fixtures/get-task.json");
const GET_TASK_NOT_FOUND: &str = include_str!("fixtures/get-task-not-found.json");

/// Feeds `stream` in `chunk`-byte pieces; the end, and how many events
/// came before it (and none may come after).
fn fold(stream: &str, chunk: usize) -> (RemoteEnd, usize) {
    let mut decoder = SseDecoder::new(64 * 1024);
    let mut seen = StreamState::default();
    let mut events = 0;
    let mut end = None;
    for piece in stream.as_bytes().chunks(chunk) {
        for event in decoder.push(piece).expect("decodes") {
            assert!(end.is_none(), "an event after the end: {event:?}");
            events += 1;
            let response: StreamResponse = rpc_result(event.data.as_bytes()).expect("result");
            end = seen.apply(response);
        }
    }
    (end.expect("the stream ended the task"), events)
}

#[test]
fn python_sdk_streams_end_as_handler_results() {
    let table: [(&str, &str, usize, Result<HandlerOutput, HandlerError>); 4] = [
        ("upper", STREAM_UPPER, 3, Ok(HandlerOutput::reply("HELLO"))),
        (
            "reverse",
            STREAM_REVERSE,
            4,
            Ok(HandlerOutput::reply("olleh")),
        ),
        (
            "fail",
            STREAM_FAIL,
            3,
            Err(HandlerError::new(
                "a2a_failed: backend_down (the remote agent broke)",
            )),
        ),
        (
            "reject",
            STREAM_REJECT,
            3,
            Err(HandlerError::new("a2a_rejected (not my kind of question)")),
        ),
    ];
    for (name, stream, count, expected) in table {
        for chunk in [1, 7, 4096] {
            let (end, events) = fold(stream, chunk);
            assert_eq!(events, count, "{name} in {chunk}-byte chunks");
            assert_eq!(result(end), expected, "{name} in {chunk}-byte chunks");
        }
    }
}

#[test]
fn python_sdk_answers_to_send_and_get_task() {
    let sent: relayger_core::a2a::SendMessageResponse =
        rpc_result(SEND_MESSAGE.as_bytes()).expect("result");
    let relayger_core::a2a::SendMessageResponse::Task(task) = sent else {
        panic!("a task: {sent:?}");
    };
    assert_eq!(task.status.state, TaskState::Submitted);
    assert_eq!(end_of_task(&task), None, "still to be followed");
    let polled: Task = rpc_result(GET_TASK.as_bytes()).expect("result");
    assert_eq!(polled.id, task.id);
    assert_eq!(
        end_of_task(&polled).map(result),
        Some(Ok(HandlerOutput::reply("HELLO")))
    );
    let missing: Result<Task, _> = rpc_result(GET_TASK_NOT_FOUND.as_bytes());
    assert_eq!(missing.as_ref().err(), Some(&RemoteError::Rpc(-32001)));
    assert_eq!(
        missing.err().map(|err| err.reason()).as_deref(),
        Some("a2a_error: task_not_found")
    );
}

fn message(text: Option<&str>, metadata: Option<serde_json::Value>) -> Message {
    Message {
        message_id: "m".into(),
        role: Role::Agent,
        parts: text.map(Part::text).into_iter().collect(),
        metadata: metadata.and_then(|value| value.as_object().cloned()),
        ..Message::default()
    }
}

fn task(state: TaskState, said: Option<Message>, artifacts: &[&str]) -> Task {
    Task {
        id: "t".into(),
        status: TaskStatus {
            state,
            message: said,
            timestamp: None,
        },
        artifacts: artifacts
            .iter()
            .enumerate()
            .map(|(i, text)| Artifact {
                artifact_id: format!("a{i}"),
                parts: vec![Part::text(*text)],
                ..Artifact::default()
            })
            .collect(),
        ..Task::default()
    }
}

#[test]
fn remote_ends_map_to_results() {
    let said = |text: &str| Some(message(Some(text), None));
    let coded = |text: &str, metadata| Some(message(Some(text), Some(metadata)));
    let long = "word ".repeat(100);
    let huge = "x".repeat(MAX_TEXT_BYTES + 1);
    let failed = |reason: &str| Some(Err(HandlerError::new(reason)));
    let table: Vec<(Task, Option<Result<HandlerOutput, HandlerError>>)> = vec![
        (task(TaskState::Submitted, None, &[]), None),
        (task(TaskState::Working, said("thinking"), &[]), None),
        (task(TaskState::Unspecified, None, &[]), None),
        // The status message's text first, else the artifacts'.
        (
            task(TaskState::Completed, said("HI"), &["artifact"]),
            Some(Ok(HandlerOutput::reply("HI"))),
        ),
        (
            task(TaskState::Completed, None, &["A", "B"]),
            Some(Ok(HandlerOutput::reply("A\nB"))),
        ),
        (
            task(TaskState::Completed, Some(message(None, None)), &["A"]),
            Some(Ok(HandlerOutput::reply("A"))),
        ),
        (task(TaskState::Completed, None, &[]), failed("a2a_no_text")),
        (
            task(TaskState::Completed, said("  "), &[]),
            failed("a2a_no_text"),
        ),
        (
            task(TaskState::Completed, said(&huge), &[]),
            Some(Ok(HandlerOutput::skip("reply_too_large"))),
        ),
        (task(TaskState::Failed, None, &[]), failed("a2a_failed")),
        (
            task(
                TaskState::Failed,
                coded("quota", json!({"code": "quota_exceeded"})),
                &[],
            ),
            failed("a2a_failed: quota_exceeded (quota)"),
        ),
        // A code that is not a snake_case word is not kept; the message is
        // one short line.
        (
            task(
                TaskState::Rejected,
                coded(&long, json!({"reason": "Not A Code\n"})),
                &[],
            ),
            failed(&format!("a2a_rejected ({}…)", &long[..79])),
        ),
        (
            task(
                TaskState::Rejected,
                coded("", json!({"reason": "not_allowed"})),
                &[],
            ),
            failed("a2a_rejected: not_allowed"),
        ),
        (
            task(TaskState::Canceled, said("bye"), &[]),
            failed("a2a_canceled (bye)"),
        ),
        (
            task(TaskState::InputRequired, said("which one?\nA or B"), &[]),
            failed("a2a_input_required (which one? A or B)"),
        ),
        (
            task(TaskState::AuthRequired, None, &[]),
            failed("a2a_auth_required"),
        ),
    ];
    for (task, expected) in table {
        assert_eq!(end_of_task(&task).map(result), expected, "{task:?}");
    }
}

#[test]
fn a_stream_may_start_with_an_update_and_append_artifact_chunks() {
    let mut seen = StreamState::default();
    let events = [
        json!({"artifactUpdate": {"taskId": "t", "artifact": {"artifactId": "a", "parts": [{"text": "he"}]}}}),
        json!({"artifactUpdate": {"taskId": "t", "append": true, "artifact": {"artifactId": "a", "parts": [{"text": "llo"}]}}}),
        json!({"statusUpdate": {"taskId": "t", "status": {"state": "TASK_STATE_WORKING"}}}),
    ];
    for event in events {
        let event: StreamResponse = serde_json::from_value(event).expect("event");
        assert_eq!(seen.apply(event), None);
    }
    let done: StreamResponse = serde_json::from_value(
        json!({"statusUpdate": {"taskId": "t", "status": {"state": "TASK_STATE_COMPLETED"}}}),
    )
    .expect("event");
    let end = seen.apply(done).expect("ended");
    assert_eq!(result(end), Ok(HandlerOutput::reply("he\nllo")));
    // A message is the whole answer.
    let mut seen = StreamState::default();
    let answer: StreamResponse = serde_json::from_value(
        json!({"message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "hi"}]}}),
    )
    .expect("event");
    assert_eq!(
        seen.apply(answer).map(result),
        Some(Ok(HandlerOutput::reply("hi")))
    );
}

#[test]
fn agent_urls_are_checked_when_the_handler_is_made() {
    let table = [
        ("https://agent.example.com", true),
        (
            "https://agent.example.com/a2a/7/.well-known/agent-card.json",
            true,
        ),
        ("http://127.0.0.1:8000", true),
        ("http://localhost:8000/agent", true),
        ("http://agent.example.com", false),
        ("https://user:pass@agent.example.com", false),
        ("https://token@agent.example.com", false),
        ("ftp://127.0.0.1/agent", false),
        ("agent.example.com", false),
        ("", false),
    ];
    for (url, usable) in table {
        assert_eq!(super::A2aHandler::new(url).is_ok(), usable, "{url}");
    }
}

#[test]
fn the_bearer_is_not_in_debug_output() {
    let handler = super::A2aHandler::new("https://agent.example.com")
        .expect("usable")
        .with_bearer_token("s3cret-bearer".to_owned());
    let shown = format!("{handler:?}");
    assert!(!shown.contains("s3cret"), "{shown}");
    assert!(shown.contains("<hidden>"), "{shown}");
}
