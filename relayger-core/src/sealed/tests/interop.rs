//! Pins to RFC 9180 and to the construction documented for other
//! implementations.

use hpke::{OpModeR, OpModeS};

use super::*;

/// RFC 9180 appendix A.2.3: DHKEM(X25519, HKDF-SHA256), HKDF-SHA256,
/// ChaCha20Poly1305, Auth mode, first encryption. Proves the algorithm types
/// and mode used here are exactly that suite, byte for byte.
#[test]
fn the_suite_reproduces_rfc_9180_a_2_3_auth_mode() {
    assert_eq!(<HpkeKem as hpke::Kem>::KEM_ID, 0x0020);
    assert_eq!(<HpkeKdf as hpke::kdf::Kdf>::KDF_ID, 0x0001);
    assert_eq!(<HpkeAead as hpke::aead::Aead>::AEAD_ID, 0x0003);

    let info = hex("4f6465206f6e2061204772656369616e2055726e");
    let ikm_e = hex("938d3daa5a8904540bc24f48ae90eed3f4f7f11839560597b55e7c9598c996c0");
    let ikm_r = hex("64835d5ee64aa7aad57c6f2e4f758f7696617f8829e70bc9ac7a5ef95d1c756c");
    let ikm_s = hex("9d8f94537d5a3ddef71234c0baedfad4ca6861634d0b94c3007fed557ad17df6");
    let pk_em = "f7674cc8cd7baa5872d1f33dbaffe3314239f6197ddf5ded1746760bfc847e0e";
    let sk_rm = "3ca22a6d1cda1bb9480949ec5329d3bf0b080ca4c45879c95eddb55c70b80b82";
    let pk_rm = "1a478716d63cb2e16786ee93004486dc151e988b34b475043d3e0175bdb01c44";
    let sk_sm = "2def0cb58ffcf83d1062dd085c8aceca7f4c0c3fd05912d847b61f3e54121f05";
    let pk_sm = "f0f4f9e96c54aeed3f323de8534fffd7e0577e4ce269896716bcb95643c8712b";
    let pt = hex("4265617574792069732074727574682c20747275746820626561757479");
    let aad = hex("436f756e742d30");
    let ct = concat!(
        "ab1a13c9d4f01a87ec3440dbd756e2677bd2ecf9df0ce7ed73869b98e00c09be",
        "111cb9fdf077347aeb88e61bdf"
    );

    // The RFC prints the derived scalars unclamped; serialized keys here are
    // clamped (RFC 9180 §7.1.2), which is the same X25519 key.
    let (sk_r, pk_r) = HpkeKem::derive_keypair(&ikm_r);
    let (sk_s, pk_s) = HpkeKem::derive_keypair(&ikm_s);
    assert_eq!(sk_r.to_bytes().to_vec(), clamp(&hex(sk_rm)));
    assert_eq!(to_hex(&pk_r.to_bytes()), pk_rm);
    assert_eq!(sk_s.to_bytes().to_vec(), clamp(&hex(sk_sm)));
    assert_eq!(to_hex(&pk_s.to_bytes()), pk_sm);

    // Our key type loads the RFC's serialized keys to the same pairs.
    let recipient = KeyPair::from_secret_base64(&b64(&hex(sk_rm))).expect("load");
    assert_eq!(to_hex(&recipient.public_key()), pk_rm);

    let (enc, sealed) = hpke::single_shot_seal_with_rng::<HpkeAead, HpkeKdf, HpkeKem>(
        &OpModeS::Auth((sk_s, pk_s.clone())),
        &pk_r,
        &info,
        &pt,
        &aad,
        &mut Scripted::new(&[&ikm_e]),
    )
    .expect("seal");
    assert_eq!(to_hex(&enc.to_bytes()), pk_em);
    assert_eq!(to_hex(&sealed), ct);

    let opened = hpke::single_shot_open::<HpkeAead, HpkeKdf, HpkeKem>(
        &OpModeR::Auth(pk_s),
        &recipient.secret,
        &<HpkeKem as hpke::Kem>::EncappedKey::from_bytes(&hex(pk_em)).expect("enc"),
        &info,
        &hex(ct),
        &aad,
    )
    .expect("open");
    assert_eq!(opened, pt);
}

/// Rebuilds `info`/`aad` from the documentation's description alone (the ids'
/// bytes are taken from their hex text, not from `Uuid::as_bytes`) and opens
/// what `seal` produced with the `hpke` primitives directly, never calling
/// `open`: what the document says is what is sealed.
#[test]
fn the_documented_construction_opens_what_seal_produces() {
    let mut room = Room::new(2);
    room.binding.ask = true;
    room.binding.deadline =
        Some(crate::wire::Timestamp::parse("2026-10-02T12:00:00.25Z").expect("time"));
    room.binding.reply_to = Some(Uuid::now_v7());
    let content = SealedContent::Structured {
        schema: "relayger.test/interop".to_owned(),
        data: json!({"n": 1}),
        text: Some("interop".to_owned()),
    };
    let payload = room.seal(&content);
    assert_eq!(payload.version, 2);
    let id_bytes = |id: Uuid| hex(&id.hyphenated().to_string().replace('-', ""));

    for who in &room.members {
        let mut info = b"relayger/sealed/v2".to_vec();
        for id in [
            room.binding.room_id,
            room.binding.message_id,
            room.binding.sender_id,
            who.id,
        ] {
            info.extend(id_bytes(id));
        }
        // ask, then the deadline (1 October 2026 12:00:00.25 UTC is
        // 1,790,942,400.25 s after the epoch), then replyTo.
        info.push(1);
        info.push(1);
        info.extend(1_790_942_400_250_000i64.to_be_bytes());
        info.push(1);
        info.extend(id_bytes(room.binding.reply_to.expect("set")));
        assert_eq!(info.len(), 109);
        assert_eq!(info, room.binding.context(SealVersion::V2, who.id));

        let entry = payload
            .recipients
            .iter()
            .find(|r| r.identity_id == who.id)
            .expect("entry");
        let sender_public =
            PublicKey::from_bytes(&unb64(&room.sender().keys.public_base64())).expect("key");
        let secret =
            <HpkeKem as hpke::Kem>::PrivateKey::from_bytes(&unb64(&who.keys.secret_base64()))
                .expect("key");
        let plaintext = hpke::single_shot_open::<HpkeAead, HpkeKdf, HpkeKem>(
            &OpModeR::Auth(sender_public),
            &secret,
            &<HpkeKem as hpke::Kem>::EncappedKey::from_bytes(&unb64(&entry.enc)).expect("enc"),
            &info,
            &unb64(&entry.ciphertext),
            &info,
        )
        .expect("the documented construction opens it");
        assert_eq!(
            String::from_utf8(plaintext).expect("utf-8"),
            r#"{"schema":"relayger.test/interop","data":{"n":1},"text":"interop"}"#
        );
        // Base mode (no sender authentication) must not open it.
        assert!(
            hpke::single_shot_open::<HpkeAead, HpkeKdf, HpkeKem>(
                &OpModeR::Base,
                &secret,
                &<HpkeKem as hpke::Kem>::EncappedKey::from_bytes(&unb64(&entry.enc)).expect("enc"),
                &info,
                &unb64(&entry.ciphertext),
                &info,
            )
            .is_err()
        );
    }
}

/// Alice and Bob of the documented test vectors: keys from RFC 9180
/// `DeriveKeyPair` of fixed seeds.
fn vector_keys() -> (KeyPair, KeyPair, Uuid, Uuid) {
    let alice =
        KeyPair::from_secret_base64(&b64(&HpkeKem::derive_keypair(&[0xa1; 32]).0.to_bytes()))
            .expect("alice");
    let bob = KeyPair::from_secret_base64(&b64(&HpkeKem::derive_keypair(&[0xb0; 32]).0.to_bytes()))
        .expect("bob");
    let alice_id = Uuid::parse_str("0190a6e0-0000-7000-8000-0000000000a1").expect("uuid");
    let bob_id = Uuid::parse_str("0190a6e0-0000-7000-8000-0000000000b0").expect("uuid");
    (alice, bob, alice_id, bob_id)
}

/// Seals the vector's content with the vector's ephemeral seeds and checks
/// the printed keys, Bob's `info` and the payload against `expected`; both
/// copies then open with `binding`.
fn reproduce_vector(version: SealVersion, binding: &SealBinding, expected: &str) {
    let (alice, bob, alice_id, bob_id) = vector_keys();
    let content = text("hello, sealed world");
    let payload = seal_with_rng(
        version,
        &content,
        binding,
        &alice,
        &[(bob_id, bob.public_key())],
        &mut Scripted::new(&[&[0xe1; 32], &[0xe2; 32]]),
    )
    .expect("seal");

    let printed = format!(
        "alice secret {}\nalice public {}\nbob secret {}\nbob public {}\ninfo for bob {}\npayload {}",
        alice.secret_base64(),
        alice.public_base64(),
        bob.secret_base64(),
        bob.public_base64(),
        to_hex(&binding.context(version, bob_id)),
        serde_json::to_string_pretty(&payload).expect("json"),
    );
    assert_eq!(printed, expected, "\n{printed}\n");
    let parsed: SealedPayload =
        serde_json::from_str(&expected[expected.find('{').expect("json")..]).expect("payload");
    assert_eq!(parsed, payload);
    assert_eq!(
        open(&payload, binding, &alice.public_key(), bob_id, &bob),
        Ok(content.clone())
    );
    assert_eq!(
        open(&payload, binding, &alice.public_key(), alice_id, &alice),
        Ok(content)
    );
}

fn vector_binding() -> SealBinding {
    SealBinding {
        room_id: Uuid::parse_str("0190a6e0-0000-7000-8000-00000000000a").expect("uuid"),
        message_id: Uuid::parse_str("0190a6e0-0000-7000-8000-00000000000b").expect("uuid"),
        sender_id: Uuid::parse_str("0190a6e0-0000-7000-8000-0000000000a1").expect("uuid"),
        ask: false,
        deadline: None,
        reply_to: None,
    }
}

/// The version 2 test vector printed in `docs/sealed-messages.md`: a
/// question with a deadline, in the thread of another message. Changing any
/// of the three in the envelope stops both copies from opening.
#[test]
fn the_documented_test_vector_is_what_seal_produces() {
    let binding = SealBinding {
        ask: true,
        deadline: Some(crate::wire::Timestamp::parse("2026-10-02T12:00:00Z").expect("time")),
        reply_to: Some(Uuid::parse_str("0190a6e0-0000-7000-8000-000000000009").expect("uuid")),
        ..vector_binding()
    };
    reproduce_vector(SealVersion::V2, &binding, EXPECTED_VECTOR);

    let (alice, bob, _, bob_id) = vector_keys();
    let payload: SealedPayload =
        serde_json::from_str(&EXPECTED_VECTOR[EXPECTED_VECTOR.find('{').expect("json")..])
            .expect("payload");
    for changed in [
        SealBinding {
            ask: false,
            deadline: None,
            ..binding
        },
        SealBinding {
            deadline: None,
            ..binding
        },
        SealBinding {
            reply_to: None,
            ..binding
        },
        SealBinding {
            reply_to: Some(Uuid::now_v7()),
            ..binding
        },
    ] {
        assert_eq!(
            open(&payload, &changed, &alice.public_key(), bob_id, &bob),
            Err(OpenError::CannotOpen),
            "{changed:?}"
        );
    }
}

/// The version 1 vector the page printed before version 2: it still
/// reproduces exactly and opens.
#[test]
fn the_version_1_test_vector_still_opens() {
    reproduce_vector(SealVersion::V1, &vector_binding(), EXPECTED_VECTOR_V1);
}

const EXPECTED_VECTOR: &str = r#"alice secret yGugAtFpgSg2GfdDKbMd3SMVUCi48xud9p826CGJxWA=
alice public LePf1WGcaFqUNCtkx+2iMNlwX/vSNBQAfys6Ek1BEWY=
bob secret +PXqLGoHy6zCR5eyJKJ0jY7GPih0L9ot/ylXYS/lvHw=
bob public yiVSnwaM9yAJgv9sFvNqTm3yPPzuZJ2xpmWCFGi2I2E=
info for bob 72656c61796765722f7365616c65642f76320190a6e000007000800000000000000a0190a6e000007000800000000000000b0190a6e00000700080000000000000a10190a6e00000700080000000000000b0010100065cda4590b000010190a6e0000070008000000000000009
payload {
  "version": 2,
  "suite": "DHKEM(X25519, HKDF-SHA256)/HKDF-SHA256/ChaCha20Poly1305",
  "recipients": [
    {
      "identityId": "0190a6e0-0000-7000-8000-0000000000b0",
      "enc": "9aO68fiNwCQlkR4e6F5nAlyh4rtq1hf6AZCSUUbUXUs=",
      "ciphertext": "VSkr11QG99g6uKfUJxVQQtBovW26WHPUJxPzNiKllEjw9gKYt80Hu8i7GZJSIg=="
    },
    {
      "identityId": "0190a6e0-0000-7000-8000-0000000000a1",
      "enc": "Sy8OhJpLnFa3afCeU4xvxXcFuNxZfw7xvPkTe9FVKkg=",
      "ciphertext": "zQfUrwfZuX2lm3hl4xGaSOAg6CqbhbibqsDV0Gw7xTtTHxdekT3XEPaph1+2mQ=="
    }
  ]
}"#;

const EXPECTED_VECTOR_V1: &str = r#"alice secret yGugAtFpgSg2GfdDKbMd3SMVUCi48xud9p826CGJxWA=
alice public LePf1WGcaFqUNCtkx+2iMNlwX/vSNBQAfys6Ek1BEWY=
bob secret +PXqLGoHy6zCR5eyJKJ0jY7GPih0L9ot/ylXYS/lvHw=
bob public yiVSnwaM9yAJgv9sFvNqTm3yPPzuZJ2xpmWCFGi2I2E=
info for bob 72656c61796765722f7365616c65642f76310190a6e000007000800000000000000a0190a6e000007000800000000000000b0190a6e00000700080000000000000a10190a6e00000700080000000000000b0
payload {
  "version": 1,
  "suite": "DHKEM(X25519, HKDF-SHA256)/HKDF-SHA256/ChaCha20Poly1305",
  "recipients": [
    {
      "identityId": "0190a6e0-0000-7000-8000-0000000000b0",
      "enc": "9aO68fiNwCQlkR4e6F5nAlyh4rtq1hf6AZCSUUbUXUs=",
      "ciphertext": "vwWNLtcDXww1WTznM2IGTy7guDfux1x8BN/QSbAorXjDLoR3moU76bNiqaY6Cw=="
    },
    {
      "identityId": "0190a6e0-0000-7000-8000-0000000000a1",
      "enc": "Sy8OhJpLnFa3afCeU4xvxXcFuNxZfw7xvPkTe9FVKkg=",
      "ciphertext": "hizLvww96OCRurT1KJiTOjSLHR82Xl/8JdxUmh0dqvWXrTA8k61c9IxLV3FnPw=="
    }
  ]
}"#;

/// A payload sealed by another HPKE implementation (`@hpke/core` 1.9.0 with
/// `@hpke/chacha20poly1305`, following `docs/sealed-messages.md`): Bob, the
/// documented test vector's second key, seals to Alice and to himself.
#[test]
fn a_payload_sealed_by_another_hpke_library_opens() {
    let alice =
        KeyPair::from_secret_base64("yGugAtFpgSg2GfdDKbMd3SMVUCi48xud9p826CGJxWA=").expect("alice");
    let bob =
        KeyPair::from_secret_base64("+PXqLGoHy6zCR5eyJKJ0jY7GPih0L9ot/ylXYS/lvHw=").expect("bob");
    let alice_id = Uuid::parse_str("0190a6e0-0000-7000-8000-0000000000a1").expect("uuid");
    let bob_id = Uuid::parse_str("0190a6e0-0000-7000-8000-0000000000b0").expect("uuid");
    let binding = SealBinding {
        room_id: Uuid::parse_str("0190a6e0-0000-7000-8000-00000000000a").expect("uuid"),
        message_id: Uuid::parse_str("0190a6e0-0000-7000-8000-0000000000c0").expect("uuid"),
        sender_id: bob_id,
        ask: false,
        deadline: None,
        reply_to: None,
    };
    let payload: SealedPayload = serde_json::from_str(FOREIGN_PAYLOAD).expect("payload");
    assert_eq!(validate_shape(&payload, &[alice_id, bob_id]), Ok(()));

    let expected = SealedContent::Structured {
        schema: "js".to_owned(),
        data: json!([1, 2]),
        text: Some("from js".to_owned()),
    };
    let bob_public = bob.public_key();
    for (id, keys) in [(alice_id, &alice), (bob_id, &bob)] {
        assert_eq!(
            open(&payload, &binding, &bob_public, id, keys),
            Ok(expected.clone())
        );
        assert_eq!(
            open(&payload, &binding, &alice.public_key(), id, keys),
            Err(OpenError::CannotOpen)
        );
    }
}

const FOREIGN_PAYLOAD: &str = r#"{"version":1,"suite":"DHKEM(X25519, HKDF-SHA256)/HKDF-SHA256/ChaCha20Poly1305","recipients":[{"identityId":"0190a6e0-0000-7000-8000-0000000000a1","enc":"+BQFNfiRcr9vQTTxBveklKT9agA6lQ4Rfscec/OGTy8=","ciphertext":"ZwTjrdpIKQpKIgIhULGheg2aTiEKqM9rKezQvBAr66FYHj0T7UCmsQwC40mmc7k80svrHXFr254omZaASg=="},{"identityId":"0190a6e0-0000-7000-8000-0000000000b0","enc":"Aex6lGdWqpcI75WhTdTsq2g5ZRqiVUyJAJtIMg551nU=","ciphertext":"6VApZAshbSP+rFTlkNiLFuX/GHlhBUCRTSN8ggpN6hZ9O0fO6wNv18dkerC5AYce+Y55YT4ic/3hMCxhOg=="}]}"#;
