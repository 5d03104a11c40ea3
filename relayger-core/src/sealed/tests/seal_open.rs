//! Sealing and opening: round trips, and what sealing refuses.

use super::*;

#[test]
fn every_member_and_the_sender_open_text_and_structured_content() {
    for others in [1, 2] {
        let room = Room::new(others);
        for content in sample_contents() {
            let payload = room.seal(&content);
            assert_eq!(payload.version, SEALED_VERSION);
            assert_eq!(payload.suite, SEALED_SUITE);
            assert_eq!(payload.recipients.len(), others + 1, "{content:?}");
            assert_eq!(validate_shape(&payload, &room.ids()), Ok(()));
            for who in &room.members {
                assert_eq!(
                    room.open_as(&payload, who).as_ref(),
                    Ok(&content),
                    "room of {} opened by {}",
                    others + 1,
                    who.id
                );
            }
        }
    }
}

#[test]
fn the_senders_copy_comes_last_unless_the_sender_is_listed() {
    let room = Room::new(2);
    let content = text("order");

    let payload = room.seal(&content);
    let order: Vec<Uuid> = payload.recipients.iter().map(|r| r.identity_id).collect();
    let mut expected: Vec<Uuid> = room.others().iter().map(|m| m.id).collect();
    expected.push(room.sender().id);
    assert_eq!(order, expected);

    // Listed explicitly (with its own key): sealed once, in the given place.
    let mut listed = vec![(room.sender().id, room.sender().keys.public_key())];
    listed.extend(room.recipients());
    let payload = seal(&content, &room.binding, &room.sender().keys, &listed).expect("seal");
    let order: Vec<Uuid> = payload.recipients.iter().map(|r| r.identity_id).collect();
    assert_eq!(order, room.ids());
    assert_eq!(room.open_as(&payload, room.sender()), Ok(content));
}

#[test]
fn a_room_of_one_seals_only_the_senders_copy() {
    let room = Room::new(0);
    let payload = room.seal(&text("note to self"));
    assert_eq!(payload.recipients.len(), 1);
    assert_eq!(validate_shape(&payload, &room.ids()), Ok(()));
    assert_eq!(
        room.open_as(&payload, room.sender()),
        Ok(text("note to self"))
    );
}

#[test]
fn every_seal_uses_fresh_ephemeral_keys() {
    let room = Room::new(1);
    let a = room.seal(&text("same"));
    let b = room.seal(&text("same"));
    for (x, y) in a.recipients.iter().zip(&b.recipients) {
        assert_ne!(x.enc, y.enc);
        assert_ne!(x.ciphertext, y.ciphertext);
    }
}

#[test]
fn the_payload_json_contains_no_plaintext() {
    let room = Room::new(2);
    let secret = "the launch code is swordfish";
    let content = SealedContent::Structured {
        schema: "relayger.test/secret".to_owned(),
        data: json!({"code": secret}),
        text: Some(secret.to_owned()),
    };
    let payload = room.seal(&content);
    let json = serde_json::to_string(&payload).expect("serialize");
    let plaintext = content.to_plaintext().expect("plaintext");
    for needle in [
        secret.to_owned(),
        "swordfish".to_owned(),
        "relayger.test/secret".to_owned(),
        b64(secret.as_bytes()),
        b64(&plaintext),
        to_hex(secret.as_bytes()),
    ] {
        assert!(!json.contains(&needle), "payload JSON contains {needle:?}");
    }
    // Also at the other two base64 alignments of the secret.
    for skip in 1..3 {
        let shifted = b64(&secret.as_bytes()[skip..]);
        assert!(!json.contains(&shifted[4..shifted.len() - 4]));
    }
}

#[test]
fn seal_refuses_bad_recipient_lists_and_content() {
    let room = Room::new(1);
    let keys = &room.sender().keys;
    let other = &room.others()[0];
    let stranger = member();
    type Recipients = Vec<(Uuid, [u8; KEY_BYTES])>;
    let cases: Vec<(&str, SealedContent, Recipients, SealError)> = vec![
        (
            "duplicate recipient",
            text("x"),
            vec![
                (other.id, other.keys.public_key()),
                (other.id, other.keys.public_key()),
            ],
            SealError::DuplicateRecipient(other.id),
        ),
        (
            "sender listed with someone else's key",
            text("x"),
            vec![(room.sender().id, stranger.keys.public_key())],
            SealError::SenderKeyMismatch,
        ),
        (
            "low-order recipient key",
            text("x"),
            vec![(other.id, [0u8; KEY_BYTES])],
            SealError::InvalidRecipientKey(other.id),
        ),
        (
            "empty schema",
            SealedContent::Structured {
                schema: String::new(),
                data: json!(1),
                text: None,
            },
            room.recipients(),
            SealError::InvalidContent("schema must not be empty".to_owned()),
        ),
        (
            "too large",
            text(&"a".repeat(MAX_PLAINTEXT_BYTES)),
            room.recipients(),
            SealError::TooLarge {
                bytes: MAX_PLAINTEXT_BYTES + r#"{"text":""}"#.len(),
                max: MAX_PLAINTEXT_BYTES,
            },
        ),
    ];
    for (name, content, recipients, expected) in cases {
        assert_eq!(
            seal(&content, &room.binding, keys, &recipients),
            Err(expected),
            "{name}"
        );
    }
}

#[test]
fn the_largest_content_that_fits_passes_the_shape_check() {
    let room = Room::new(1);
    let overhead = r#"{"text":""}"#.len();
    let content = text(&"a".repeat(MAX_PLAINTEXT_BYTES - overhead));
    let payload = room.seal(&content);
    assert_eq!(validate_shape(&payload, &room.ids()), Ok(()));
    assert_eq!(room.open_as(&payload, &room.others()[0]), Ok(content));
}
