//! worker.json: its defaults, every field, and what it refuses.

use super::*;

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
