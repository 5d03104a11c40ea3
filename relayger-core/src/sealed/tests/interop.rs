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
    let room = Room::new(2);
    let content = SealedContent::Structured {
        schema: "relayger.test/interop".to_owned(),
        data: json!({"n": 1}),
        text: Some("interop".to_owned()),
    };
    let payload = room.seal(&content);
    let id_bytes = |id: Uuid| hex(&id.hyphenated().to_string().replace('-', ""));

    for who in &room.members {
        let mut info = b"relayger/sealed/v1".to_vec();
        for id in [
            room.binding.room_id,
            room.binding.message_id,
            room.binding.sender_id,
            who.id,
        ] {
            info.extend(id_bytes(id));
        }
        assert_eq!(info.len(), 82);
        assert_eq!(info, room.binding.context(who.id));

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

/// The test vector printed in `docs/sealed-messages.md`. Keys come from RFC
/// 9180 `DeriveKeyPair` of fixed seeds; the ephemeral seeds are fixed too.
#[test]
fn the_documented_test_vector_is_what_seal_produces() {
    let alice =
        KeyPair::from_secret_base64(&b64(&HpkeKem::derive_keypair(&[0xa1; 32]).0.to_bytes()))
            .expect("alice");
    let bob = KeyPair::from_secret_base64(&b64(&HpkeKem::derive_keypair(&[0xb0; 32]).0.to_bytes()))
        .expect("bob");
    let alice_id = Uuid::parse_str("0190a6e0-0000-7000-8000-0000000000a1").expect("uuid");
    let bob_id = Uuid::parse_str("0190a6e0-0000-7000-8000-0000000000b0").expect("uuid");
    let binding = SealBinding {
        room_id: Uuid::parse_str("0190a6e0-0000-7000-8000-00000000000a").expect("uuid"),
        message_id: Uuid::parse_str("0190a6e0-0000-7000-8000-00000000000b").expect("uuid"),
        sender_id: alice_id,
    };
    let content = text("hello, sealed world");
    let payload = seal_with_rng(
        &content,
        &binding,
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
        to_hex(&binding.context(bob_id)),
        serde_json::to_string_pretty(&payload).expect("json"),
    );
    let expected = EXPECTED_VECTOR;
    assert_eq!(printed, expected, "\n{printed}\n");
    assert_eq!(
        open(&payload, &binding, &alice.public_key(), bob_id, &bob),
        Ok(content.clone())
    );
    assert_eq!(
        open(&payload, &binding, &alice.public_key(), alice_id, &alice),
        Ok(content)
    );
}

const EXPECTED_VECTOR: &str = r#"alice secret yGugAtFpgSg2GfdDKbMd3SMVUCi48xud9p826CGJxWA=
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
