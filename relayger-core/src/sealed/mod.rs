//! End-to-end sealed messages: seal, open, and the server's shape check.
//!
//! The construction is standard so any RFC 9180 library can interoperate
//! (`docs/sealed-messages.md` has the byte-level description and a test
//! vector):
//!
//! - HPKE (RFC 9180) in **Auth mode** (`mode_auth`, 0x02), so a recipient
//!   authenticates the sender's static key and the server, which stores the
//!   payload, can neither read nor forge it;
//! - KEM DHKEM(X25519, HKDF-SHA256) (0x0020), KDF HKDF-SHA256 (0x0001), AEAD
//!   ChaCha20Poly1305 (0x0003); single-shot seal/open (sequence number 0);
//! - one ciphertext per current room member, the sender included (its own
//!   copy is how it reads what it sent);
//! - `info` = `aad` = the ASCII bytes `relayger/sealed/v2`, the 16 raw bytes
//!   each of the room id, message id, sender id and recipient id, then the
//!   envelope's `ask`, `deadline` and `replyTo` ([`SealBinding::context`]),
//!   so a ciphertext cannot be replayed into another message, room, sender or
//!   recipient, and the server cannot turn a note into a question or move it
//!   to another thread; version 1 (ids only) still opens;
//! - the plaintext is compact JSON of [`SealedContent`];
//! - keys, `enc` and ciphertexts are standard base64 with padding.
//!
//! Everything here is a pure function apart from the operating system's
//! random source, which sealing and key generation need. Nothing here
//! panics on any input: a payload that cannot be opened is an [`OpenError`]
//! whose [`OpenError::reason`] clients show instead of the message.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hpke::rand_core::CryptoRng;
use hpke::{Deserializable, OpModeR, OpModeS, Serializable};
use uuid::Uuid;

use crate::wire::{SEALED_SUITE, SealedPayload, SealedRecipient};

mod binding;
mod content;
mod keys;
mod shape;
#[cfg(test)]
pub(crate) mod tests;

pub use binding::{SealBinding, SealVersion};
pub use content::SealedContent;
pub use keys::{KeyError, KeyPair, parse_public_key};
pub use shape::{ShapeError, validate_shape};

use keys::{OsRandom, PublicKey};

/// The KEM of [`SEALED_SUITE`]: DHKEM(X25519, HKDF-SHA256), id 0x0020.
type HpkeKem = hpke::kem::X25519HkdfSha256;
/// The KDF of [`SEALED_SUITE`]: HKDF-SHA256, id 0x0001.
type HpkeKdf = hpke::kdf::HkdfSha256;
/// The AEAD of [`SEALED_SUITE`]: ChaCha20Poly1305, id 0x0003.
type HpkeAead = hpke::aead::ChaCha20Poly1305;

/// Standard alphabet, padded, canonical (trailing bits must be zero), so each
/// byte string has exactly one accepted spelling.
const B64: base64::engine::GeneralPurpose = STANDARD;

/// X25519 public and private keys are 32 bytes.
pub const KEY_BYTES: usize = 32;
/// `enc` is the sender's ephemeral X25519 public key.
pub const ENC_BYTES: usize = 32;
/// The ChaCha20Poly1305 tag; a ciphertext is the plaintext plus the tag.
pub const TAG_BYTES: usize = 16;
/// The shortest ciphertext the server accepts: a bare tag.
pub const MIN_CIPHERTEXT_BYTES: usize = TAG_BYTES;
/// The longest ciphertext the server accepts: 64 KiB of text (the plain
/// message limit) plus the tag and room for the JSON around it.
pub const MAX_CIPHERTEXT_BYTES: usize = 70_000;
/// The longest plaintext [`seal`] produces, so everything it seals passes
/// [`validate_shape`].
pub const MAX_PLAINTEXT_BYTES: usize = MAX_CIPHERTEXT_BYTES - TAG_BYTES;

/// Why a message could not be sealed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    /// The operating system's random source failed; nothing was sealed.
    #[error("the system random source is unavailable")]
    RandomUnavailable,
    /// The recipient list names one identity twice (the caller's room
    /// membership is inconsistent).
    #[error("recipient {0} is listed more than once")]
    DuplicateRecipient(Uuid),
    /// The sender appears among the recipients with a public key that is not
    /// its own key pair's: its own copy would be unreadable. Usually the key
    /// registered with the server differs from the local profile's.
    #[error("the sender's own recipient entry has a public key that is not the sender's")]
    SenderKeyMismatch,
    /// A recipient's public key is a low-order point; nothing can be sealed
    /// to it (see [`parse_public_key`]).
    #[error("the public key of recipient {0} cannot be used")]
    InvalidRecipientKey(Uuid),
    /// The content breaks a rule [`SealedContent`]'s reader enforces.
    #[error("invalid sealed content: {0}")]
    InvalidContent(String),
    /// The deadline has a fraction of a microsecond, which the server would
    /// round away, and the envelope would no longer match what was sealed.
    #[error("the deadline must be a whole number of microseconds")]
    DeadlineTooPrecise,
    /// The content's JSON is longer than [`MAX_PLAINTEXT_BYTES`].
    #[error("the sealed content is {bytes} bytes of JSON; at most {max} fit")]
    TooLarge {
        /// The content's JSON length.
        bytes: usize,
        /// [`MAX_PLAINTEXT_BYTES`].
        max: usize,
    },
}

/// Seals `content` for every recipient and the sender.
///
/// `recipients` are the current room members with their registered public
/// keys. The sender's own copy is added (last) when `binding.sender_id` is not
/// among them, sealed to `sender`'s public key, so the sender can read what it
/// sent. Entries keep the given order. Each copy uses a fresh ephemeral key.
pub fn seal(
    content: &SealedContent,
    binding: &SealBinding,
    sender: &KeyPair,
    recipients: &[(Uuid, [u8; KEY_BYTES])],
) -> Result<SealedPayload, SealError> {
    let mut rng = OsRandom::new();
    let payload = seal_with_rng(
        SealVersion::CURRENT,
        content,
        binding,
        sender,
        recipients,
        &mut rng,
    );
    rng.check()?;
    payload
}

/// [`seal`] with the version and the ephemeral randomness supplied, so tests
/// can reproduce published vectors (of every version) exactly.
fn seal_with_rng(
    version: SealVersion,
    content: &SealedContent,
    binding: &SealBinding,
    sender: &KeyPair,
    recipients: &[(Uuid, [u8; KEY_BYTES])],
    rng: &mut impl CryptoRng,
) -> Result<SealedPayload, SealError> {
    content.check().map_err(SealError::InvalidContent)?;
    if !binding.deadline_fits() {
        return Err(SealError::DeadlineTooPrecise);
    }
    let plaintext = content.to_plaintext().map_err(SealError::InvalidContent)?;
    if plaintext.len() > MAX_PLAINTEXT_BYTES {
        return Err(SealError::TooLarge {
            bytes: plaintext.len(),
            max: MAX_PLAINTEXT_BYTES,
        });
    }

    let own_key = sender.public_key();
    let mut all = Vec::with_capacity(recipients.len() + 1);
    for &(id, key) in recipients {
        if all.iter().any(|&(seen, _)| seen == id) {
            return Err(SealError::DuplicateRecipient(id));
        }
        if id == binding.sender_id && key != own_key {
            return Err(SealError::SenderKeyMismatch);
        }
        all.push((id, key));
    }
    if !all.iter().any(|&(id, _)| id == binding.sender_id) {
        all.push((binding.sender_id, own_key));
    }

    let mode = OpModeS::<HpkeKem>::Auth((sender.secret.clone(), sender.public.clone()));
    let mut sealed = Vec::with_capacity(all.len());
    for (identity_id, key) in all {
        let recipient =
            PublicKey::from_bytes(&key).map_err(|_| SealError::InvalidRecipientKey(identity_id))?;
        let context = binding.context(version, identity_id);
        let (enc, ciphertext) = hpke::single_shot_seal_with_rng::<HpkeAead, HpkeKdf, HpkeKem>(
            &mode, &recipient, &context, &plaintext, &context, rng,
        )
        .map_err(|_| SealError::InvalidRecipientKey(identity_id))?;
        sealed.push(SealedRecipient {
            identity_id,
            enc: B64.encode(enc.to_bytes()),
            ciphertext: B64.encode(ciphertext),
        });
    }
    Ok(SealedPayload {
        version: version.number(),
        suite: SEALED_SUITE.to_owned(),
        recipients: sealed,
    })
}

/// Why a sealed message was not opened. Clients show [`OpenError::reason`]
/// in place of the content; the message itself is never dropped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    /// A payload version this build does not know (a newer sender).
    #[error("unsupported sealed payload version")]
    UnsupportedVersion,
    /// A cipher suite this build does not know.
    #[error("unsupported sealed payload suite")]
    UnsupportedSuite,
    /// There is no copy for this identity (it was not a member when the
    /// message was sent).
    #[error("this identity is not among the recipients")]
    NotARecipient,
    /// The payload or its opened content breaks the format; says what.
    #[error("malformed sealed payload: {0}")]
    Malformed(String),
    /// Authentication failed: the ciphertext or `enc` was altered, it was not
    /// sealed by the claimed sender's key, it belongs to another message,
    /// room, sender or recipient, or (version 2) the envelope's `ask`,
    /// `deadline` or `replyTo` is not what was sealed.
    #[error("the sealed message cannot be opened")]
    CannotOpen,
}

impl OpenError {
    /// A short stable snake_case reason clients print next to a message they
    /// could not open (and scripts may match on).
    pub fn reason(&self) -> &'static str {
        match self {
            OpenError::UnsupportedVersion => "unsupported_version",
            OpenError::UnsupportedSuite => "unsupported_suite",
            OpenError::NotARecipient => "not_a_recipient",
            OpenError::Malformed(_) => "malformed",
            OpenError::CannotOpen => "cannot_open",
        }
    }
}

/// Opens this identity's copy of a sealed message.
///
/// `binding` comes from the envelope the message arrived in
/// ([`SealBinding::of_envelope`]) and `sender_public` is the sender's
/// registered public key: opening succeeds only if that key sealed this very
/// copy for `me_id` in this message and room and, for version 2, with this
/// `ask`, `deadline` and `replyTo`. A version 1 payload opens whatever those
/// three say (they were not bound). Never panics; every failure is an
/// [`OpenError`].
pub fn open(
    payload: &SealedPayload,
    binding: &SealBinding,
    sender_public: &[u8; KEY_BYTES],
    me_id: Uuid,
    me: &KeyPair,
) -> Result<SealedContent, OpenError> {
    let version = SealVersion::from_wire(payload.version).ok_or(OpenError::UnsupportedVersion)?;
    if payload.suite != SEALED_SUITE {
        return Err(OpenError::UnsupportedSuite);
    }
    let mut mine = payload
        .recipients
        .iter()
        .filter(|entry| entry.identity_id == me_id);
    let entry = mine.next().ok_or(OpenError::NotARecipient)?;
    if mine.next().is_some() {
        return Err(OpenError::Malformed(
            "more than one recipient entry for this identity".to_owned(),
        ));
    }

    let enc = B64
        .decode(&entry.enc)
        .map_err(|_| OpenError::Malformed("enc is not standard base64 with padding".to_owned()))?;
    let enc = <HpkeKem as hpke::Kem>::EncappedKey::from_bytes(&enc).map_err(|_| {
        OpenError::Malformed(format!("enc must be {ENC_BYTES} bytes, got {}", enc.len()))
    })?;
    let ciphertext = B64.decode(&entry.ciphertext).map_err(|_| {
        OpenError::Malformed("ciphertext is not standard base64 with padding".to_owned())
    })?;
    if ciphertext.len() < MIN_CIPHERTEXT_BYTES {
        return Err(OpenError::Malformed(format!(
            "ciphertext must be at least {MIN_CIPHERTEXT_BYTES} bytes, got {}",
            ciphertext.len()
        )));
    }
    // 32 bytes, so this cannot fail; a low-order sender key fails below.
    let sender = PublicKey::from_bytes(sender_public).map_err(|_| OpenError::CannotOpen)?;

    let context = binding.context(version, me_id);
    let plaintext = hpke::single_shot_open::<HpkeAead, HpkeKdf, HpkeKem>(
        &OpModeR::Auth(sender),
        &me.secret,
        &enc,
        &context,
        &ciphertext,
        &context,
    )
    .map_err(|_| OpenError::CannotOpen)?;
    SealedContent::from_plaintext(&plaintext)
        .map_err(|e| OpenError::Malformed(format!("the opened content is invalid: {e}")))
}
