//! worker.json's `context`: what the worker reads for the handler.

use super::*;

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
    // (field at fault, its value, words the message must contain): the
    // context is the value nested at the field's path.
    let at_field: [(&str, &str, &[&str]); 16] = [
        ("context", "null", &["an object", "null"]),
        ("context", "[]", &["an object", "an array"]),
        ("context.thread", "5", &["an object", "a number"]),
        ("context.notes", "true", &["an object", "a boolean"]),
        (
            "context.messages",
            "{}",
            &["unknown field", "thread, notes"],
        ),
        ("context.thread.limit", "0", &["from 1 to 100"]),
        ("context.thread.limit", "101", &["from 1 to 100"]),
        ("context.thread.limit", "-1", &["from 1 to 100"]),
        ("context.thread.limit", "2.5", &["integer"]),
        ("context.thread.limit", r#""5""#, &["integer"]),
        ("context.thread.limit", "null", &["integer"]),
        ("context.thread.maxBytes", "511", &["from 512 to 65536"]),
        ("context.thread.maxBytes", "65537", &["from 512 to 65536"]),
        (
            "context.thread.max_bytes",
            "4096",
            &["unknown field", "limit, maxBytes"],
        ),
        ("context.notes.limit", "0", &["from 1 to 20"]),
        ("context.notes.limit", "21", &["from 1 to 20"]),
    ];
    fn nested(field: &str, value: &str) -> String {
        let path: Vec<&str> = field.split('.').skip(1).collect();
        path.iter().rev().fold(value.to_owned(), |inner, key| {
            format!(r#"{{"{key}": {inner}}}"#)
        })
    }
    let repeated: (String, &str, &[&str]) = (
        r#"{"thread": {"limit": 5, "limit": 6}}"#.to_owned(),
        "context",
        &["`limit` repeats"],
    );
    let table = at_field
        .map(|(field, value, words)| (nested(field, value), field, words))
        .into_iter()
        .chain([repeated]);
    for (context, field, words) in table {
        let text = format!(r#"{{"executable": "x", "context": {context}}}"#);
        let error = config(&text).expect_err(&context);
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
