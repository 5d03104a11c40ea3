//! The request bodies of the wire API.

use super::*;
use crate::policy::valid_policy;

const WIRE_KEYS: [&str; 30] = [
    "name",
    "kind",
    "publicKey",
    "invite",
    "scopes",
    "roomIds",
    "label",
    "number",
    "as",
    "members",
    "to",
    "roomId",
    "messageId",
    "text",
    "sealed",
    "ask",
    "deadline",
    "replyTo",
    "seq",
    "from",
    "policy",
    "version",
    "maxJobs",
    "handlerTimeoutMs",
    "owner",
    "result",
    "reply",
    "note",
    "usage",
    "sourceMessageIds",
];

const WIRE_STRINGS: [&str; 16] = [
    "100000001",
    "0195f3b2-7c1e-7d2a-9c4b-3e2f1a0b9c8d",
    "{0195f3b2-7c1e-7d2a-9c4b-3e2f1a0b9c8d}",
    "2026-10-02T12:00:00Z",
    "2026-10-02T12:00:00.123456789Z",
    "1999-12-31T23:59:60Z",
    "2026-10-02T12:00:00+00:00",
    "0123456789abcdef0123456789abcdef",
    "00000000000000000042",
    "18446744073709551616",
    "person",
    "agent",
    "read",
    "now",
    "questions",
    "",
];

fn wire_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1.0e6_f64..1.0e6).prop_map(Value::from),
        prop::sample::select(WIRE_STRINGS.to_vec()).prop_map(Value::from),
        "\\PC{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(Value::Array),
            vec((prop::sample::select(WIRE_KEYS.to_vec()), inner), 0..5).prop_map(|members| {
                Value::Object(
                    members
                        .into_iter()
                        .map(|(key, value)| (key.to_owned(), value))
                        .collect(),
                )
            }),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Arbitrary bytes into every request body and the strict reader.
    #[test]
    fn request_bodies_on_arbitrary_bytes(bytes in vec(any::<u8>(), 0..200)) {
        invariants::check_wire_bytes(&bytes);
    }

    /// Objects over the request bodies' own field names (repeats allowed,
    /// as written text) with plausible and implausible values.
    #[test]
    fn request_bodies_on_field_shaped_objects(
        members in vec(
            (
                prop::sample::select(WIRE_KEYS.to_vec()).prop_map(str::to_owned),
                wire_value().prop_map(|value| value.to_string()),
            ),
            0..6,
        ),
        spaced in any::<bool>(),
    ) {
        invariants::check_wire_bytes(object_text(&members, spaced).as_bytes());
    }

}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// Well-formed bodies are accepted (so the round trips above are not
    /// vacuous) and round-trip.
    #[test]
    fn valid_request_bodies_round_trip(
        spec in valid_policy(),
        turn in 0_usize..8,
        text in "\\PC{1,40}",
        seconds in 0_i64..253_402_300_799,
        version in any::<u64>(),
    ) {
        let register = format!(r#"{{"name":"helper","from":"now","policy":{}}}"#, spec.text(turn));
        let parsed: RegisterRuntimeRequest =
            serde_json::from_str(&register).expect("a valid registration parses");
        prop_assert!(parsed.policy.is_some());
        invariants::check_wire_bytes(register.as_bytes());

        let deadline = Timestamp(OffsetDateTime::from_unix_timestamp(seconds).expect("in range"));
        let send = json!({
            "roomId": ROOMS[0], "text": text, "ask": true,
            "deadline": deadline.to_string(),
        })
        .to_string();
        let parsed: SendRequest = serde_json::from_str(&send).expect("a valid send parses");
        prop_assert_eq!(parsed.deadline, Some(deadline));
        invariants::check_wire_bytes(send.as_bytes());

        let finish = json!({
            "owner": "0123456789abcdef0123456789abcdef",
            "version": format!("{version:020}"),
            "result": {"reply": text, "usage": {"modelCalls": 1, "inputTokens": 2, "outputTokens": 3}},
        })
        .to_string();
        let parsed: FinishRequest = serde_json::from_str(&finish).expect("a valid finish parses");
        prop_assert_eq!(parsed.version.0, version);
        invariants::check_wire_bytes(finish.as_bytes());
    }
}
