//! Sealing and opening: round trips, and every way opening must fail.

use hpke::OpModeS;

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

#[test]
fn an_identity_outside_the_room_is_not_a_recipient() {
    let f = fixture();
    let outsider = member();
    assert_eq!(
        f.room.open_as(&f.payload, &outsider),
        Err(OpenError::NotARecipient)
    );
}

#[test]
fn a_third_identity_cannot_forge_an_entry_for_a_real_recipient() {
    let f = fixture();
    let victim = &f.room.others()[0];
    let mallory = member();
    // Mallory seals her own content to the victim while claiming to be the
    // sender (same binding), then swaps it into the real payload.
    let forged = seal(
        &text("pay mallory"),
        &f.room.binding,
        &mallory.keys,
        &[(victim.id, victim.keys.public_key())],
    )
    .expect("seal");
    let forged_entry = forged
        .recipients
        .iter()
        .find(|r| r.identity_id == victim.id)
        .expect("entry")
        .clone();

    let mut replaced = f.payload.clone();
    for entry in &mut replaced.recipients {
        if entry.identity_id == victim.id {
            *entry = forged_entry.clone();
        }
    }
    assert_eq!(
        f.room.open_as(&replaced, victim),
        Err(OpenError::CannotOpen)
    );
    // The untouched members still read the real message.
    assert_eq!(
        f.room.open_as(&replaced, &f.room.others()[1]),
        Ok(f.content.clone())
    );

    // Added next to the real entry, it makes the payload malformed (and the
    // server refuses it as a duplicate before anyone sees it).
    let mut added = f.payload.clone();
    added.recipients.push(forged_entry);
    assert!(matches!(
        f.room.open_as(&added, victim),
        Err(OpenError::Malformed(_))
    ));
    assert_eq!(
        validate_shape(&added, &f.room.ids()),
        Err(ShapeError::DuplicateRecipient {
            identity_id: victim.id
        })
    );
}

#[test]
fn one_flipped_bit_in_enc_or_ciphertext_cannot_open() {
    let f = fixture();
    let reader = &f.room.others()[0];
    let index = f
        .payload
        .recipients
        .iter()
        .position(|r| r.identity_id == reader.id)
        .expect("entry");
    let entry = &f.payload.recipients[index];
    for field in ["enc", "ciphertext"] {
        let original = unb64(if field == "enc" {
            &entry.enc
        } else {
            &entry.ciphertext
        });
        for position in 0..original.len() {
            for mask in [0x01u8, 0x80] {
                let mut bytes = original.clone();
                bytes[position] ^= mask;
                let mut payload = f.payload.clone();
                let target = &mut payload.recipients[index];
                if field == "enc" {
                    target.enc = b64(&bytes);
                } else {
                    target.ciphertext = b64(&bytes);
                }
                assert_eq!(
                    f.room.open_as(&payload, reader),
                    Err(OpenError::CannotOpen),
                    "{field} byte {position} mask {mask:#04x}"
                );
            }
        }
    }
}

#[test]
fn a_different_binding_or_sender_key_cannot_open() {
    let f = fixture();
    let reader = &f.room.others()[0];
    let b = f.room.binding;
    let cases = [
        (
            "room id",
            SealBinding {
                room_id: Uuid::now_v7(),
                ..b
            },
        ),
        (
            "message id",
            SealBinding {
                message_id: Uuid::now_v7(),
                ..b
            },
        ),
        (
            "sender id",
            SealBinding {
                sender_id: f.room.others()[1].id,
                ..b
            },
        ),
        (
            "ask (a note turned into a question)",
            SealBinding { ask: true, ..b },
        ),
        (
            "deadline (one added)",
            SealBinding {
                deadline: Some(
                    crate::wire::Timestamp::parse("2030-01-01T00:00:00Z").expect("time"),
                ),
                ..b
            },
        ),
        (
            "replyTo (moved into a thread)",
            SealBinding {
                reply_to: Some(Uuid::now_v7()),
                ..b
            },
        ),
        (
            "room and message swapped",
            SealBinding {
                room_id: b.message_id,
                message_id: b.room_id,
                ..b
            },
        ),
    ];
    let sender_key = f.room.sender().keys.public_key();
    for (name, binding) in cases {
        assert_eq!(
            open(&f.payload, &binding, &sender_key, reader.id, &reader.keys),
            Err(OpenError::CannotOpen),
            "wrong {name}"
        );
    }

    // Another member's key presented as the sender's.
    let impostor = f.room.others()[1].keys.public_key();
    assert_eq!(
        open(&f.payload, &b, &impostor, reader.id, &reader.keys),
        Err(OpenError::CannotOpen)
    );
    // A low-order "sender key" fails the same way, without panicking.
    assert_eq!(
        open(&f.payload, &b, &[0u8; KEY_BYTES], reader.id, &reader.keys),
        Err(OpenError::CannotOpen)
    );
    // Another member's entry relabelled as the reader's: the recipient id is
    // bound (and the key differs), so it does not open.
    let mut relabelled = f.payload.clone();
    relabelled.recipients.retain(|r| r.identity_id != reader.id);
    for entry in &mut relabelled.recipients {
        if entry.identity_id == f.room.others()[1].id {
            entry.identity_id = reader.id;
        }
    }
    assert_eq!(
        f.room.open_as(&relabelled, reader),
        Err(OpenError::CannotOpen)
    );
    // The reader's key pair with someone else's id.
    assert_eq!(
        open(
            &f.payload,
            &b,
            &sender_key,
            f.room.others()[1].id,
            &reader.keys
        ),
        Err(OpenError::CannotOpen)
    );
}

#[test]
fn version_suite_and_encoding_problems_have_their_own_errors() {
    let f = fixture();
    let reader = &f.room.others()[0];
    type Edit = fn(&mut SealedPayload, Uuid);
    fn mine(payload: &mut SealedPayload, id: Uuid) -> &mut crate::wire::SealedRecipient {
        payload
            .recipients
            .iter_mut()
            .find(|r| r.identity_id == id)
            .expect("entry")
    }
    let cases: [(&str, Edit, &str); 11] = [
        ("version 3", |p, _| p.version = 3, "unsupported_version"),
        ("version 0", |p, _| p.version = 0, "unsupported_version"),
        (
            "other suite",
            |p, _| p.suite = "DHKEM(X25519, HKDF-SHA256)/HKDF-SHA256/AES-128-GCM".to_owned(),
            "unsupported_suite",
        ),
        ("empty suite", |p, _| p.suite.clear(), "unsupported_suite"),
        (
            "enc not base64",
            |p, id| mine(p, id).enc = "!!!!".to_owned(),
            "malformed",
        ),
        (
            "enc without padding",
            |p, id| {
                let e = mine(p, id);
                e.enc = e.enc.trim_end_matches('=').to_owned();
            },
            "malformed",
        ),
        (
            "enc 31 bytes",
            |p, id| mine(p, id).enc = b64(&[7u8; 31]),
            "malformed",
        ),
        ("enc empty", |p, id| mine(p, id).enc.clear(), "malformed"),
        (
            "ciphertext url-safe alphabet",
            |p, id| {
                let e = mine(p, id);
                e.ciphertext = e.ciphertext.replace('+', "-").replace('/', "_") + "-";
            },
            "malformed",
        ),
        (
            "ciphertext 15 bytes",
            |p, id| mine(p, id).ciphertext = b64(&[1u8; 15]),
            "malformed",
        ),
        (
            "no entries at all",
            |p, _| p.recipients.clear(),
            "not_a_recipient",
        ),
    ];
    for (name, edit, reason) in cases {
        let mut payload = f.payload.clone();
        edit(&mut payload, reader.id);
        let error = f.room.open_as(&payload, reader).expect_err(name);
        assert_eq!(error.reason(), reason, "{name}: {error}");
    }
}

#[test]
fn content_that_authenticates_but_breaks_the_format_is_malformed() {
    // Seal raw bytes with the documented construction but invalid content.
    let room = Room::new(1);
    let reader = &room.others()[0];
    let recipient = PublicKey::from_bytes(&reader.keys.public_key()).expect("key");
    let mode = OpModeS::<HpkeKem>::Auth((
        room.sender().keys.secret.clone(),
        room.sender().keys.public.clone(),
    ));
    let context = room.binding.context(SealVersion::CURRENT, reader.id);
    for bad in [
        &b"not json"[..],
        br#"{"text":1}"#,
        br#"{"text":"x","extra":true}"#,
        br#"{"schema":"s"}"#,
        br#"{"data":1}"#,
        br#"{"schema":"","data":1}"#,
        br#"{}"#,
        br#"[]"#,
        &[0xff, 0xfe][..],
    ] {
        let (enc, ciphertext) = hpke::single_shot_seal_with_rng::<HpkeAead, HpkeKdf, HpkeKem>(
            &mode,
            &recipient,
            &context,
            bad,
            &context,
            &mut OsRandom::new(),
        )
        .expect("seal");
        let payload = SealedPayload {
            version: SEALED_VERSION,
            suite: SEALED_SUITE.to_owned(),
            recipients: vec![crate::wire::SealedRecipient {
                identity_id: reader.id,
                enc: b64(&enc.to_bytes()),
                ciphertext: b64(&ciphertext),
            }],
        };
        let result = room.open_as(&payload, reader);
        assert!(
            matches!(result, Err(OpenError::Malformed(_))),
            "{:?} gave {result:?}",
            String::from_utf8_lossy(bad)
        );
    }
}

#[test]
fn open_error_reasons_are_stable_snake_case() {
    let table = [
        (OpenError::UnsupportedVersion, "unsupported_version"),
        (OpenError::UnsupportedSuite, "unsupported_suite"),
        (OpenError::NotARecipient, "not_a_recipient"),
        (OpenError::Malformed("x".to_owned()), "malformed"),
        (OpenError::CannotOpen, "cannot_open"),
    ];
    for (error, reason) in table {
        assert_eq!(error.reason(), reason);
        assert!(!error.to_string().is_empty());
    }
}

#[test]
fn a_question_opens_only_with_the_ask_deadline_and_reply_to_it_was_sealed_with() {
    let room = Room::new(1);
    let reader = &room.others()[0];
    let deadline = crate::wire::Timestamp::parse("2030-01-01T00:00:00.123456Z").expect("time");
    let parent = Uuid::now_v7();
    let question = SealBinding {
        ask: true,
        deadline: Some(deadline),
        reply_to: Some(parent),
        ..room.binding
    };
    let payload = seal(
        &text("when?"),
        &question,
        &room.sender().keys,
        &room.recipients(),
    )
    .expect("seal");
    assert_eq!(payload.version, 2);
    let opens = |binding: &SealBinding| {
        open(
            &payload,
            binding,
            &room.sender().keys.public_key(),
            reader.id,
            &reader.keys,
        )
    };
    assert_eq!(opens(&question), Ok(text("when?")));
    let later = crate::wire::Timestamp::parse("2030-01-01T00:00:00.123457Z").expect("time");
    for (name, changed) in [
        (
            "ask cleared",
            SealBinding {
                ask: false,
                ..question
            },
        ),
        (
            "deadline dropped",
            SealBinding {
                deadline: None,
                ..question
            },
        ),
        (
            "deadline a microsecond later",
            SealBinding {
                deadline: Some(later),
                ..question
            },
        ),
        (
            "replyTo dropped",
            SealBinding {
                reply_to: None,
                ..question
            },
        ),
        (
            "replyTo another message",
            SealBinding {
                reply_to: Some(Uuid::now_v7()),
                ..question
            },
        ),
    ] {
        assert_eq!(opens(&changed), Err(OpenError::CannotOpen), "{name}");
    }
}

#[test]
fn a_deadline_finer_than_a_microsecond_is_refused() {
    let room = Room::new(1);
    let binding = SealBinding {
        ask: true,
        deadline: Some(
            crate::wire::Timestamp::parse("2030-01-01T00:00:00.0000001Z").expect("time"),
        ),
        ..room.binding
    };
    assert_eq!(
        seal(
            &text("x"),
            &binding,
            &room.sender().keys,
            &room.recipients()
        ),
        Err(SealError::DeadlineTooPrecise)
    );
}

#[test]
fn version_1_ignores_the_unbound_fields_and_no_copy_opens_as_the_other_version() {
    let room = Room::new(1);
    let reader = &room.others()[0];
    let v1 = seal_with_rng(
        SealVersion::V1,
        &text("old"),
        &room.binding,
        &room.sender().keys,
        &room.recipients(),
        &mut OsRandom::new(),
    )
    .expect("seal");
    assert_eq!(v1.version, 1);
    assert_eq!(room.open_as(&v1, reader), Ok(text("old")));
    // Version 1 never bound these, so a changed envelope still opens it.
    let flipped = SealBinding {
        ask: true,
        reply_to: Some(Uuid::now_v7()),
        ..room.binding
    };
    let sender = room.sender().keys.public_key();
    assert_eq!(
        open(&v1, &flipped, &sender, reader.id, &reader.keys),
        Ok(text("old"))
    );
    // Relabelling changes the prefix in info/aad: neither direction opens.
    let as_v2 = SealedPayload { version: 2, ..v1 };
    assert_eq!(room.open_as(&as_v2, reader), Err(OpenError::CannotOpen));
    let v2 = room.seal(&text("new"));
    let as_v1 = SealedPayload { version: 1, ..v2 };
    assert_eq!(room.open_as(&as_v1, reader), Err(OpenError::CannotOpen));
    assert_eq!(
        room.open_as(
            &SealedPayload {
                version: 3,
                ..as_v1
            },
            reader
        ),
        Err(OpenError::UnsupportedVersion)
    );
}
