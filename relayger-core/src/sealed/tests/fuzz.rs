//! Random edits to a valid payload.

use proptest::prelude::*;

use super::*;

/// A change to one string of the fixture's payload.
#[derive(Debug, Clone)]
enum Mutation {
    /// Replace the byte at `at` (mod length) with `with`.
    Replace { at: usize, with: char },
    /// Insert `with` at `at` (mod length + 1).
    Insert { at: usize, with: char },
    /// Cut the string to `at` (mod length + 1) characters.
    Truncate { at: usize },
    /// Replace the whole string.
    Whole(String),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (
            any::<usize>(),
            prop_oneof![Just('A'), Just('='), Just('/'), Just('-'), any::<char>()]
        )
            .prop_map(|(at, with)| Mutation::Replace { at, with }),
        (any::<usize>(), any::<char>()).prop_map(|(at, with)| Mutation::Insert { at, with }),
        any::<usize>().prop_map(|at| Mutation::Truncate { at }),
        ".{0,64}".prop_map(Mutation::Whole),
        "[A-Za-z0-9+/]{0,80}={0,2}".prop_map(Mutation::Whole),
    ]
}

fn apply(text: &str, mutation: &Mutation) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut chars = chars;
    match mutation {
        Mutation::Replace { at, with } => {
            if !chars.is_empty() {
                let at = at % chars.len();
                chars[at] = *with;
            }
        }
        Mutation::Insert { at, with } => {
            let at = at % (chars.len() + 1);
            chars.insert(at, *with);
        }
        Mutation::Truncate { at } => chars.truncate(at % (chars.len() + 1)),
        Mutation::Whole(whole) => return whole.clone(),
    }
    chars.into_iter().collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Random edits to any string of a valid payload never panic in `open` or
    /// `validate_shape`, and a reader's copy only opens if its own entry is
    /// unchanged (one spelling per byte string, so a changed string is either
    /// refused or different bytes).
    #[test]
    fn mutated_payloads_never_panic_and_never_open_when_changed(
        entry in 0usize..3,
        field in 0usize..4,
        change in mutation(),
        version in prop_oneof![Just(SEALED_VERSION), any::<u32>()],
    ) {
        let f = fixture();
        let mut payload = f.payload.clone();
        payload.version = version;
        let target = &mut payload.recipients[entry];
        match field {
            0 => target.enc = apply(&target.enc, &change),
            1 => target.ciphertext = apply(&target.ciphertext, &change),
            2 => {
                let changed = apply(&target.identity_id.to_string(), &change);
                if let Ok(id) = Uuid::parse_str(&changed) {
                    target.identity_id = id;
                }
            }
            _ => payload.suite = apply(&payload.suite, &change),
        }
        let _ = validate_shape(&payload, &f.room.ids());
        for who in &f.room.members {
            let result = f.room.open_as(&payload, who);
            let original = f.payload.recipients.iter().find(|r| r.identity_id == who.id);
            let now: Vec<_> = payload.recipients.iter().filter(|r| r.identity_id == who.id).collect();
            if result.is_ok() {
                prop_assert_eq!(payload.version, SEALED_VERSION);
                prop_assert_eq!(&payload.suite, SEALED_SUITE);
                prop_assert_eq!(now.len(), 1);
                prop_assert_eq!(Some(now[0]), original);
                prop_assert_eq!(result, Ok(f.content.clone()));
            }
        }
    }
}
