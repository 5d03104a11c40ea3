//! The plaintext JSON: exact output, strict input.

use super::*;

#[test]
fn content_serializes_to_exactly_the_documented_json() {
    let table = [
        (text("hi"), r#"{"text":"hi"}"#),
        (
            SealedContent::Structured {
                schema: "s".to_owned(),
                data: json!({"a": [1, null]}),
                text: None,
            },
            r#"{"schema":"s","data":{"a":[1,null]}}"#,
        ),
        (
            SealedContent::Structured {
                schema: "s".to_owned(),
                data: json!(null),
                text: Some("t".to_owned()),
            },
            r#"{"schema":"s","data":null,"text":"t"}"#,
        ),
    ];
    for (content, expected) in table {
        let bytes = content.to_plaintext().expect("plaintext");
        assert_eq!(String::from_utf8(bytes).expect("utf-8"), expected);
        assert_eq!(
            SealedContent::from_plaintext(expected.as_bytes()),
            Ok(content)
        );
    }
}

#[test]
fn content_reader_is_strict() {
    let accepted = [
        r#"{"text":""}"#,
        r#"{"data":[],"schema":"s"}"#,
        r#"{"text":"t","schema":"s","data":false}"#,
        r#" { "text" : "spaced" } "#,
    ];
    for json in accepted {
        assert!(
            SealedContent::from_plaintext(json.as_bytes()).is_ok(),
            "{json}"
        );
    }
    let refused = [
        r#"{}"#,
        r#"{"text":null}"#,
        r#"{"text":1}"#,
        r#"{"text":"a","text":"b"}"#,
        r#"{"text":"a","other":1}"#,
        r#"{"schema":"s"}"#,
        r#"{"schema":"s","text":"t"}"#,
        r#"{"data":1}"#,
        r#"{"data":1,"text":"t"}"#,
        r#"{"schema":"","data":1}"#,
        r#"{"schema":null,"data":1}"#,
        r#"{"schema":"s","data":1,"text":null}"#,
        r#""text""#,
        r#"[{"text":"a"}]"#,
        r#"{"text":"a"} trailing"#,
    ];
    for json in refused {
        assert!(
            SealedContent::from_plaintext(json.as_bytes()).is_err(),
            "{json}"
        );
    }
}

#[test]
fn content_text_is_the_human_readable_part() {
    assert_eq!(text("a").text(), Some("a"));
    let structured = SealedContent::Structured {
        schema: "s".to_owned(),
        data: json!(1),
        text: None,
    };
    assert_eq!(structured.text(), None);
}
