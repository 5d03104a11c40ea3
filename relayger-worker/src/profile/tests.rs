//! Profile files written concurrently, and the name rules.

use super::dir::check_name;
use super::*;

fn profile(display_name: &str) -> Profile {
    let key_pair = KeyPair::generate().expect("key pair");
    Profile {
        version: FORMAT_VERSION,
        server: "http://127.0.0.1:7070".into(),
        token_id: Uuid::now_v7(),
        token: format!("rlg_{display_name}"),
        identity_id: Uuid::now_v7(),
        number: IdentityNumber::parse("100000001").expect("number"),
        kind: IdentityKind::Person,
        display_name: display_name.into(),
        owner_number: None,
        public_key: key_pair.public_base64(),
        secret_key: key_pair.secret_base64(),
    }
}

/// Many saves of one name at the same moment: exactly one wins, the rest
/// are `AlreadyExists`, and the file is the winner's, whole.
#[test]
fn concurrent_creates_of_one_name_never_replace_each_other() {
    let dir = std::env::temp_dir().join(format!("relayger-profile-race-{}", Uuid::now_v7()));
    let profiles = ProfileDir::at(&dir);
    let barrier = std::sync::Barrier::new(8);
    let outcomes: Vec<(String, Result<PathBuf, ProfileError>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let (profiles, barrier) = (&profiles, &barrier);
                scope.spawn(move || {
                    let mine = profile(&format!("writer-{i}"));
                    barrier.wait();
                    (mine.display_name.clone(), profiles.create("same", &mine))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("thread"))
            .collect()
    });
    let winners: Vec<&String> = outcomes
        .iter()
        .filter(|(_, outcome)| outcome.is_ok())
        .map(|(name, _)| name)
        .collect();
    assert_eq!(winners.len(), 1, "{outcomes:?}");
    for (_, outcome) in &outcomes {
        if let Err(err) = outcome {
            assert!(matches!(err, ProfileError::AlreadyExists { .. }), "{err}");
        }
    }
    let saved = profiles.load("same").expect("load");
    assert_eq!(&saved.display_name, winners[0]);
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .expect("dir")
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .filter(|n| n.to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn name_table() {
    let good = [
        "default",
        "a",
        "receiver-2",
        "bot.prod",
        "A_b-c.9",
        &"x".repeat(64),
    ];
    for name in good {
        assert!(check_name(name).is_ok(), "{name}");
    }
    let bad = [
        "",
        ".",
        "..",
        "a/b",
        "../x",
        "a b",
        "é",
        "name\0",
        &"x".repeat(65),
    ];
    for name in bad {
        assert!(check_name(name).is_err(), "{name:?}");
    }
}
