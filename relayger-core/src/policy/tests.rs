//! Table-driven tests of policy parsing and rules.
use super::*;
use time::macros::datetime;

const ROOM_A: &str = "0195f3b2-7c1e-7d2a-9c4b-3e2f1a0b9c8d";
const ROOM_B: &str = "0195f3b2-0000-7000-8000-000000000001";

fn room(text: &str) -> Uuid {
    Uuid::parse_str(text).expect("valid room")
}

fn number(text: &str) -> IdentityNumber {
    IdentityNumber::parse(text).expect("valid number")
}

fn window(text: &str) -> ActiveHours {
    ActiveHours::parse(text).expect("valid window")
}

fn windows(texts: &[&str]) -> Policy {
    let active_hours_utc = texts.iter().map(|text| window(text)).collect();
    Policy {
        active_hours_utc,
        ..Policy::default()
    }
}

#[test]
fn every_default_is_filled() {
    let seed = r#"{
      "triggers": ["questions"],
      "allowedSenders": [],
      "allowedRooms": [],
      "maxAttempts": 3,
      "maxCallsPerHour": 60,
      "concurrency": 1,
      "activeHoursUTC": []
    }"#;
    let seed_value: Value = serde_json::from_str(seed).expect("valid");
    assert_eq!(Policy::parse(seed), Ok(Policy::default()));
    assert_eq!(Policy::parse("{}"), Ok(Policy::default()));
    assert_eq!(Policy::parse(" { } \n"), Ok(Policy::default()));
    assert_eq!(
        serde_json::to_value(Policy::default()).expect("serialize"),
        seed_value
    );
    assert_eq!(Policy::default().normalized(), seed_value);
    // One field given leaves every other at its default.
    let only_concurrency = Policy::parse(r#"{"concurrency": 4}"#).expect("valid");
    assert_eq!(
        only_concurrency,
        Policy {
            concurrency: 4,
            ..Policy::default()
        }
    );
    let only_rooms = Policy::parse(&format!(r#"{{"allowedRooms": ["{ROOM_A}"]}}"#));
    let expected = Policy {
        allowed_rooms: vec![room(ROOM_A)],
        ..Policy::default()
    };
    assert_eq!(only_rooms, Ok(expected));
}

#[test]
fn bad_policies_name_their_field() {
    // (policy text, field named in the error, part of the message)
    #[rustfmt::skip]
    let table: [(&str, &str, &str); 36] = [
        (r#"{"maxCallsPerHours": 10}"#, "maxCallsPerHours", "did you mean `maxCallsPerHour`?"),
        (r#"{"activeHoursUtc": []}"#, "activeHoursUtc", "did you mean `activeHoursUTC`?"),
        (r#"{"budget": 5}"#, "budget", "the fields are `triggers`"),
        (r#"{"concurrency": 0}"#, "concurrency", "must be an integer from 1 to 64, found 0"),
        (r#"{"concurrency": 65}"#, "concurrency", "found 65"),
        (r#"{"concurrency": 1e1}"#, "concurrency", "found 10.0"),
        (r#"{"maxAttempts": 3.0}"#, "maxAttempts", "from 1 to 20, found 3.0"),
        (r#"{"maxAttempts": 3.5}"#, "maxAttempts", "found 3.5"),
        (r#"{"maxAttempts": -1}"#, "maxAttempts", "found -1"),
        (r#"{"maxAttempts": null}"#, "maxAttempts", "found null"),
        (r#"{"maxAttempts": true}"#, "maxAttempts", "found true"),
        (r#"{"maxAttempts": "3"}"#, "maxAttempts", "found the string \"3\""),
        (r#"{"maxAttempts": 21}"#, "maxAttempts", "found 21"),
        (r#"{"maxCallsPerHour": 0}"#, "maxCallsPerHour", "from 1 to 100000"),
        (r#"{"maxCallsPerHour": 100001}"#, "maxCallsPerHour", "found 100001"),
        (r#"{"maxCallsPerHour": 4294967297}"#, "maxCallsPerHour", "found 4294967297"),
        (r#"{"maxCallsPerHour": 18446744073709551616}"#, "maxCallsPerHour", "must be an integer"),
        (r#"{"maxAttempts": 3, "maxAttempts": 3}"#, "maxAttempts", "is given more than once"),
        (r#"{"triggers": []}"#, "triggers", "at least one"),
        (r#"{"triggers": ["questions", "questions"]}"#, "triggers", "\"questions\" is listed more than once"),
        (r#"{"triggers": ["answers"]}"#, "triggers", "entry 0: \"answers\" is not a trigger"),
        (r#"{"triggers": ["Questions"]}"#, "triggers", "is not a trigger"),
        (r#"{"triggers": "questions"}"#, "triggers", "must be an array of strings"),
        (r#"{"triggers": null}"#, "triggers", "found null"),
        (r#"{"allowedSenders": [100000042]}"#, "allowedSenders", "entry 0 must be a string, found 100000042"),
        (r#"{"allowedSenders": ["100000042", "12ab56"]}"#, "allowedSenders", "entry 1: \"12ab56\""),
        (r#"{"allowedSenders": ["100000042", "100000042"]}"#, "allowedSenders", "\"100000042\" is listed more than once"),
        (r#"{"allowedRooms": ["not-a-uuid"]}"#, "allowedRooms", "is not a room UUID"),
        (r#"{"allowedRooms": ["{0195f3b2-7c1e-7d2a-9c4b-3e2f1a0b9c8d}"]}"#, "allowedRooms", "is not a room UUID"),
        (r#"{"allowedRooms": ["0195f3b2-7c1e-7d2a-9c4b-3e2f1a0b9c8d", "0195F3B2-7C1E-7D2A-9C4B-3E2F1A0B9C8D"]}"#, "allowedRooms", "listed more than once"),
        (r#"{"allowedRooms": [{"a": 1, "a": 2}]}"#, "allowedRooms", "key `a` appears more than once in `allowedRooms.0`"),
        (r#"{"activeHoursUTC": ["24:00-01:00"]}"#, "activeHoursUTC", "is not a window"),
        (r#"{"activeHoursUTC": ["09:60-10:00"]}"#, "activeHoursUTC", "is not a window"),
        (r#"{"activeHoursUTC": ["9:00-17:00"]}"#, "activeHoursUTC", "is not a window"),
        (r#"{"activeHoursUTC": ["09:00-09:00"]}"#, "activeHoursUTC", "same minute"),
        (r#"{"activeHoursUTC": ["09:00-17:00", "22:00-06:00", "09:00-17:00"]}"#, "activeHoursUTC", "\"09:00-17:00\" is listed more than once"),
    ];
    for (text, field, message) in table {
        let error = Policy::parse(text).expect_err(text);
        assert_eq!(error.field(), field, "{text}: {error}");
        let shown = error.to_string();
        assert!(
            shown.starts_with(&format!("policy field `{field}`: ")),
            "{shown}"
        );
        assert!(shown.contains(message), "{text}: {shown}");
        // The serde path says the same thing.
        let via_serde = serde_json::from_str::<Policy>(text)
            .expect_err(text)
            .to_string();
        assert!(via_serde.contains(&shown), "{via_serde}");
    }
    for bad_window in [
        "09:00 - 17:00",
        "09:00-17:00-18:00",
        "0900-1700",
        "09:00",
        "",
        "-",
    ] {
        let text = format!(r#"{{"activeHoursUTC": ["{bad_window}"]}}"#);
        let error = Policy::parse(&text).expect_err(&text);
        assert_eq!(error.field(), "activeHoursUTC", "{text}");
    }
}

#[test]
fn whole_document_errors() {
    let error = Policy::parse("[]").expect_err("array");
    assert_eq!(error, PolicyError::NotAnObject { found: "an array" });
    assert_eq!(error.field(), "");
    for text in ["{\"triggers\": ", "{} {}", "", "{'concurrency': 1}"] {
        let error = Policy::parse(text).expect_err(text);
        assert!(matches!(error, PolicyError::InvalidJson { .. }), "{text:?}");
        assert_eq!(error.field(), "");
    }
    assert_eq!(
        PolicyError::field_problem("concurrency", "must be an integer from 1 to 64").to_string(),
        "policy field `concurrency`: must be an integer from 1 to 64"
    );
}

fn full_policy() -> Policy {
    Policy {
        triggers: vec![Trigger::Messages, Trigger::Questions],
        allowed_senders: vec![number("100000042"), number("123456")],
        allowed_rooms: vec![room(ROOM_A), room(ROOM_B)],
        max_attempts: 20,
        max_calls_per_hour: 100_000,
        concurrency: 64,
        active_hours_utc: vec![window("22:00-06:00"), window("09:00-17:30")],
    }
}

#[test]
fn round_trip_through_json() {
    let messages_only = Policy {
        triggers: vec![Trigger::Messages],
        max_attempts: 1,
        max_calls_per_hour: 1,
        ..Policy::default()
    };
    for policy in [Policy::default(), full_policy(), messages_only] {
        assert_eq!(policy.validate(), Ok(()));
        let text = serde_json::to_string(&policy).expect("serialize");
        assert_eq!(Policy::parse(&text).as_ref(), Ok(&policy), "{text}");
        let pretty = serde_json::to_string_pretty(&policy).expect("serialize");
        let from_serde: Policy = serde_json::from_str(&pretty).expect("valid");
        assert_eq!(from_serde, policy, "{pretty}");
        let normalized = policy.normalized().to_string();
        let reparsed = Policy::parse(&normalized).map(|p| p.fingerprint());
        assert_eq!(reparsed, Ok(policy.fingerprint()));
    }
    let text = serde_json::to_string(&full_policy()).expect("serialize");
    assert!(
        text.contains(r#""activeHoursUTC":["22:00-06:00","09:00-17:30"]"#),
        "{text}"
    );
    assert!(text.contains(r#""maxCallsPerHour":100000"#), "{text}");
}

#[test]
fn policy_inside_a_request_body_stays_strict() {
    #[derive(Debug, Deserialize)]
    struct Register {
        policy: Option<Policy>,
    }
    let ok: Register = serde_json::from_str(r#"{"policy": {"concurrency": 2}}"#).expect("valid");
    assert_eq!(ok.policy.map(|p| p.concurrency), Some(2));
    let table = [
        (
            r#"{"policy": {"concurrency": 2, "concurrency": 3}}"#,
            "policy field `concurrency`",
        ),
        (
            r#"{"policy": {"concurency": 2}}"#,
            "did you mean `concurrency`?",
        ),
        (
            r#"{"policy": [1]}"#,
            "must be a JSON object, found an array",
        ),
        (r#"{"policy": {"maxAttempts": 3}"#, "EOF"),
    ];
    for (text, expected) in table {
        let error = serde_json::from_str::<Register>(text)
            .expect_err(text)
            .to_string();
        assert!(error.contains(expected), "{text}: {error}");
    }
}

#[test]
fn normalized_form_ignores_list_order() {
    let a = Policy::parse(&format!(
        r#"{{"triggers":["questions","messages"],"allowedSenders":["123456","100000042"],
            "allowedRooms":["{ROOM_B}","{ROOM_A}"],"activeHoursUTC":["09:00-17:30","22:00-06:00"]}}"#
    ))
    .expect("valid");
    let b = Policy {
        allowed_rooms: vec![room(&ROOM_A.to_uppercase()), room(ROOM_B)],
        max_attempts: 3,
        max_calls_per_hour: 60,
        concurrency: 1,
        ..full_policy()
    };
    assert_ne!(a, b, "the lists are in another order");
    assert_eq!(a.normalized(), b.normalized());
    assert_eq!(a.fingerprint(), b.fingerprint());
    let normalized = a.normalized();
    assert_eq!(normalized["allowedSenders"], json!(["123456", "100000042"]));
    assert_eq!(normalized["triggers"], json!(["messages", "questions"]));
    assert_eq!(
        normalized["activeHoursUTC"],
        json!(["09:00-17:30", "22:00-06:00"])
    );
    let default = Policy::default().fingerprint();
    assert_eq!(default.len(), 64);
    let changes = [
        Policy {
            concurrency: 2,
            ..Policy::default()
        },
        Policy {
            max_attempts: 4,
            ..Policy::default()
        },
        Policy {
            max_calls_per_hour: 61,
            ..Policy::default()
        },
        Policy {
            triggers: vec![Trigger::Messages],
            ..Policy::default()
        },
        Policy {
            allowed_rooms: vec![room(ROOM_A)],
            ..Policy::default()
        },
        Policy {
            allowed_senders: vec![number("123456")],
            ..Policy::default()
        },
        windows(&["09:00-17:00"]),
    ];
    for changed in changes {
        assert_ne!(changed.fingerprint(), default, "{changed:?}");
    }
}

#[test]
fn trigger_table() {
    let questions = Policy::default();
    let messages = Policy {
        triggers: vec![Trigger::Messages],
        ..Policy::default()
    };
    let both = Policy {
        triggers: vec![Trigger::Questions, Trigger::Messages],
        ..messages.clone()
    };
    // (from_self, ask, by_runtime) → (questions, messages, both)
    #[rustfmt::skip]
    let table = [
        ((false, true, false), (true, true, true)),
        ((false, false, false), (false, true, true)),
        ((false, false, true), (false, false, false)),
        ((false, true, true), (true, false, true)),
        ((true, true, false), (false, false, false)),
        ((true, false, false), (false, false, false)),
        ((true, false, true), (false, false, false)),
        ((true, true, true), (false, false, false)),
    ];
    for ((from_self, ask, by_runtime), expected) in table {
        let facts = MessageFacts {
            from_self,
            ask,
            by_runtime,
        };
        let got = (
            questions.triggers_on(&facts),
            messages.triggers_on(&facts),
            both.triggers_on(&facts),
        );
        assert_eq!(got, expected, "{facts:?}");
    }
}

#[test]
fn sender_and_room_lists() {
    let open = Policy::default();
    let closed = full_policy();
    assert!(open.sender_allowed(&number("999999")));
    assert!(open.room_allowed(&Uuid::nil()));
    assert!(closed.sender_allowed(&number("100000042")));
    assert!(!closed.sender_allowed(&number("100000043")));
    assert!(closed.room_allowed(&room(ROOM_A)));
    assert!(!closed.room_allowed(&Uuid::nil()));
}

#[test]
fn active_hours_table() {
    let always = Policy::default();
    let day = windows(&["09:00-17:30"]);
    let night = windows(&["22:00-06:00"]);
    let split = windows(&["13:00-14:00", "08:00-09:00"]);
    // (policy, t, next active start; None = active at t)
    #[rustfmt::skip]
    let table = [
        (&always, datetime!(2026-10-02 03:00 UTC), None),
        (&day, datetime!(2026-10-02 09:00 UTC), None),
        (&day, datetime!(2026-10-02 17:29:59.999 UTC), None),
        (&day, datetime!(2026-10-02 17:30 UTC), Some(datetime!(2026-10-03 09:00 UTC))),
        (&day, datetime!(2026-10-02 08:59:59 UTC), Some(datetime!(2026-10-02 09:00 UTC))),
        (&day, datetime!(2026-12-31 23:00 UTC), Some(datetime!(2027-01-01 09:00 UTC))),
        // 10:30 at UTC+2 is 08:30 UTC.
        (&day, datetime!(2026-10-02 10:30 +2), Some(datetime!(2026-10-02 09:00 UTC))),
        (&night, datetime!(2026-10-02 23:59 UTC), None),
        (&night, datetime!(2026-10-02 00:00 UTC), None),
        (&night, datetime!(2026-10-02 05:59 UTC), None),
        (&night, datetime!(2026-10-02 06:00 UTC), Some(datetime!(2026-10-02 22:00 UTC))),
        (&night, datetime!(2026-10-02 21:59:30 UTC), Some(datetime!(2026-10-02 22:00 UTC))),
        (&split, datetime!(2026-10-02 09:30 UTC), Some(datetime!(2026-10-02 13:00 UTC))),
        (&split, datetime!(2026-10-02 14:00 UTC), Some(datetime!(2026-10-03 08:00 UTC))),
        (&split, datetime!(2026-10-02 07:00 UTC), Some(datetime!(2026-10-02 08:00 UTC))),
        (&split, datetime!(2026-10-02 13:59 UTC), None),
    ];
    for (policy, t, next) in table {
        let windows = &policy.active_hours_utc;
        assert_eq!(policy.is_active_at(t), next.is_none(), "{t} {windows:?}");
        let computed = policy.next_active_start(t);
        assert_eq!(computed, next, "{t} {windows:?}");
        if let Some(start) = computed {
            assert!(policy.is_active_at(start) && start > t);
            assert_eq!(start.offset(), UtcOffset::UTC);
        }
    }
}

#[test]
fn window_text_round_trips() {
    for text in ["00:00-23:59", "23:59-00:00", "09:05-17:30", "22:00-06:00"] {
        assert_eq!(window(text).to_string(), text);
        let json = serde_json::to_string(&window(text)).expect("serialize");
        let back: ActiveHours = serde_json::from_str(&json).expect("valid");
        assert_eq!(back, window(text));
    }
}

/// docs/policy.md stays true: every JSON example in it is a valid policy,
/// the defaults block is the default policy, and every field is explained.
#[test]
fn the_policy_page_examples_parse_and_its_defaults_are_the_defaults() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/policy.md");
    let page = std::fs::read_to_string(&path).expect("docs/policy.md exists");
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in page.lines() {
        match (&mut current, line.trim_end()) {
            (None, "```json") => current = Some(String::new()),
            (Some(block), "```") => {
                blocks.push(std::mem::take(block));
                current = None;
            }
            (Some(block), text) => {
                block.push_str(text);
                block.push('\n');
            }
            (None, _) => {}
        }
    }
    assert!(blocks.len() >= 8, "{} JSON examples", blocks.len());
    let defaults = Policy::parse(&blocks[0]).expect("the defaults block parses");
    assert_eq!(defaults, Policy::default());
    for field in FIELDS {
        assert!(
            blocks[0].contains(field),
            "the defaults block spells out {field}"
        );
    }
    for block in &blocks {
        // A block holds one policy, or one policy a line.
        if Policy::parse(block).is_err() {
            for line in block.lines().filter(|l| !l.trim().is_empty()) {
                Policy::parse(line).unwrap_or_else(|err| panic!("{line}: {err}"));
            }
        }
    }
    for field in FIELDS {
        assert!(
            page.contains(&format!("### `{field}`")),
            "{field} is explained"
        );
    }
}
