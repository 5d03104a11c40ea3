//! Key pairs and public-key parsing.

use super::*;

#[test]
fn key_pairs_round_trip_through_base64() {
    let keys = KeyPair::generate().expect("random source");
    let other = KeyPair::generate().expect("random source");
    assert_ne!(keys.public_key(), other.public_key());
    assert_ne!(keys.secret_base64(), other.secret_base64());

    let loaded = KeyPair::from_secret_base64(&keys.secret_base64()).expect("load");
    assert_eq!(loaded.secret_base64(), keys.secret_base64());
    assert_eq!(loaded.public_base64(), keys.public_base64());
    assert_eq!(
        parse_public_key(&keys.public_base64()),
        Ok(keys.public_key())
    );
    assert_eq!(unb64(&keys.public_base64()).len(), KEY_BYTES);
    assert_eq!(unb64(&keys.secret_base64()).len(), KEY_BYTES);
}

#[test]
fn a_loaded_secret_is_clamped_like_rfc_9180_says() {
    // An unclamped scalar from another library is the same key.
    let raw = [0xffu8; KEY_BYTES];
    let keys = KeyPair::from_secret_base64(&b64(&raw)).expect("load");
    assert_eq!(unb64(&keys.secret_base64()), clamp(&raw));
    let again = KeyPair::from_secret_base64(&keys.secret_base64()).expect("load");
    assert_eq!(again.public_key(), keys.public_key());
}

#[test]
fn debug_never_prints_the_secret() {
    let keys = KeyPair::generate().expect("random source");
    let debug = format!("{keys:?} {keys:#?}");
    let secret = keys.secret_base64();
    assert!(!debug.contains(&secret));
    assert!(!debug.contains(&to_hex(&unb64(&secret))));
    assert!(debug.contains(&keys.public_base64()));
    assert!(debug.contains("redacted"));
}

#[test]
fn keys_are_checked_when_parsed() {
    let order_8_point = hex("e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800");
    let mut one = [0u8; KEY_BYTES];
    one[0] = 1;
    let cases: Vec<(String, KeyError)> = vec![
        ("not base64!".to_owned(), KeyError::NotBase64),
        (
            b64(&[1u8; 32]).trim_end_matches('=').to_owned(),
            KeyError::NotBase64,
        ),
        (String::new(), KeyError::WrongLength { length: 0 }),
        (b64(&[1u8; 31]), KeyError::WrongLength { length: 31 }),
        (b64(&[1u8; 33]), KeyError::WrongLength { length: 33 }),
        (b64(&[0u8; 32]), KeyError::WeakPublicKey),
        (b64(&one), KeyError::WeakPublicKey),
        (b64(&order_8_point), KeyError::WeakPublicKey),
    ];
    for (input, expected) in cases {
        assert_eq!(parse_public_key(&input), Err(expected), "{input:?}");
        if expected != KeyError::WeakPublicKey {
            assert_eq!(
                KeyPair::from_secret_base64(&input).map(|k| k.public_key()),
                Err(expected),
                "{input:?}"
            );
        }
    }
}
