//! The request line the worker writes to the handler.

use super::*;

#[test]
fn request_line_is_camel_case_and_omits_absent_fields() {
    let message = MessageEnvelope {
        conversation_id: Uuid::nil(),
        message_id: Uuid::parse_str(SOURCE).expect("uuid"),
        seq: 3,
        sender: IdentityRef {
            id: Uuid::nil(),
            number: IdentityNumber::parse("100001").expect("number"),
            kind: IdentityKind::Person,
        },
        text: Some("hello".to_owned()),
        sealed: None,
        ask: true,
        deadline: None,
        reply_to: None,
        by_runtime: false,
        created_at: Timestamp::parse("2026-10-02T12:00:00Z").expect("time"),
    };
    let request = ProcessRequest {
        message: &message,
        opened: None,
        attempt: 2,
        job_key: "job-1",
        runtime_id: Uuid::nil(),
        deadline: None,
        timeout_ms: 20_000,
        context: None,
    };
    let line = request.to_line().expect("serialize");
    assert_eq!(line.last(), Some(&b'\n'));
    assert_eq!(line.iter().filter(|&&byte| byte == b'\n').count(), 1);
    let value: Value = serde_json::from_slice(&line).expect("json");
    let keys: Vec<&str> = value
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        ["attempt", "jobKey", "message", "runtimeId", "timeoutMs"]
    );
    assert_eq!(value["message"]["messageId"], SOURCE);

    let opened = SealedContent::Text {
        text: "secret question".to_owned(),
    };
    let deadline = Timestamp::parse("2026-10-02T12:00:05Z").expect("time");
    let sealed = ProcessRequest {
        opened: Some(&opened),
        deadline: Some(deadline),
        ..request
    };
    let value: Value = serde_json::from_slice(&sealed.to_line().expect("line")).expect("json");
    assert_eq!(value["opened"], json!({"text": "secret question"}));
    assert_eq!(value["deadline"], "2026-10-02T12:00:05Z");
    assert!(value.get("context").is_none(), "{value}");

    let sealed_in_thread = MessageEnvelope {
        text: None,
        seq: 4,
        ..message.clone()
    };
    let context = RequestContext {
        thread: Some(ThreadContext {
            messages: vec![
                ContextMessage {
                    envelope: message.clone(),
                    opened: None,
                    open_error: None,
                },
                ContextMessage {
                    envelope: sealed_in_thread.clone(),
                    opened: Some(opened.clone()),
                    open_error: None,
                },
                ContextMessage {
                    envelope: sealed_in_thread,
                    opened: None,
                    open_error: Some("not_a_recipient".to_owned()),
                },
            ],
            next: None,
        }),
        notes: Some(vec![]),
    };
    let with_context = ProcessRequest {
        context: Some(&context),
        ..request
    };
    let value: Value =
        serde_json::from_slice(&with_context.to_line().expect("line")).expect("json");
    let messages = &value["context"]["thread"]["messages"];
    assert_eq!(messages[0]["text"], "hello");
    assert_eq!(messages[0]["seq"], 3);
    assert!(messages[0].get("opened").is_none(), "{messages}");
    assert_eq!(messages[1]["text"], Value::Null);
    assert_eq!(messages[1]["opened"], json!({"text": "secret question"}));
    assert_eq!(messages[2]["openError"], "not_a_recipient");
    assert!(messages[2].get("opened").is_none(), "{messages}");
    assert_eq!(value["context"]["thread"]["next"], Value::Null);
    assert_eq!(value["context"]["notes"], json!([]));

    let thread_only = RequestContext {
        notes: None,
        ..context.clone()
    };
    let value: Value = serde_json::from_slice(
        &ProcessRequest {
            context: Some(&thread_only),
            ..request
        }
        .to_line()
        .expect("line"),
    )
    .expect("json");
    let keys: Vec<&str> = value["context"]
        .as_object()
        .expect("context")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["thread"]);
}
