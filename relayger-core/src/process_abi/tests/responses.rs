//! The response line and result values: what is accepted, and why not.

use super::*;

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
