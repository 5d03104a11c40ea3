//! The server's shape check.

use super::*;

#[test]
fn validate_shape_accepts_a_good_payload_in_any_order() {
    let f = fixture();
    assert_eq!(validate_shape(&f.payload, &f.room.ids()), Ok(()));
    let mut reversed_ids = f.room.ids();
    reversed_ids.reverse();
    let mut reversed = f.payload.clone();
    reversed.recipients.reverse();
    assert_eq!(validate_shape(&reversed, &reversed_ids), Ok(()));
    assert_eq!(validate_shape(&reversed, &f.room.ids()), Ok(()));
}

#[test]
fn validate_shape_rejects_each_bad_shape() {
    let f = fixture();
    let ids = f.room.ids();
    let first = f.payload.recipients[0].identity_id;
    let outsider = Uuid::now_v7();
    type Edit = Box<dyn Fn(&mut SealedPayload, &mut Vec<Uuid>)>;
    let cases: Vec<(&str, Edit, ShapeError)> = vec![
        (
            "version",
            Box::new(|p, _| p.version = 3),
            ShapeError::UnsupportedVersion { version: 3 },
        ),
        (
            "suite",
            Box::new(|p, _| p.suite = "X25519".to_owned()),
            ShapeError::UnsupportedSuite,
        ),
        (
            "duplicate",
            Box::new(|p, _| {
                let copy = p.recipients[0].clone();
                p.recipients.push(copy);
            }),
            ShapeError::DuplicateRecipient { identity_id: first },
        ),
        (
            "missing member",
            Box::new(|p, _| {
                p.recipients.remove(0);
            }),
            ShapeError::MissingRecipient { identity_id: first },
        ),
        (
            "member left the room",
            Box::new(move |_, expected| expected.retain(|id| *id != first)),
            ShapeError::UnexpectedRecipient { identity_id: first },
        ),
        (
            "outsider added",
            Box::new(move |p, _| {
                let mut copy = p.recipients[0].clone();
                copy.identity_id = outsider;
                p.recipients.push(copy);
            }),
            ShapeError::UnexpectedRecipient {
                identity_id: outsider,
            },
        ),
        (
            "new member without an entry",
            Box::new(move |_, expected| expected.push(outsider)),
            ShapeError::MissingRecipient {
                identity_id: outsider,
            },
        ),
        (
            "no entries",
            Box::new(|p, _| p.recipients.clear()),
            ShapeError::MissingRecipient {
                identity_id: ids[0],
            },
        ),
        (
            "enc not base64",
            Box::new(|p, _| p.recipients[0].enc = "####".to_owned()),
            ShapeError::EncNotBase64 { identity_id: first },
        ),
        (
            "enc with whitespace",
            Box::new(|p, _| p.recipients[0].enc.push('\n')),
            ShapeError::EncNotBase64 { identity_id: first },
        ),
        (
            "enc 33 bytes",
            Box::new(|p, _| p.recipients[0].enc = b64(&[1u8; 33])),
            ShapeError::EncWrongLength {
                identity_id: first,
                length: 33,
            },
        ),
        (
            "enc far too long",
            Box::new(|p, _| p.recipients[0].enc = "AAAA".repeat(1_000)),
            ShapeError::EncWrongLength {
                identity_id: first,
                length: 3_000,
            },
        ),
        (
            "enc empty",
            Box::new(|p, _| p.recipients[0].enc.clear()),
            ShapeError::EncWrongLength {
                identity_id: first,
                length: 0,
            },
        ),
        (
            "ciphertext not base64",
            Box::new(|p, _| p.recipients[0].ciphertext = "a=b=".to_owned()),
            ShapeError::CiphertextNotBase64 { identity_id: first },
        ),
        (
            "ciphertext 15 bytes",
            Box::new(|p, _| p.recipients[0].ciphertext = b64(&[0u8; 15])),
            ShapeError::CiphertextWrongLength {
                identity_id: first,
                length: 15,
            },
        ),
        (
            "ciphertext one byte too long",
            Box::new(|p, _| p.recipients[0].ciphertext = b64(&vec![0u8; MAX_CIPHERTEXT_BYTES + 1])),
            ShapeError::CiphertextWrongLength {
                identity_id: first,
                length: MAX_CIPHERTEXT_BYTES + 1,
            },
        ),
        (
            "ciphertext far too long",
            Box::new(|p, _| p.recipients[0].ciphertext = "AAAA".repeat(1_000_000)),
            ShapeError::CiphertextWrongLength {
                identity_id: first,
                length: 3_000_000,
            },
        ),
    ];
    for (name, edit, expected) in cases {
        let mut payload = f.payload.clone();
        let mut expected_ids = ids.clone();
        edit(&mut payload, &mut expected_ids);
        assert_eq!(
            validate_shape(&payload, &expected_ids),
            Err(expected),
            "{name}"
        );
    }

    // The boundaries themselves are accepted.
    for length in [MIN_CIPHERTEXT_BYTES, MAX_CIPHERTEXT_BYTES] {
        let mut payload = f.payload.clone();
        payload.recipients[0].ciphertext = b64(&vec![0u8; length]);
        assert_eq!(validate_shape(&payload, &ids), Ok(()), "{length} bytes");
    }
}

#[test]
fn shape_errors_read_as_plain_messages() {
    let id = Uuid::nil();
    let table = [
        (
            ShapeError::UnsupportedVersion { version: 9 },
            "sealed.version must be 1 or 2, got 9".to_owned(),
        ),
        (
            ShapeError::UnsupportedSuite,
            format!("sealed.suite must be \"{SEALED_SUITE}\""),
        ),
        (
            ShapeError::MissingRecipient { identity_id: id },
            format!("sealed.recipients has no entry for room member {id}"),
        ),
        (
            ShapeError::CiphertextWrongLength {
                identity_id: id,
                length: 3,
            },
            format!("sealed.recipients: ciphertext for {id} must be 16 to 70000 bytes, got 3"),
        ),
    ];
    for (error, message) in table {
        assert_eq!(error.to_string(), message);
    }
}
