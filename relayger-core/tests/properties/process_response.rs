//! The process-ABI response line.

use super::*;

fn response_value(field: &'static str) -> BoxedStrategy<String> {
    let long = |bytes: usize| json!("a".repeat(bytes)).to_string();
    match field {
        "reply" => prop_oneof![
            "\\PC{0,20}".prop_map(|t| json!(t).to_string()),
            Just(long(MAX_TEXT_BYTES)),
            Just(long(MAX_TEXT_BYTES + 1)),
            Just(json!("é".repeat(MAX_TEXT_BYTES / 2)).to_string()),
            Just("null".to_owned()),
            Just("7".to_owned()),
        ]
        .boxed(),
        "skip" | "error" => prop_oneof![
            "\\PC{0,12}".prop_map(|t| json!(t).to_string()),
            Just("null".to_owned()),
            Just("[]".to_owned()),
        ]
        .boxed(),
        "note" => (
            prop_oneof![
                Just("user.name".to_owned()),
                "[A-Za-z0-9._:-]{1,70}",
                "\\PC{0,6}"
            ],
            prop_oneof!["\\PC{0,12}", Just("x".repeat(4000)), Just("x".repeat(4001))],
            prop_oneof![
                Just(json!(0)),
                Just(json!(3)),
                Just(json!(-1)),
                Just(json!("1"))
            ],
            vec(0_u128..4, 0..10),
            prop_oneof![4 => Just(None), 1 => Just(Some(("extra", json!(1))))],
        )
            .prop_map(|(key, text, version, sources, extra)| {
                let sources: Vec<String> = sources
                    .into_iter()
                    .map(|bits| Uuid::from_u128(bits).to_string())
                    .collect();
                let mut note = json!({
                    "key": key, "text": text, "version": version, "sourceMessageIds": sources,
                });
                if let Some((name, value)) = extra {
                    note[name] = value;
                }
                note.to_string()
            })
            .boxed(),
        _ => prop_oneof![
            (any::<u32>(), any::<u32>(), any::<u32>()).prop_map(|(m, i, o)| {
                json!({"modelCalls": m, "inputTokens": i, "outputTokens": o}).to_string()
            }),
            Just(r#"{"modelCalls":1}"#.to_owned()),
            Just(r#"{"modelCalls":-1,"inputTokens":0,"outputTokens":0}"#.to_owned()),
            Just("null".to_owned()),
        ]
        .boxed(),
    }
}

fn response_member() -> impl Strategy<Value = (String, String)> {
    prop_oneof![
        3 => response_value("reply").prop_map(|v| ("reply".to_owned(), v)),
        2 => response_value("skip").prop_map(|v| ("skip".to_owned(), v)),
        2 => response_value("error").prop_map(|v| ("error".to_owned(), v)),
        2 => response_value("note").prop_map(|v| ("note".to_owned(), v)),
        2 => response_value("usage").prop_map(|v| ("usage".to_owned(), v)),
        1 => Just(("replies".to_owned(), "\"x\"".to_owned())),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Arbitrary stdout under each kind of cap.
    #[test]
    fn process_response_on_arbitrary_bytes(
        bytes in vec(any::<u8>(), 0..200),
        selector in 0_u8..4,
    ) {
        let max_bytes = match selector {
            0 => DEFAULT_MAX_RESPONSE_BYTES,
            1 => MAX_RESPONSE_BYTES_RANGE.0,
            2 => bytes.len(),
            _ => bytes.len().saturating_sub(1),
        };
        invariants::check_process_response(&bytes, max_bytes);
    }

    /// Response-shaped objects (each field good or bad, repeats, unknown
    /// fields) with assorted line endings and caps.
    #[test]
    fn process_response_on_response_shaped_lines(
        members in vec(response_member(), 0..4),
        ending in prop::sample::select(vec!["", "\n", "\r\n", "\n\n", "\nmore", "\r"]),
        cap in 0_u8..3,
    ) {
        let line = format!("{}{ending}", object_text(&members, false));
        let max_bytes = match cap {
            0 => DEFAULT_MAX_RESPONSE_BYTES,
            1 => MAX_RESPONSE_BYTES_RANGE.1,
            _ => line.len().saturating_sub(1),
        };
        invariants::check_process_response(line.as_bytes(), max_bytes);
    }

    /// Each combination of valid fields is accepted exactly when the ABI's
    /// combination rules allow it: not `reply` with `skip`, and `error`
    /// only with `usage`.
    #[test]
    fn field_combinations_follow_the_abi_rules(
        given in prop::array::uniform5(any::<bool>()),
        text in "\\PC{1,20}",
    ) {
        let [reply, skip, error, note, usage] = given;
        let mut object = serde_json::Map::new();
        if reply {
            object.insert("reply".to_owned(), json!(text));
        }
        if skip {
            object.insert("skip".to_owned(), json!("sealed"));
        }
        if error {
            object.insert("error".to_owned(), json!("upstream down"));
        }
        if note {
            object.insert("note".to_owned(), json!({"key": "k", "text": text, "version": 0}));
        }
        if usage {
            object.insert(
                "usage".to_owned(),
                json!({"modelCalls": 1, "inputTokens": 2, "outputTokens": 3}),
            );
        }
        let line = Value::Object(object).to_string();
        let allowed = !(reply && skip) && !(error && (reply || skip || note));
        let parsed = parse_response_output(line.as_bytes(), DEFAULT_MAX_RESPONSE_BYTES);
        prop_assert_eq!(parsed.is_ok(), allowed, "{} → {:?}", line, parsed);
        invariants::check_process_response(line.as_bytes(), DEFAULT_MAX_RESPONSE_BYTES);
    }

    /// A well-formed response is accepted with exactly its content.
    #[test]
    fn valid_responses_are_accepted(
        reply in "\\PC{1,40}",
        key in "[A-Za-z0-9._:-]{1,64}",
        calls in any::<u32>(),
        ending in prop::sample::select(vec!["", "\n", "\r\n"]),
    ) {
        let line = format!(
            "{}{ending}",
            json!({
                "reply": reply,
                "note": {"key": key, "text": "t", "version": 0},
                "usage": {"modelCalls": calls, "inputTokens": 0, "outputTokens": 0},
            })
        );
        let result: JobResult = parse_response_output(line.as_bytes(), DEFAULT_MAX_RESPONSE_BYTES)
            .expect("a valid response is accepted");
        prop_assert_eq!(result.reply.as_deref(), Some(reply.as_str()));
        prop_assert_eq!(result.note.map(|note| note.key), Some(key));
        prop_assert_eq!(result.usage.map(|usage| usage.model_calls), Some(u64::from(calls)));
        invariants::check_process_response(line.as_bytes(), DEFAULT_MAX_RESPONSE_BYTES);
    }
}
