//! Table tests of [`super::serve`].

use serde_json::json;
use uuid::Uuid;

use super::jsonrpc::A2aError;
use super::serve::*;
use super::types::{Message, Part, Role, TaskState};
use crate::ids::IdentityNumber;
use crate::wire::{
    Delivery, DeliveryState, IdentityKind, IdentityRef, MAX_TEXT_BYTES, MessageEnvelope,
    RecipientDelivery, Timestamp,
};

const ROOM: Uuid = Uuid::from_u128(0x0197_0000_0000_7000_8000_0000_0000_0001);
const QUESTION: Uuid = Uuid::from_u128(0x0197_0000_0000_7000_8000_0000_0000_0002);
const REPLY: Uuid = Uuid::from_u128(0x0197_0000_0000_7000_8000_0000_0000_0003);
const EARLIER: Uuid = Uuid::from_u128(0x0197_0000_0000_7000_8000_0000_0000_0004);

fn number(text: &str) -> IdentityNumber {
    IdentityNumber::parse(text).expect("number")
}

fn at(text: &str) -> Timestamp {
    Timestamp::parse(text).expect("time")
}

fn envelope(id: Uuid, text: Option<&str>, kind: IdentityKind) -> MessageEnvelope {
    MessageEnvelope {
        conversation_id: ROOM,
        message_id: id,
        seq: 1,
        sender: IdentityRef {
            id: Uuid::nil(),
            number: number("100000001"),
            kind,
        },
        text: text.map(str::to_owned),
        sealed: None,
        ask: kind == IdentityKind::Person,
        deadline: None,
        reply_to: None,
        by_runtime: kind == IdentityKind::Agent,
        created_at: at("2026-12-07T11:00:00Z"),
    }
}

fn delivery(state: DeliveryState, reason: Option<&str>) -> Delivery {
    Delivery {
        conversation_id: ROOM,
        message_id: QUESTION,
        state,
        canceled: state == DeliveryState::Canceled,
        recipients: vec![RecipientDelivery {
            identity_id: Uuid::nil(),
            number: number("200000001"),
            state,
            reason: reason.map(str::to_owned),
            attempts: 1,
            reply_message_id: (state == DeliveryState::Answered).then_some(REPLY),
            listeners: 1,
        }],
        updated_at: at("2026-12-07T11:00:05Z"),
    }
}

#[test]
fn a_question_and_its_delivery_read_as_a_task() {
    let question = envelope(QUESTION, Some("hello"), IdentityKind::Person);
    let reply = envelope(REPLY, Some("HELLO"), IdentityKind::Agent);
    // state, reason, reply given → task state, status text, artifacts, history
    let table = [
        (
            DeliveryState::Queued,
            None,
            false,
            TaskState::Submitted,
            None,
            0,
            1,
        ),
        (
            DeliveryState::Working,
            None,
            false,
            TaskState::Working,
            None,
            0,
            1,
        ),
        (
            DeliveryState::Answered,
            None,
            true,
            TaskState::Completed,
            Some("HELLO"),
            1,
            2,
        ),
        (
            DeliveryState::Failed,
            Some("attempts_exhausted"),
            false,
            TaskState::Failed,
            Some("attempts_exhausted"),
            0,
            1,
        ),
        (
            DeliveryState::Rejected,
            Some("sender_not_allowed"),
            false,
            TaskState::Rejected,
            Some("sender_not_allowed"),
            0,
            1,
        ),
        (
            DeliveryState::Canceled,
            None,
            false,
            TaskState::Canceled,
            None,
            0,
            1,
        ),
        // A reply only counts for a completed task.
        (
            DeliveryState::Working,
            None,
            true,
            TaskState::Working,
            None,
            0,
            1,
        ),
    ];
    for (state, reason, with_reply, task_state, said, artifacts, history) in table {
        let task = task_of(
            &question,
            &delivery(state, reason),
            with_reply.then_some(&reply),
            TaskShape::FULL,
        );
        let case = format!("{state:?}");
        assert_eq!(task.id, QUESTION.to_string(), "{case}");
        assert_eq!(task.context_id, ROOM.to_string(), "{case}");
        assert_eq!(task.status.state, task_state, "{case}");
        let status_text = task
            .status
            .message
            .as_ref()
            .and_then(super::rules::message_text);
        assert_eq!(status_text.as_deref(), said, "{case}");
        if let Some(message) = &task.status.message {
            assert_eq!(message.role, Role::Agent, "{case}");
            assert_eq!(message.task_id, task.id, "{case}");
        }
        assert_eq!(task.artifacts.len(), artifacts, "{case}");
        assert_eq!(task.history.len(), history, "{case}");
        assert_eq!(task.history[0].role, Role::User, "{case}");
        assert_eq!(task.history[0].parts, vec![Part::text("hello")], "{case}");
        assert_eq!(
            task.status.timestamp.map(|t| t.to_string()).as_deref(),
            Some("2026-12-07T11:00:05Z")
        );
        assert_eq!(task.metadata, None, "{case}");
    }
}

#[test]
fn history_and_artifacts_follow_the_shape() {
    let question = envelope(QUESTION, Some("hello"), IdentityKind::Person);
    let reply = envelope(REPLY, Some("HELLO"), IdentityKind::Agent);
    let answered = delivery(DeliveryState::Answered, None);
    for (history, artifacts, ids) in [
        (None, true, vec![QUESTION, REPLY]),
        (Some(5), true, vec![QUESTION, REPLY]),
        (Some(1), false, vec![REPLY]),
        (Some(0), true, vec![]),
    ] {
        let task = task_of(
            &question,
            &answered,
            Some(&reply),
            TaskShape { history, artifacts },
        );
        let got: Vec<String> = task.history.iter().map(|m| m.message_id.clone()).collect();
        let want: Vec<String> = ids.iter().map(Uuid::to_string).collect();
        assert_eq!(got, want, "{history:?}");
        assert_eq!(task.artifacts.len(), usize::from(artifacts), "{history:?}");
        // The reply is the status message whatever the shape.
        assert!(task.status.message.is_some());
    }
}

#[test]
fn sealed_text_is_not_offered_and_a_continuation_names_its_task() {
    let mut question = envelope(QUESTION, None, IdentityKind::Person);
    question.reply_to = Some(EARLIER);
    let reply = envelope(REPLY, None, IdentityKind::Agent);
    let task = task_of(
        &question,
        &delivery(DeliveryState::Answered, None),
        Some(&reply),
        TaskShape::FULL,
    );
    let value = serde_json::to_value(&task).expect("json");
    assert_eq!(value["metadata"], json!({"sealed": true}));
    assert_eq!(value["history"][0]["metadata"], json!({"sealed": true}));
    assert_eq!(
        value["history"][0]["referenceTaskIds"],
        json!([EARLIER.to_string()])
    );
    assert!(
        value["history"][0]
            .get("parts")
            .is_none_or(|p| p == &json!([]))
    );
    assert!(value["status"]["message"]["parts"] == json!([]));
    assert_eq!(task.status.state, TaskState::Completed);
}

fn message(parts: Vec<Part>) -> Message {
    Message {
        message_id: "m".into(),
        role: Role::User,
        parts,
        ..Message::default()
    }
}

#[test]
fn only_bounded_text_makes_a_question() {
    let file = Part {
        url: Some("https://x.example/a.png".into()),
        media_type: "image/png".into(),
        ..Part::default()
    };
    let table: Vec<(Vec<Part>, Result<String, A2aError>)> = vec![
        (vec![Part::text("hi")], Ok("hi".into())),
        (vec![Part::text("a"), Part::text("b")], Ok("a\nb".into())),
        (vec![], Err(A2aError::InvalidParams)),
        (vec![Part::text("  ")], Err(A2aError::InvalidParams)),
        (
            vec![Part::text("hi"), file],
            Err(A2aError::ContentTypeNotSupported),
        ),
        (
            vec![Part::text("x".repeat(MAX_TEXT_BYTES))],
            Ok("x".repeat(MAX_TEXT_BYTES)),
        ),
        (
            vec![Part::text("x".repeat(MAX_TEXT_BYTES + 1))],
            Err(A2aError::InvalidParams),
        ),
        (
            vec![Part::text("x".repeat(MAX_TEXT_BYTES / 2)); 2],
            Err(A2aError::InvalidParams),
        ),
        (
            vec![Part::text("a"); MAX_PARTS + 1],
            Err(A2aError::InvalidParams),
        ),
    ];
    for (parts, expected) in table {
        let got = question_text(&message(parts.clone())).map_err(|e| e.kind().expect("a2a"));
        assert_eq!(got, expected, "{} parts", parts.len());
    }
}

#[test]
fn numbers_of_the_methods_are_bounded() {
    assert_eq!(history_length(None).ok(), Some(None));
    assert_eq!(history_length(Some(0)).ok(), Some(Some(0)));
    assert!(history_length(Some(-1)).is_err());
    for (given, expected) in [
        (None, Some(DEFAULT_PAGE_SIZE)),
        (Some(1), Some(1)),
        (Some(100), Some(100)),
        (Some(0), None),
        (Some(101), None),
        (Some(-5), None),
    ] {
        assert_eq!(page_size(given).ok(), expected, "{given:?}");
    }
    for (given, expected) in [
        ("", Some(None)),
        ("42", Some(Some(42))),
        ("0", None),
        ("-3", None),
        ("abc", None),
    ] {
        assert_eq!(page_token(given).ok(), expected, "{given:?}");
    }
}

#[test]
fn the_card_names_one_json_rpc_interface_with_bearer_auth() {
    let url = agent_url("https://relay.example/", &number("200000001"));
    assert_eq!(url, "https://relay.example/a2a/200000001");
    let card = agent_card("Support bot", &url, "0.1.0");
    let value = serde_json::to_value(&card).expect("json");
    assert_eq!(value["name"], "Support bot");
    assert_eq!(
        value["supportedInterfaces"],
        json!([{"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}])
    );
    assert_eq!(value["capabilities"]["streaming"], true);
    assert_eq!(
        value["securitySchemes"][SECURITY_SCHEME]["httpAuthSecurityScheme"]["scheme"],
        "Bearer"
    );
    assert_eq!(value["defaultInputModes"], json!(["text/plain"]));
    assert!(
        card.description.contains("sealed"),
        "the card says sealed messages are not offered"
    );
}

#[test]
fn versions_and_public_urls() {
    for (header, ok) in [
        ("1.0", true),
        ("1.2", true),
        (" 1.0 ", true),
        ("1", true),
        ("0.3", false),
        ("2.0", false),
        ("", false),
        ("1.x", false),
    ] {
        assert_eq!(version_supported(header), ok, "{header:?}");
    }
    for (tls, host, expected) in [
        (false, "127.0.0.1:8080", Some("http://127.0.0.1:8080")),
        (true, "relay.example", Some("https://relay.example")),
        (false, "[::1]:80", Some("http://[::1]:80")),
        (false, "", None),
        (false, "evil.example/path", None),
        (false, "a b", None),
    ] {
        assert_eq!(
            public_url_from_host(tls, host).as_deref(),
            expected,
            "{host:?}"
        );
    }
    for (given, expected) in [
        ("https://relay.example/", Ok("https://relay.example")),
        (
            "http://10.0.0.1:8080/relay",
            Ok("http://10.0.0.1:8080/relay"),
        ),
        ("ftp://relay.example", Err(())),
        ("https://", Err(())),
        ("https://relay.example/?q=1", Err(())),
    ] {
        assert_eq!(
            public_url(given).map_err(|_| ()),
            expected.map(str::to_owned),
            "{given}"
        );
    }
}

#[test]
fn a_stream_reports_each_change_and_working_it_passed_between_reads() {
    use TaskState::*;
    let table = [
        (Submitted, Submitted, 0, vec![]),
        (Submitted, Working, 1, vec![Working]),
        (Working, Completed, 1, vec![Completed]),
        (Submitted, Completed, 1, vec![Working, Completed]),
        (Submitted, Failed, 3, vec![Working, Failed]),
        // Never leased: rejected by policy, canceled while queued, answered
        // by hand.
        (Submitted, Rejected, 0, vec![Rejected]),
        (Submitted, Canceled, 0, vec![Canceled]),
        (Submitted, Completed, 0, vec![Completed]),
        (Working, Working, 1, vec![]),
        (Working, Submitted, 1, vec![Submitted]),
    ];
    for (last, now, attempts, expected) in table {
        assert_eq!(
            stream_steps(last, now, attempts),
            expected,
            "{last:?} → {now:?}"
        );
    }
}
