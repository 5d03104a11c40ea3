//! The policy parser, policy fingerprints and active hours.

use super::*;

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
pub(crate) struct ValidPolicy {
    triggers: Vec<&'static str>,
    senders: Vec<String>,
    rooms: Vec<String>,
    windows: Vec<String>,
    numbers: [(bool, u32); 3],
}

pub(crate) fn valid_policy() -> impl Strategy<Value = ValidPolicy> {
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
    pub(crate) fn text(&self, turn: usize) -> String {
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
