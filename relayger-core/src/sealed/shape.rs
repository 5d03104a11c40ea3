//! What the server checks before storing a sealed payload it cannot read.

use std::collections::HashSet;

use base64::Engine as _;
use uuid::Uuid;

use super::{B64, ENC_BYTES, MAX_CIPHERTEXT_BYTES, MIN_CIPHERTEXT_BYTES, SealVersion};
use crate::wire::{SEALED_SUITE, SealedPayload};

/// Why the server refuses a sealed payload. The `Display` text is the 400
/// message the sender sees, so it names the field and the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShapeError {
    /// Versions 1 and 2 exist ([`SealVersion`]); clients write 2, and 1
    /// still opens, so the server stores both.
    #[error("sealed.version must be 1 or 2, got {version}")]
    UnsupportedVersion {
        /// The version the payload claims.
        version: u32,
    },
    /// Only [`SEALED_SUITE`] exists.
    #[error("sealed.suite must be \"{SEALED_SUITE}\"")]
    UnsupportedSuite,
    /// Two entries for one identity: a recipient could be shown either.
    #[error("sealed.recipients lists identity {identity_id} more than once")]
    DuplicateRecipient {
        /// The repeated identity.
        identity_id: Uuid,
    },
    /// A current member would not be able to read the message.
    #[error("sealed.recipients has no entry for room member {identity_id}")]
    MissingRecipient {
        /// The member without an entry.
        identity_id: Uuid,
    },
    /// Someone outside the room would get a copy.
    #[error("sealed.recipients has an entry for {identity_id}, who is not a member of this room")]
    UnexpectedRecipient {
        /// The identity that is not a member.
        identity_id: Uuid,
    },
    /// `enc` is not standard padded base64.
    #[error("sealed.recipients: enc for {identity_id} is not standard base64 with padding")]
    EncNotBase64 {
        /// Whose entry.
        identity_id: Uuid,
    },
    /// `enc` is an X25519 public key: exactly 32 bytes.
    #[error("sealed.recipients: enc for {identity_id} must be {ENC_BYTES} bytes, got {length}")]
    EncWrongLength {
        /// Whose entry.
        identity_id: Uuid,
        /// The decoded length (for text too long to be an `enc`, the length
        /// its base64 would decode to).
        length: usize,
    },
    /// `ciphertext` is not standard padded base64.
    #[error("sealed.recipients: ciphertext for {identity_id} is not standard base64 with padding")]
    CiphertextNotBase64 {
        /// Whose entry.
        identity_id: Uuid,
    },
    /// At least the 16-byte tag, at most the largest content plus the tag.
    #[error(
        "sealed.recipients: ciphertext for {identity_id} must be {MIN_CIPHERTEXT_BYTES} to {MAX_CIPHERTEXT_BYTES} bytes, got {length}"
    )]
    CiphertextWrongLength {
        /// Whose entry.
        identity_id: Uuid,
        /// The decoded length (for text far too long to decode, the length
        /// its base64 would decode to).
        length: usize,
    },
}

/// Checks a sealed payload before the server stores it: the version and
/// suite are the supported ones, there is exactly one entry per current room
/// member (`expected_recipients`, the sender included) and none for anyone
/// else, and every `enc` and `ciphertext` has a possible size. The server
/// cannot check more: only a recipient can tell whether a ciphertext opens.
///
/// Problems are reported in a fixed order (version, suite, then entries in
/// payload order, then missing members in `expected_recipients` order).
pub fn validate_shape(
    payload: &SealedPayload,
    expected_recipients: &[Uuid],
) -> Result<(), ShapeError> {
    if SealVersion::from_wire(payload.version).is_none() {
        return Err(ShapeError::UnsupportedVersion {
            version: payload.version,
        });
    }
    if payload.suite != SEALED_SUITE {
        return Err(ShapeError::UnsupportedSuite);
    }

    let expected: HashSet<Uuid> = expected_recipients.iter().copied().collect();
    let mut seen = HashSet::with_capacity(payload.recipients.len());
    for entry in &payload.recipients {
        let identity_id = entry.identity_id;
        if !seen.insert(identity_id) {
            return Err(ShapeError::DuplicateRecipient { identity_id });
        }
        if !expected.contains(&identity_id) {
            return Err(ShapeError::UnexpectedRecipient { identity_id });
        }
    }
    if let Some(&identity_id) = expected_recipients.iter().find(|id| !seen.contains(id)) {
        return Err(ShapeError::MissingRecipient { identity_id });
    }

    for entry in &payload.recipients {
        let identity_id = entry.identity_id;
        // Refuse oversized text before decoding it into memory.
        let claimed = claimed_length(&entry.enc);
        if claimed > ENC_BYTES {
            return Err(ShapeError::EncWrongLength {
                identity_id,
                length: claimed,
            });
        }
        let enc = B64
            .decode(&entry.enc)
            .map_err(|_| ShapeError::EncNotBase64 { identity_id })?;
        if enc.len() != ENC_BYTES {
            return Err(ShapeError::EncWrongLength {
                identity_id,
                length: enc.len(),
            });
        }
        let claimed = claimed_length(&entry.ciphertext);
        if claimed > MAX_CIPHERTEXT_BYTES {
            return Err(ShapeError::CiphertextWrongLength {
                identity_id,
                length: claimed,
            });
        }
        let ciphertext = B64
            .decode(&entry.ciphertext)
            .map_err(|_| ShapeError::CiphertextNotBase64 { identity_id })?;
        if !(MIN_CIPHERTEXT_BYTES..=MAX_CIPHERTEXT_BYTES).contains(&ciphertext.len()) {
            return Err(ShapeError::CiphertextWrongLength {
                identity_id,
                length: ciphertext.len(),
            });
        }
    }
    Ok(())
}

/// The byte length padded base64 of this many characters decodes to (exact
/// for valid text; only used to refuse text that is far too long).
fn claimed_length(b64: &str) -> usize {
    let padding = b64.bytes().rev().take(2).filter(|&b| b == b'=').count();
    (b64.len() / 4 * 3).saturating_sub(padding)
}
