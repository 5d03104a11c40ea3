//! Table-driven tests of worker.json parsing, the credential rule, the
//! request line and response validation.
use serde_json::json;

use super::*;
use crate::ids::IdentityNumber;
use crate::wire::{IdentityKind, IdentityRef, MAX_TEXT_BYTES};

fn config(text: &str) -> Result<ProcessConfig, ProcessConfigError> {
    ProcessConfig::parse(text)
}

fn field_of(error: &ProcessConfigError) -> &str {
    match error {
        ProcessConfigError::Field { field, .. } => field,
        _ => "",
    }
}

#[test]
fn minimal_config_takes_the_defaults() {
    let parsed = config(r#"{"executable": "python3"}"#).expect("valid");
    assert_eq!(
        parsed,
        ProcessConfig {
            executable: "python3".to_owned(),
            argv: vec![],
            cwd: None,
            env: vec![],
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            max_stderr_bytes: DEFAULT_MAX_STDERR_BYTES,
            context: ContextConfig::default(),
        }
    );
    assert!(parsed.context.is_empty());
}

#[test]
fn context_configs_are_read() {
    // (context as written, what the worker reads)
    let thread = |limit, max_bytes| ThreadContextConfig { limit, max_bytes };
    let notes = |limit| NotesContextConfig { limit };
    let table = [
        ("{}", ContextConfig::default()),
        (
            r#"{"thread": {}}"#,
            ContextConfig {
                thread: Some(thread(None, None)),
                notes: None,
            },
        ),
        (
            r#"{"thread": {"limit": 5, "maxBytes": 4096}, "notes": {"limit": 2}}"#,
            ContextConfig {
                thread: Some(thread(Some(5), Some(4096))),
                notes: Some(notes(Some(2))),
            },
        ),
        (
            r#"{"thread": {"limit": 1, "maxBytes": 512}, "notes": {"limit": 1}}"#,
            ContextConfig {
                thread: Some(thread(Some(1), Some(512))),
                notes: Some(notes(Some(1))),
            },
        ),
        (
            r#"{"thread": {"limit": 100, "maxBytes": 65536}, "notes": {"limit": 20}}"#,
            ContextConfig {
                thread: Some(thread(Some(100), Some(65_536))),
                notes: Some(notes(Some(20))),
            },
        ),
        (
            r#"{"notes": {}}"#,
            ContextConfig {
                thread: None,
                notes: Some(notes(None)),
            },
        ),
    ];
    for (context, expected) in table {
        let text = format!(r#"{{"executable": "x", "context": {context}}}"#);
        let parsed = config(&text).unwrap_or_else(|error| panic!("{context}: {error}"));
        assert_eq!(parsed.context, expected, "{context}");
    }
}

#[test]
fn bad_context_configs_name_the_nested_field() {
    // (context as written, field at fault, words the message must contain)
    let table: [(&str, &str, &[&str]); 17] = [
        ("null", "context", &["an object", "null"]),
        ("[]", "context", &["an object", "an array"]),
        (
            r#"{"thread": 5}"#,
            "context.thread",
            &["an object", "a number"],
        ),
        (
            r#"{"notes": true}"#,
            "context.notes",
            &["an object", "a boolean"],
        ),
        (
            r#"{"messages": {}}"#,
            "context.messages",
            &["unknown field", "thread, notes"],
        ),
        (
            r#"{"thread": {"limit": 0}}"#,
            "context.thread.limit",
            &["from 1 to 100"],
        ),
        (
            r#"{"thread": {"limit": 101}}"#,
            "context.thread.limit",
            &["from 1 to 100"],
        ),
        (
            r#"{"thread": {"limit": -1}}"#,
            "context.thread.limit",
            &["from 1 to 100"],
        ),
        (
            r#"{"thread": {"limit": 2.5}}"#,
            "context.thread.limit",
            &["integer"],
        ),
        (
            r#"{"thread": {"limit": "5"}}"#,
            "context.thread.limit",
            &["integer"],
        ),
        (
            r#"{"thread": {"limit": null}}"#,
            "context.thread.limit",
            &["integer"],
        ),
        (
            r#"{"thread": {"maxBytes": 511}}"#,
            "context.thread.maxBytes",
            &["from 512 to 65536"],
        ),
        (
            r#"{"thread": {"maxBytes": 65537}}"#,
            "context.thread.maxBytes",
            &["from 512 to 65536"],
        ),
        (
            r#"{"thread": {"max_bytes": 4096}}"#,
            "context.thread.max_bytes",
            &["unknown field", "limit, maxBytes"],
        ),
        (
            r#"{"notes": {"limit": 0}}"#,
            "context.notes.limit",
            &["from 1 to 20"],
        ),
        (
            r#"{"notes": {"limit": 21}}"#,
            "context.notes.limit",
            &["from 1 to 20"],
        ),
        (
            r#"{"thread": {"limit": 5, "limit": 6}}"#,
            "context",
            &["`limit` repeats"],
        ),
    ];
    for (context, field, words) in table {
        let text = format!(r#"{{"executable": "x", "context": {context}}}"#);
        let error = config(&text).expect_err(context);
        assert_eq!(field_of(&error), field, "{context}: {error}");
        let message = error.to_string();
        assert!(
            message.starts_with(&format!("worker.json field `{field}`")),
            "{message}"
        );
        for word in words {
            assert!(
                message.contains(word),
                "{context}: {message} lacks {word:?}"
            );
        }
    }
}

#[test]
fn full_config_is_read() {
    let parsed = config(
        r#"{"executable": "./bin/handler", "argv": ["-u", "worker.py", ""],
            "cwd": "work", "env": ["PATH", "LANG", "_X1"],
            "maxRequestBytes": 4096, "maxResponseBytes": 524288, "maxStderrBytes": 0}"#,
    )
    .expect("valid");
    assert_eq!(parsed.executable, "./bin/handler");
    assert_eq!(parsed.argv, ["-u", "worker.py", ""]);
    assert_eq!(parsed.cwd.as_deref(), Some("work"));
    assert_eq!(parsed.env, ["PATH", "LANG", "_X1"]);
    assert_eq!(
        (
            parsed.max_request_bytes,
            parsed.max_response_bytes,
            parsed.max_stderr_bytes
        ),
        (4096, 524_288, 0)
    );
}

#[test]
fn bad_configs_name_the_field() {
    // (document, field at fault, a word the message must contain)
    let own = [
        ("{}", "executable", "required"),
        (r#"{"executable": ""}"#, "executable", "empty"),
        (r#"{"executable": 7}"#, "executable", "a number"),
        (r#"{"executable": null}"#, "executable", "null"),
        (r#"{"executable": "a\u0000b"}"#, "executable", "NUL"),
    ];
    // (the fields after `"executable": "x"`, field at fault, a word)
    let others = [
        (r#""argv": "a b""#, "argv", "array"),
        (r#""argv": ["a", 1]"#, "argv", "entry 1"),
        (r#""cwd": """#, "cwd", "empty"),
        (r#""env": ["1PATH"]"#, "env", "not a variable"),
        (r#""env": ["A=B"]"#, "env", "not a variable"),
        (r#""env": ["PATH", "PATH"]"#, "env", "more than once"),
        (r#""env": ["RELAYGER_TOKEN"]"#, "env", "credential"),
        (r#""env": ["DATABASE_URL"]"#, "env", "credential"),
        (r#""env": ["AWS_SECRET_ACCESS_KEY"]"#, "env", "credential"),
        (r#""env": ["PGPASSWORD"]"#, "env", "credential"),
        (r#""env": ["OPENAI_API_KEY"]"#, "env", "credential"),
        (r#""maxRequestBytes": 4095"#, "maxRequestBytes", "4096"),
        (r#""maxRequestBytes": 1.5"#, "maxRequestBytes", "integer"),
        (
            r#""maxResponseBytes": 524289"#,
            "maxResponseBytes",
            "524288",
        ),
        (r#""maxResponseBytes": -1"#, "maxResponseBytes", "integer"),
        (r#""maxStderrBytes": "1""#, "maxStderrBytes", "integer"),
        (r#""args": []"#, "args", "unknown field"),
        (r#""executable": "y""#, "executable", "more than once"),
    ];
    let others = others
        .map(|(fields, field, word)| (format!(r#"{{"executable": "x", {fields}}}"#), field, word));
    let own = own.map(|(text, field, word)| (text.to_owned(), field, word));
    for (text, field, word) in own.into_iter().chain(others) {
        let error = config(&text).expect_err(&text);
        assert_eq!(field_of(&error), field, "{text}: {error}");
        assert!(error.to_string().contains(word), "{text}: {error}");
    }
    assert!(matches!(
        config("[1]"),
        Err(ProcessConfigError::NotAnObject { .. })
    ));
    assert!(matches!(
        config("{"),
        Err(ProcessConfigError::InvalidJson { .. })
    ));
}

#[test]
fn credential_rule_table() {
    let credentials = [
        "RELAYGER_TOKEN",
        "RELAYGER_HOME",
        "relayger_token",
        "DATABASE_URL",
        "TEST_DATABASE_URL",
        "PGPASSWORD",
        "PGHOST",
        "AWS_ACCESS_KEY_ID",
        "AWS_SESSION_TOKEN",
        "AZURE_STORAGE_CONNECTION_STRING",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "GCS_BUCKET_KEY",
        "S3_ENDPOINT",
        "GITHUB_TOKEN",
        "OPENAI_API_KEY",
        "MY_SECRET",
        "SMTP_PASSWORD",
        "SSH_PRIVATE_KEY_PATH",
        "Api_Key",
        "POSTGRES_PASSWORD",
        "POSTGRES_HOST",
        "MYSQL_PWD",
        "MYSQL_HOST",
        "REDIS_URL",
        "MONGODB_URI",
        "SENTRY_DSN",
        "DSN",
    ];
    for name in credentials {
        assert!(is_credential_variable(name), "{name} must be refused");
    }
    let ordinary = [
        "PATH",
        "HOME",
        "LANG",
        "LC_ALL",
        "TZ",
        "NODE_OPTIONS",
        "TMPDIR",
        "PWD",
        "OLDPWD",
    ];
    for name in ordinary {
        assert!(!is_credential_variable(name), "{name} must pass");
    }
}

fn response(text: &str) -> Result<JobResult, ResponseError> {
    parse_response_output(text.as_bytes(), DEFAULT_MAX_RESPONSE_BYTES)
}

const SOURCE: &str = "0195f3b2-7c1e-7d2a-9c4b-3e2f1a0b9c8d";

#[test]
fn good_responses() {
    let usage = Usage {
        model_calls: 1,
        input_tokens: 20,
        output_tokens: 5,
    };
    let table = [
        ("{}", JobResult::default()),
        ("{}\n", JobResult::default()),
        ("{}\r\n", JobResult::default()),
        (
            r#"{"reply":"hi"}"#,
            JobResult {
                reply: Some("hi".to_owned()),
                ..JobResult::default()
            },
        ),
        (
            r#"{"skip":"not for me","usage":{"modelCalls":1,"inputTokens":20,"outputTokens":5}}"#,
            JobResult {
                skip: Some("not for me".to_owned()),
                usage: Some(usage),
                ..JobResult::default()
            },
        ),
        (
            r#"{"error":"provider down","usage":{"modelCalls":1,"inputTokens":20,"outputTokens":5}}"#,
            JobResult {
                error: Some("provider down".to_owned()),
                usage: Some(usage),
                ..JobResult::default()
            },
        ),
    ];
    for (text, expected) in table {
        assert_eq!(response(text), Ok(expected), "{text:?}");
    }
    let with_note = response(&format!(
        r#"{{"reply":"ok","note":{{"key":"topic","text":"t","version":0,"sourceMessageIds":["{SOURCE}"]}}}}"#
    ))
    .expect("valid");
    let note = with_note.note.expect("note");
    assert_eq!((note.key.as_str(), note.version), ("topic", 0));
    assert_eq!(note.source_message_ids.len(), 1);
    // A handler that reports nothing leaves usage unknown, never zero.
    assert_eq!(response(r#"{"reply":"x"}"#).expect("valid").usage, None);
}

#[test]
fn bad_responses_have_reasons() {
    // (stdout, the start of the reason)
    let table = [
        ("", "invalid_output: no response line"),
        ("\n", "invalid_output: no response line"),
        ("{}\n{}\n", "invalid_output: more than one line"),
        ("{}\n\n", "invalid_output: more than one line"),
        ("hello", "invalid_output: invalid JSON"),
        ("[]", "invalid_output: expected a JSON object"),
        (
            r#"{"reply":"a","reply":"b"}"#,
            "invalid_output: duplicate key",
        ),
        (
            r#"{"answer":"x"}"#,
            "invalid_output: unknown field `answer`",
        ),
        (
            r#"{"reply":"a","skip":"b"}"#,
            "invalid_output: `reply` and `skip`",
        ),
        (
            r#"{"reply":null}"#,
            "invalid_output: `reply` must be a string, not null",
        ),
        (
            r#"{"reply":""}"#,
            "invalid_output: `reply` must not be empty",
        ),
        (
            r#"{"reply":5}"#,
            "invalid_output: `reply` must be a string, found a number",
        ),
        (
            r#"{"skip":true}"#,
            "invalid_output: `skip` must be a string",
        ),
        (
            r#"{"error":"x","reply":"y"}"#,
            "invalid_output: `error` cannot be combined with `reply`",
        ),
        (
            r#"{"error":"x","note":{"key":"k","text":"t","version":0}}"#,
            "invalid_output: `error` cannot be combined with `note`",
        ),
        (
            r#"{"usage":{"modelCalls":1}}"#,
            "invalid_output: `usage` missing field",
        ),
        (
            r#"{"usage":{"modelCalls":1,"inputTokens":1,"outputTokens":-1}}"#,
            "invalid_output: `usage` invalid value",
        ),
        (
            r#"{"usage":{"modelCalls":0,"inputTokens":0,"outputTokens":0,"cost":1}}"#,
            "invalid_output: `usage` unknown field",
        ),
        (
            r#"{"note":{"key":"k","text":"t"}}"#,
            "invalid_output: `note` missing field `version`",
        ),
        (
            r#"{"note":{"key":"bad key","text":"t","version":0}}"#,
            "invalid_output: `note` a note key",
        ),
        (
            r#"{"note":{"key":"k","text":"","version":0}}"#,
            "invalid_output: `note` a note's text",
        ),
        (
            r#"{"note":{"key":"k","text":"t","version":0,"sourceMessageIds":["nope"]}}"#,
            "invalid_output: `note` UUID parsing failed",
        ),
    ];
    for (text, reason) in table {
        let error = response(text).expect_err(text);
        assert!(
            error.reason().starts_with(reason),
            "{text:?}: got {:?}, wanted {reason:?}",
            error.reason()
        );
    }
    let long_reply = format!(r#"{{"reply":"{}"}}"#, "x".repeat(MAX_TEXT_BYTES + 1));
    assert!(
        response(&long_reply)
            .expect_err("too long")
            .reason()
            .starts_with("invalid_output: `reply` is 65537 UTF-8 bytes")
    );
    let not_utf8 = parse_response_output(b"{\"reply\":\"\xff\"}", 100).expect_err("not utf-8");
    assert_eq!(not_utf8.reason(), "invalid_output: stdout is not UTF-8");
    let big = format!(r#"{{"reply":"{}"}}"#, "x".repeat(300));
    let too_large = parse_response_output(big.as_bytes(), 256).expect_err("too large");
    assert_eq!(
        too_large.reason(),
        "response_too_large: more than 256 bytes on stdout"
    );
}

#[test]
fn result_values_follow_the_same_rules() {
    assert_eq!(
        parse_result_value(json!({"reply": "hi"})).map(|r| r.reply),
        Ok(Some("hi".to_owned()))
    );
    let table = [
        (
            json!(null),
            "invalid_output: expected a JSON object, found null",
        ),
        (
            json!("hi"),
            "invalid_output: expected a JSON object, found a string",
        ),
        (
            json!({"reply": "a", "skip": "b"}),
            "invalid_output: `reply` and `skip`",
        ),
        (json!({"text": "a"}), "invalid_output: unknown field `text`"),
    ];
    for (value, reason) in table {
        let error = parse_result_value(value.clone()).expect_err("refused");
        assert_eq!(&error.reason()[..reason.len()], reason, "{value}");
    }
}

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

#[test]
fn connection_strings_with_a_password_are_credentials() {
    let table = [
        ("CACHE_URL", "redis://:hunter2@cache:6379/0", true),
        ("APP_DB_URI", "postgres://app:hunter2@db/app", true),
        ("UPSTREAM_URL", "https://user:pw@example.com/x?y=1", true),
        ("url", "amqp://guest:guest@rabbit", true),
        ("DATABASE_URL", "postgres://db/app", true),
        ("UPSTREAM_URL", "https://example.com/path", false),
        ("UPSTREAM_URL", "https://user@example.com/", false),
        ("UPSTREAM_URL", "https://example.com/a:b@c", false),
        ("HOMEPAGE", "https://user:pw@example.com", false),
        ("PATH", "/usr/bin:/bin", false),
    ];
    for (name, value, credential) in table {
        assert_eq!(
            is_credential_entry(name, value),
            credential,
            "{name}={value}"
        );
    }
}
