//! Property tests for the parsers and the thread-budget packing: the same
//! invariants the cargo-fuzz targets in `fuzz/` check (both use
//! `tests/invariants`), on generated input, as ordinary tests that run in CI.

mod invariants;

use proptest::collection::{hash_set, vec};
use proptest::prelude::*;
use relayger_core::ids::IdentityNumber;
use relayger_core::policy::Policy;
use relayger_core::process_abi::{
    DEFAULT_MAX_RESPONSE_BYTES, MAX_RESPONSE_BYTES_RANGE, parse_response_output,
};
use relayger_core::thread_budget::{
    MAX_THREAD_LIMIT, MAX_THREAD_MAX_BYTES, MIN_THREAD_MAX_BYTES, PackedThread, ThreadBudgetError,
    pack_thread, render_thread_body,
};
use relayger_core::wire::{
    FinishRequest, IdentityKind, IdentityRef, JobResult, MAX_TEXT_BYTES, MessageEnvelope,
    RegisterRuntimeRequest, SendRequest, Timestamp,
};
use serde_json::{Value, json};
use time::OffsetDateTime;
use uuid::Uuid;

const ROOMS: [&str; 3] = [
    "0195f3b2-7c1e-7d2a-9c4b-3e2f1a0b9c8d",
    "0195F3B2-7C1E-7D2A-9C4B-3E2F1A0B9C8E",
    "{0195f3b2-7c1e-7d2a-9c4b-3e2f1a0b9c8f}",
];

/// Joins `(key, value text)` members into an object, with a little blank
/// space, so repeated keys and odd spellings reach the parsers as written.
fn object_text(members: &[(String, String)], spaced: bool) -> String {
    let separator = if spaced { ", " } else { "," };
    let colon = if spaced { " : " } else { ":" };
    let body: Vec<String> = members
        .iter()
        .map(|(key, value)| format!("{}{colon}{value}", json!(key)))
        .collect();
    format!("{{{}}}", body.join(separator))
}

fn string_list(entries: &[String]) -> String {
    json!(entries).to_string()
}

// ---------------------------------------------------------------- policy

fn sender_text() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("100000001".to_owned()),
        Just("100000002".to_owned()),
        "[1-9][0-9]{5,14}",
        "0[0-9]{6}",
        "[0-9]{1,5}",
        "[0-9a-z ]{0,8}",
    ]
}

fn room_text() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(ROOMS.to_vec()).prop_map(str::to_owned),
        any::<u128>().prop_map(|bits| Uuid::from_u128(bits).hyphenated().to_string()),
        any::<u128>().prop_map(|bits| Uuid::from_u128(bits).simple().to_string()),
    ]
}

fn window_text() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("09:00-17:30".to_owned()),
        Just("22:00-06:00".to_owned()),
        "([01][0-9]|2[0-5]):[0-6][0-9]-([01][0-9]|2[0-5]):[0-6][0-9]",
        "[0-9:-]{0,12}",
    ]
}

fn integer_text() -> impl Strategy<Value = String> {
    prop_oneof![
        (0_u64..=70).prop_map(|n| n.to_string()),
        (99_990_u64..=100_010).prop_map(|n| n.to_string()),
        prop::sample::select(vec![
            "3.0",
            "-1",
            "1e1",
            "4294967297",
            "\"3\"",
            "null",
            "true",
            "[]",
            "{}",
        ])
        .prop_map(str::to_owned),
    ]
}

/// One member of a policy object: mostly real fields with good or bad
/// values, sometimes a misspelling or a wrong type.
fn policy_member() -> impl Strategy<Value = (String, String)> {
    let list = |entries: BoxedStrategy<String>| vec(entries, 0..4).prop_map(|e| string_list(&e));
    prop_oneof![
        list(
            prop::sample::select(vec!["questions", "messages", "Questions", "bots"])
                .prop_map(str::to_owned)
                .boxed()
        )
        .prop_map(|v| ("triggers".to_owned(), v)),
        list(sender_text().boxed()).prop_map(|v| ("allowedSenders".to_owned(), v)),
        list(room_text().boxed()).prop_map(|v| ("allowedRooms".to_owned(), v)),
        list(window_text().boxed()).prop_map(|v| ("activeHoursUTC".to_owned(), v)),
        integer_text().prop_map(|v| ("maxAttempts".to_owned(), v)),
        integer_text().prop_map(|v| ("maxCallsPerHour".to_owned(), v)),
        integer_text().prop_map(|v| ("concurrency".to_owned(), v)),
        (
            prop::sample::select(vec!["maxAttempt", "Concurrency", "x", "", "activeHoursUtc"]),
            integer_text()
        )
            .prop_map(|(k, v)| (k.to_owned(), v)),
        prop::sample::select(vec!["triggers", "allowedRooms", "activeHoursUTC"])
            .prop_map(|k| (k.to_owned(), "\"questions\"".to_owned())),
        Just(("allowedSenders".to_owned(), "[100000001]".to_owned())),
    ]
}

/// A policy that must be accepted: unique list entries, in-range numbers.
#[derive(Debug, Clone)]
struct ValidPolicy {
    triggers: Vec<&'static str>,
    senders: Vec<String>,
    rooms: Vec<String>,
    windows: Vec<String>,
    numbers: [(bool, u32); 3],
}

fn valid_policy() -> impl Strategy<Value = ValidPolicy> {
    let window = (0_u16..1440, 1_u16..1440).prop_map(|(start, length)| {
        let end = (start + length) % 1440;
        format!(
            "{:02}:{:02}-{:02}:{:02}",
            start / 60,
            start % 60,
            end / 60,
            end % 60
        )
    });
    (
        prop::sample::subsequence(vec!["questions", "messages"], 1..=2).prop_shuffle(),
        hash_set("[1-9][0-9]{5,14}", 0..5),
        hash_set(any::<u128>(), 0..4),
        hash_set(window, 0..4),
        (any::<bool>(), 1_u32..=20),
        (any::<bool>(), 1_u32..=100_000),
        (any::<bool>(), 1_u32..=64),
    )
        .prop_map(
            |(triggers, senders, rooms, windows, attempts, calls, concurrency)| ValidPolicy {
                triggers,
                senders: senders.into_iter().collect(),
                rooms: rooms
                    .into_iter()
                    .map(|bits| Uuid::from_u128(bits).hyphenated().to_string())
                    .collect(),
                windows: windows.into_iter().collect(),
                numbers: [attempts, calls, concurrency],
            },
        )
}

impl ValidPolicy {
    /// The policy text, with every list rotated by `turn`; numbers whose
    /// flag is false are left out (defaults).
    fn text(&self, turn: usize) -> String {
        let rotated = |entries: &[String]| {
            let mut entries = entries.to_vec();
            if !entries.is_empty() {
                let by = turn % entries.len();
                entries.rotate_left(by);
            }
            string_list(&entries)
        };
        let triggers: Vec<String> = self.triggers.iter().map(|t| (*t).to_owned()).collect();
        let mut members = vec![
            ("triggers".to_owned(), rotated(&triggers)),
            ("allowedSenders".to_owned(), rotated(&self.senders)),
            ("allowedRooms".to_owned(), rotated(&self.rooms)),
            ("activeHoursUTC".to_owned(), rotated(&self.windows)),
        ];
        for (name, (given, value)) in ["maxAttempts", "maxCallsPerHour", "concurrency"]
            .into_iter()
            .zip(self.numbers)
        {
            if given {
                members.push((name.to_owned(), value.to_string()));
            }
        }
        let count = members.len();
        members.rotate_left(turn % count);
        object_text(&members, turn % 2 == 1)
    }
}

fn time_strategy() -> impl Strategy<Value = OffsetDateTime> {
    (0_i64..4_000_000_000, 0_u32..1_000_000_000).prop_map(|(seconds, nanos)| {
        let t = OffsetDateTime::from_unix_timestamp(seconds).expect("in range");
        t.replace_nanosecond(nanos).expect("below one second")
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Arbitrary text never panics the policy parser, and whatever it
    /// accepts keeps the policy invariants.
    #[test]
    fn policy_parser_on_arbitrary_text(text in "\\PC{0,80}|\\{[\\PC]{0,80}\\}") {
        if let Some(policy) = invariants::check_policy_text(&text) {
            invariants::check_policy_times(&policy);
        }
    }

    /// Objects made of real, misspelled, repeated, mistyped and out-of-range
    /// fields: accepted or refused, never a panic, invariants on acceptance.
    #[test]
    fn policy_parser_on_policy_like_objects(
        members in vec(policy_member(), 0..8),
        spaced in any::<bool>(),
    ) {
        let text = object_text(&members, spaced);
        if let Some(policy) = invariants::check_policy_text(&text) {
            invariants::check_policy_times(&policy);
        }
    }

}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// Valid policies are accepted whatever their list and field order, and
    /// every ordering has the same fingerprint; the fingerprint changes when
    /// the meaning does.
    #[test]
    fn valid_policies_parse_with_an_order_free_fingerprint(
        spec in valid_policy(),
        other in valid_policy(),
        turn in 1_usize..16,
    ) {
        let policy = Policy::parse(&spec.text(0)).expect("a valid policy parses");
        let turned = Policy::parse(&spec.text(turn)).expect("a reordered policy parses");
        prop_assert_eq!(policy.fingerprint(), turned.fingerprint());
        prop_assert_eq!(policy.normalized(), turned.normalized());
        invariants::check_policy(&policy);
        invariants::check_policy_times(&policy);
        let other = Policy::parse(&other.text(0)).expect("a valid policy parses");
        prop_assert_eq!(
            policy.normalized() == other.normalized(),
            policy.fingerprint() == other.fingerprint()
        );
    }

}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// `next_active_start` is the next window start at any time of day.
    #[test]
    fn next_active_start_is_the_next_window_start(
        spec in valid_policy(),
        t in time_strategy(),
    ) {
        let policy = Policy::parse(&spec.text(0)).expect("a valid policy parses");
        invariants::check_active_hours(&policy, t);
    }
}

// ---------------------------------------------------------------- wire

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

// ---------------------------------------------------------------- process ABI

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

// ---------------------------------------------------------------- thread budget

fn envelope() -> impl Strategy<Value = MessageEnvelope> {
    (
        (any::<i64>(), any::<u128>(), any::<u128>(), 0_u64..1_000_000),
        (
            prop::option::of("\\PC{0,30}"),
            prop_oneof![3 => 0_usize..200, 1 => 0_usize..3000],
        ),
        (any::<bool>(), any::<bool>(), any::<bool>()),
        (
            prop::option::of(0_i64..4_000_000_000),
            prop::option::of(any::<u128>()),
            0_i64..4_000_000_000,
        ),
    )
        .prop_map(
            |(
                (seq, room, id, sender),
                (text, padding),
                (agent, ask, by_runtime),
                (deadline, reply_to, created),
            )| {
                let at = |seconds: i64| {
                    Timestamp(OffsetDateTime::from_unix_timestamp(seconds).expect("in range"))
                };
                MessageEnvelope {
                    conversation_id: Uuid::from_u128(room),
                    message_id: Uuid::from_u128(id),
                    seq,
                    sender: IdentityRef {
                        id: Uuid::from_u128(id.rotate_left(17)),
                        number: IdentityNumber::from_sequence(sender).expect("in range"),
                        kind: if agent {
                            IdentityKind::Agent
                        } else {
                            IdentityKind::Person
                        },
                    },
                    text: text.map(|text| format!("{text}{}", "é".repeat(padding))),
                    sealed: None,
                    ask,
                    deadline: deadline.map(at),
                    reply_to: reply_to.map(Uuid::from_u128),
                    by_runtime,
                    created_at: at(created),
                }
            },
        )
}

fn budget() -> impl Strategy<Value = usize> {
    prop_oneof![
        4 => MIN_THREAD_MAX_BYTES..=MAX_THREAD_MAX_BYTES,
        2 => MIN_THREAD_MAX_BYTES..=2 * MIN_THREAD_MAX_BYTES,
        1 => prop::sample::select(vec![0, 511, 65_537, usize::MAX]),
    ]
}

fn limit() -> impl Strategy<Value = usize> {
    prop_oneof![
        6 => 1..=MAX_THREAD_LIMIT,
        1 => prop::sample::select(vec![0, MAX_THREAD_LIMIT + 1, usize::MAX]),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// Real envelopes, any budget and limit: within budget, in order, the
    /// longest fitting prefix, a valid `ThreadResponse`.
    #[test]
    fn thread_packing_of_envelopes(
        envelopes in vec(envelope(), 0..24),
        more_after in any::<bool>(),
        max_bytes in budget(),
        limit in limit(),
    ) {
        invariants::check_thread_envelopes(&envelopes, more_after, max_bytes, limit);
    }

    /// Budgets at and around the exact size of some prefix's body, where an
    /// off-by-one in the packing would show.
    #[test]
    fn thread_packing_at_the_budget_edges(
        items in vec(
            (
                prop_oneof![Just(i64::MIN), Just(-1_i64), 0_i64..10, any::<i64>()],
                "[a-z]{0,3}|x{20,400}",
            ),
            1..40,
        ),
        more_after in any::<bool>(),
        pick in any::<prop::sample::Index>(),
        delta in -3_isize..=3,
        limit in 1..=MAX_THREAD_LIMIT,
    ) {
        let borrowed: Vec<(i64, &str)> = items.iter().map(|(seq, e)| (*seq, e.as_str())).collect();
        let count = pick.index(items.len()) + 1;
        let next = (count < items.len() || more_after).then(|| items[count - 1].0);
        let exact = render_thread_body(&borrowed, &PackedThread { count, next }).len();
        let max_bytes = exact
            .saturating_add_signed(delta)
            .clamp(MIN_THREAD_MAX_BYTES, MAX_THREAD_MAX_BYTES);
        invariants::check_thread_packing(&items, more_after, max_bytes, limit);
    }

    /// Tiny raw items near the smallest budget, where `null` versus a long
    /// seq decides which prefix fits.
    #[test]
    fn thread_packing_of_small_items(
        items in vec(
            (
                prop_oneof![Just(i64::MIN), Just(-1_i64), 0_i64..10, any::<i64>()],
                "[a-z]{0,3}|x{100,490}",
            ),
            0..30,
        ),
        more_after in any::<bool>(),
        max_bytes in MIN_THREAD_MAX_BYTES..=MIN_THREAD_MAX_BYTES + 64,
        limit in limit(),
    ) {
        invariants::check_thread_packing(&items, more_after, max_bytes, limit);
    }

    /// The 413 case: a first envelope that cannot fit even with a one-byte
    /// `next` is refused, naming its size, whatever follows it.
    #[test]
    fn a_first_item_over_the_budget_is_refused(
        max_bytes in MIN_THREAD_MAX_BYTES..=MAX_THREAD_MAX_BYTES,
        over in 0_usize..64,
        rest in vec("[a-z]{0,3}", 0..5),
        more_after in any::<bool>(),
        limit in 1..=MAX_THREAD_LIMIT,
    ) {
        // The fixed part `{"messages":[` + `],"next":` + `}` is 23 bytes.
        let first = "x".repeat(max_bytes - 23 + over);
        let mut items = vec![(1_i64, first.as_str())];
        items.extend(rest.iter().map(|text| (2_i64, text.as_str())));
        let result = pack_thread(&items, more_after, max_bytes, limit);
        prop_assert_eq!(
            result,
            Err(ThreadBudgetError::ContextItemTooLarge { envelope_bytes: first.len(), max_bytes })
        );
    }
}
