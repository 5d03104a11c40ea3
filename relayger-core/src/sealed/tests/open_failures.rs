//! Every way opening must fail: outsiders, forgeries, flipped bits, the
//! wrong binding or key, bad versions and encodings, malformed content.

use hpke::OpModeS;

use super::*;

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
