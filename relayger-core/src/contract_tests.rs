//! The shared wire fixtures (`relayger-core/fixtures/*.json`), read by
//! these tests and by the JavaScript SDK's `test/fixtures.test.js`. Every
//! file names its `kind`; a kind nobody reads here fails, so a fixture
//! cannot be added for one language only by accident.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;

use crate::canonical::StrictJsonError;
use crate::job_result::InvalidResult;
use crate::policy::{Policy, PolicyError};
use crate::process_abi::{
    ProcessConfig, ProcessConfigError, ResponseError, parse_response_output, parse_result_value,
};
use crate::wire::names::{
    CONTACT_REQUESTS_HEADER, RUNTIME_CHANGES_PARAM, SOCKET_FRAME_NAMES, SOCKET_PROTOCOL,
    TOKEN_PROTOCOL_PREFIX, WORKER_EVENT_NAMES,
};
use crate::wire::{SocketSignal, WorkerEvent};

fn fixtures() -> Vec<(String, Value)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("the fixtures folder")
        .map(|entry| entry.expect("entry").path())
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let name = path
                .file_name()
                .expect("name")
                .to_string_lossy()
                .into_owned();
            assert!(name.ends_with(".json"), "{name}: fixtures are JSON files");
            let text = std::fs::read_to_string(&path).expect("read");
            let doc = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
            (name, doc)
        })
        .collect()
}

/// Whether `actual` holds everything `expected` says: objects by their
/// keys (others may be present), everything else exactly.
fn contains(actual: &Value, expected: &Value) -> bool {
    match (actual, expected) {
        (Value::Object(actual), Value::Object(expected)) => expected.iter().all(|(key, value)| {
            actual
                .get(key)
                .is_some_and(|present| contains(present, value))
        }),
        _ => actual == expected,
    }
}

fn strict_code(error: &StrictJsonError) -> &'static str {
    match error {
        StrictJsonError::Syntax { .. } | StrictJsonError::DuplicateKey { .. } => "invalid_json",
        StrictJsonError::NotAnObject { .. } => "not_an_object",
    }
}

fn invalid_result_code(error: &InvalidResult) -> &'static str {
    match error {
        InvalidResult::ReplyAndSkip => "reply_and_skip",
        InvalidResult::ErrorWith(_) => "error_with_others",
        InvalidResult::Empty(_) => "empty_field",
        InvalidResult::ReplyTooLarge(_) => "reply_too_large",
        InvalidResult::Note(_) => "invalid_note",
    }
}

fn response_code(error: &ResponseError) -> &'static str {
    match error {
        ResponseError::TooLarge { .. } => "response_too_large",
        ResponseError::Empty => "empty_output",
        ResponseError::ExtraLines => "extra_lines",
        ResponseError::NotUtf8 => "not_utf8",
        ResponseError::Json(error) => strict_code(error),
        ResponseError::UnknownField(_) => "unknown_field",
        ResponseError::Field { .. } => "invalid_field",
        ResponseError::Invalid(error) => invalid_result_code(error),
    }
}

/// `(code, field)` of a refused policy or `worker.json`: a top-level problem
/// has the field `""`. A repeated key is reported against its field.
fn policy_code(error: &PolicyError) -> (&'static str, String) {
    let code = match error {
        PolicyError::InvalidJson { .. } => "invalid_json",
        PolicyError::NotAnObject { .. } => "not_an_object",
        PolicyError::Field { .. } => "invalid_field",
    };
    (code, error.field().to_owned())
}

fn config_code(error: &ProcessConfigError) -> (&'static str, String) {
    match error {
        ProcessConfigError::InvalidJson { .. } => ("invalid_json", String::new()),
        ProcessConfigError::NotAnObject { .. } => ("not_an_object", String::new()),
        ProcessConfigError::Field { field, .. } => ("invalid_field", field.clone()),
    }
}

fn config_value(config: &ProcessConfig) -> Value {
    let thread = config
        .context
        .thread
        .map(|thread| serde_json::json!({ "limit": thread.limit, "maxBytes": thread.max_bytes }));
    let notes = config
        .context
        .notes
        .map(|notes| serde_json::json!({ "limit": notes.limit }));
    serde_json::json!({
        "executable": config.executable,
        "argv": config.argv,
        "cwd": config.cwd,
        "env": config.env,
        "maxRequestBytes": config.max_request_bytes,
        "maxResponseBytes": config.max_response_bytes,
        "maxStderrBytes": config.max_stderr_bytes,
        "context": { "thread": thread, "notes": notes },
    })
}

/// The text a case stands for: `text` as written, or `input` as JSON.
fn case_text(case: &Value) -> String {
    match case.get("text") {
        Some(text) => text.as_str().expect("text").to_owned(),
        None => case["input"].to_string(),
    }
}

/// What one case came to: `Ok(parsed)` or `Err((code, field))`.
type Outcome = Result<Value, (String, Option<String>)>;

fn check_case(file: &str, case: &Value, outcome: Outcome) {
    let name = format!(
        "{file}: {}",
        case["name"].as_str().expect("every case is named")
    );
    match (case["valid"].as_bool().expect("valid"), outcome) {
        (true, Ok(parsed)) => {
            if let Some(expected) = case.get("expect") {
                assert!(
                    contains(&parsed, expected),
                    "{name}: {parsed} lacks {expected}"
                );
            }
        }
        (false, Err((code, field))) => {
            assert_eq!(Some(code.as_str()), case["error"].as_str(), "{name}");
            if let Some(expected) = case.get("field") {
                assert_eq!(field.as_deref(), expected.as_str(), "{name}");
            }
        }
        (true, Err(error)) => panic!("{name}: refused with {error:?}"),
        (false, Ok(parsed)) => panic!("{name}: accepted as {parsed}"),
    }
}

fn cases(doc: &Value) -> &[Value] {
    doc["cases"].as_array().expect("cases")
}

fn check_names(doc: &Value) {
    assert_eq!(doc["contactRequestsHeader"], CONTACT_REQUESTS_HEADER);
    assert_eq!(doc["socketProtocol"], SOCKET_PROTOCOL);
    assert_eq!(doc["tokenProtocolPrefix"], TOKEN_PROTOCOL_PREFIX);
    assert_eq!(doc["runtimeChangesParam"], RUNTIME_CHANGES_PARAM);
    assert_eq!(doc["workerEvents"], serde_json::json!(WORKER_EVENT_NAMES));
    assert_eq!(doc["socketFrames"], serde_json::json!(SOCKET_FRAME_NAMES));
}

/// Reads one fixture file; the kinds this side reads.
fn check_file(file: &str, doc: &Value) {
    let kind = doc["kind"]
        .as_str()
        .unwrap_or_else(|| panic!("{file}: no kind"));
    assert!(doc["about"].is_string(), "{file}: says what it expects");
    match kind {
        "names" => check_names(doc),
        "finish_result" => {
            for case in cases(doc) {
                let outcome = parse_result_value(case["input"].clone())
                    .map(|result| serde_json::to_value(result).expect("json"))
                    .map_err(|error| (response_code(&error).to_owned(), None));
                check_case(file, case, outcome);
            }
        }
        "process_response" => {
            let max = usize::try_from(doc["maxBytes"].as_u64().expect("maxBytes")).expect("usize");
            for case in cases(doc) {
                let stdout = case["stdout"].as_str().expect("stdout");
                let outcome = parse_response_output(stdout.as_bytes(), max)
                    .map(|result| serde_json::to_value(result).expect("json"))
                    .map_err(|error| (response_code(&error).to_owned(), None));
                check_case(file, case, outcome);
            }
        }
        "process_config" => {
            for case in cases(doc) {
                let outcome = ProcessConfig::parse(&case_text(case))
                    .map(|config| config_value(&config))
                    .map_err(|error| {
                        let (code, field) = config_code(&error);
                        (code.to_owned(), Some(field))
                    });
                check_case(file, case, outcome);
            }
        }
        "policy" => {
            for case in cases(doc) {
                let outcome = Policy::parse(&case_text(case))
                    .map(|policy| policy.normalized())
                    .map_err(|error| {
                        let (code, field) = policy_code(&error);
                        (code.to_owned(), Some(field))
                    });
                check_case(file, case, outcome);
            }
        }
        "worker_event" => {
            for case in cases(doc) {
                let line = case["input"].to_string();
                let outcome = match serde_json::from_str::<WorkerEvent>(&line) {
                    Ok(event) => {
                        // A line round-trips: the same object, and its name.
                        assert_eq!(
                            serde_json::to_value(&event).expect("json"),
                            case["input"],
                            "{file}: {}",
                            case["name"]
                        );
                        assert_eq!(case["input"]["event"], event.name());
                        Ok(case["input"].clone())
                    }
                    Err(_) => {
                        let known = case["input"]["event"]
                            .as_str()
                            .is_some_and(|name| WORKER_EVENT_NAMES.contains(&name));
                        let code = if known {
                            "invalid_event"
                        } else {
                            "unknown_event"
                        };
                        Err((code.to_owned(), None))
                    }
                };
                check_case(file, case, outcome);
            }
        }
        "socket_frame" => {
            for case in cases(doc) {
                let outcome = serde_json::from_value::<SocketSignal>(case["input"].clone())
                    .map(|_| case["input"]["event"].clone())
                    .map_err(|_| ("unknown_frame".to_owned(), None));
                check_case(file, case, outcome);
            }
        }
        "claim_pacing" => {
            assert!(crate::claim_pacing::tests::check_fixture(doc) > 0);
        }
        "sealed_vector" => {
            assert!(!crate::sealed::tests::interop::check_vector_fixture(doc).is_empty());
        }
        other => panic!("{file}: no Rust reader for fixture kind `{other}`"),
    }
}

#[test]
fn every_fixture_file_holds_on_the_rust_side() {
    let files = fixtures();
    let kinds: BTreeSet<_> = files
        .iter()
        .map(|(_, doc)| doc["kind"].as_str().unwrap_or_default().to_owned())
        .collect();
    for (file, doc) in &files {
        check_file(file, doc);
    }
    // Every kind this file reads has its fixture (none silently went away).
    let read = [
        "claim_pacing",
        "finish_result",
        "names",
        "policy",
        "process_config",
        "process_response",
        "sealed_vector",
        "socket_frame",
        "worker_event",
    ];
    assert_eq!(kinds, read.iter().map(|kind| (*kind).to_owned()).collect());
}

/// The names list and the enums agree, so the fixture pins the real names.
#[test]
fn the_event_and_frame_names_are_the_enums_names() {
    let doc: Value =
        serde_json::from_str(include_str!("../fixtures/worker-events.json")).expect("json");
    let named: BTreeSet<_> = cases(&doc)
        .iter()
        .filter(|case| case["valid"] == true)
        .map(|case| {
            serde_json::from_value::<WorkerEvent>(case["input"].clone())
                .expect("event")
                .name()
        })
        .collect();
    assert_eq!(named, WORKER_EVENT_NAMES.into_iter().collect());
    for name in SOCKET_FRAME_NAMES {
        let frame: SocketSignal =
            serde_json::from_value(serde_json::json!({ "event": name })).expect(name);
        assert_eq!(serde_json::to_value(frame).expect("json")["event"], name);
    }
}

/// `docs/sealed-messages.md` prints the same vectors: each case's payload is
/// one of the page's JSON blocks and its `info` one of its hex blocks.
#[test]
fn the_sealed_messages_page_prints_the_fixture_vectors() {
    let page = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/sealed-messages.md"),
    )
    .expect("docs/sealed-messages.md");
    let vectors = &page[page
        .find("## Test vector")
        .expect("the test vector section")..];
    let mut json_blocks = Vec::new();
    let mut hex_blocks = Vec::new();
    // Odd pieces between the fences are the code blocks.
    for block in vectors.split("```").skip(1).step_by(2) {
        if let Some(json) = block.strip_prefix("json\n") {
            json_blocks.push(serde_json::from_str::<Value>(json).expect("a JSON block"));
        } else {
            let hex: String = block.split_whitespace().collect();
            if hex.bytes().all(|byte| byte.is_ascii_hexdigit()) {
                hex_blocks.push(hex);
            }
        }
    }
    let doc: Value =
        serde_json::from_str(include_str!("../fixtures/sealed-vectors.json")).expect("json");
    for case in cases(&doc) {
        assert!(json_blocks.contains(&case["payload"]), "{}", case["name"]);
        let info = case["infoForBob"].as_str().expect("info");
        assert!(hex_blocks.iter().any(|hex| hex == info), "{}", case["name"]);
    }
}
