//! X25519 static key pairs, public-key parsing and the operating system's
//! random source.

use std::convert::Infallible;
use std::fmt;

use base64::Engine as _;
use hpke::rand_core::{TryCryptoRng, TryRng};
use hpke::{Deserializable, Kem as _, Serializable};

use super::{B64, HpkeKem, KEY_BYTES, SealError};

/// The KEM's private key type (a clamped X25519 scalar).
pub(super) type PrivateKey = <HpkeKem as hpke::Kem>::PrivateKey;
/// The KEM's public key type (an X25519 u-coordinate).
pub(super) type PublicKey = <HpkeKem as hpke::Kem>::PublicKey;

/// Why a key given as base64 cannot be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// Not standard base64 with padding (the only encoding Relayger writes).
    #[error("a key must be standard base64 with padding")]
    NotBase64,
    /// X25519 keys are exactly 32 bytes; anything else is a truncated or
    /// foreign key.
    #[error("an X25519 key is exactly {KEY_BYTES} bytes, got {length}")]
    WrongLength {
        /// How many bytes the base64 decoded to.
        length: usize,
    },
    /// A low-order point: every Diffie-Hellman result with it is zero, so
    /// nothing can ever be sealed to it (RFC 9180 §7.1.4 makes both sides
    /// refuse it). Refusing it at registration saves a confusing failure later.
    #[error("the public key is a low-order X25519 point and cannot be used")]
    WeakPublicKey,
}

/// An identity's long-term X25519 key pair for sealed messages.
///
/// The secret never leaves the local profile; the public half is registered
/// with the server so others can seal to it and check what this identity
/// sealed. `Debug` deliberately shows only the public key so a key pair can
/// sit inside logged structs without leaking. The secret is zeroized when the
/// key pair is dropped (the underlying key type does it).
#[derive(Clone)]
pub struct KeyPair {
    pub(super) secret: PrivateKey,
    pub(super) public: PublicKey,
}

impl KeyPair {
    /// A fresh key pair from the operating system's random source, following
    /// RFC 9180 `DeriveKeyPair(random(32))`. Fails (instead of panicking) if
    /// the random source is unavailable.
    pub fn generate() -> Result<KeyPair, SealError> {
        let mut rng = OsRandom::new();
        let (secret, public) = HpkeKem::gen_keypair_with_rng(&mut rng);
        rng.check()?;
        Ok(KeyPair { secret, public })
    }

    /// Loads a secret key as stored in a profile: standard base64 (padded) of
    /// the 32-byte X25519 private key (RFC 9180 `SerializePrivateKey`). The
    /// scalar is clamped on load as RFC 9180 requires, so a key written by
    /// another library may come back from [`KeyPair::secret_base64`] with
    /// its clamping bits set; both strings are the same key.
    pub fn from_secret_base64(b64: &str) -> Result<KeyPair, KeyError> {
        let bytes = decode_key(b64)?;
        let secret = PrivateKey::from_bytes(&bytes).map_err(|_| KeyError::WrongLength {
            length: bytes.len(),
        })?;
        let public = HpkeKem::sk_to_pk(&secret);
        Ok(KeyPair { secret, public })
    }

    /// The secret key in the form [`KeyPair::from_secret_base64`] reads, for
    /// writing to the local profile (and nowhere else).
    pub fn secret_base64(&self) -> String {
        B64.encode(self.secret.to_bytes())
    }

    /// The public key as registered with the server and given to
    /// [`super::seal`] by other members: standard base64 (padded) of 32 bytes.
    pub fn public_base64(&self) -> String {
        B64.encode(self.public_key())
    }

    /// The raw public key, as [`super::seal`] and [`super::open`] take it.
    pub fn public_key(&self) -> [u8; KEY_BYTES] {
        let mut out = [0u8; KEY_BYTES];
        out.copy_from_slice(&self.public.to_bytes());
        out
    }
}

impl fmt::Debug for KeyPair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyPair")
            .field("public", &self.public_base64())
            .field("secret", &"<redacted>")
            .finish()
    }
}

/// Parses a public key as the server stores it: standard base64 (padded) of
/// exactly 32 bytes, and not a low-order point. The server calls this when an
/// identity registers its key; clients call it on keys they fetch.
pub fn parse_public_key(b64: &str) -> Result<[u8; KEY_BYTES], KeyError> {
    let bytes = decode_key(b64)?;
    let mut key = [0u8; KEY_BYTES];
    key.copy_from_slice(&bytes);
    if is_low_order(&key) {
        return Err(KeyError::WeakPublicKey);
    }
    Ok(key)
}

fn decode_key(b64: &str) -> Result<Vec<u8>, KeyError> {
    let bytes = B64.decode(b64).map_err(|_| KeyError::NotBase64)?;
    if bytes.len() != KEY_BYTES {
        return Err(KeyError::WrongLength {
            length: bytes.len(),
        });
    }
    Ok(bytes)
}

/// A low-order point multiplied by any clamped scalar (a multiple of the
/// cofactor 8) is the identity, whose X25519 encoding is all zeros, so one
/// encapsulation with a fixed ephemeral key tells them apart: the KEM refuses
/// an all-zero Diffie-Hellman result. The fixed "randomness" here is public on
/// purpose; nothing sealed with it leaves this function.
fn is_low_order(key: &[u8; KEY_BYTES]) -> bool {
    let Ok(public) = PublicKey::from_bytes(key) else {
        return true;
    };
    HpkeKem::encap_with_rng(&public, None, &mut FixedByte(0x5a)).is_err()
}

/// A constant byte stream, only for [`is_low_order`].
struct FixedByte(u8);

impl TryRng for FixedByte {
    type Error = Infallible;

    fn try_next_u32(&mut self) -> Result<u32, Infallible> {
        Ok(u32::from_le_bytes([self.0; 4]))
    }

    fn try_next_u64(&mut self) -> Result<u64, Infallible> {
        Ok(u64::from_le_bytes([self.0; 8]))
    }

    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Infallible> {
        dst.fill(self.0);
        Ok(())
    }
}

impl TryCryptoRng for FixedByte {}

/// The operating system's random source ([`crate::random`]), shaped as the
/// infallible RNG the `hpke` crate asks for. The crate's own source panics
/// when the OS fails; this one remembers the failure instead, and [`OsRandom::check`] turns it
/// into [`SealError::RandomUnavailable`] before anything derived from the
/// (then zeroed) bytes can leave the caller.
pub(super) struct OsRandom {
    failed: bool,
}

impl OsRandom {
    pub(super) fn new() -> OsRandom {
        OsRandom { failed: false }
    }

    /// Call after the last draw and before using its results.
    pub(super) fn check(&self) -> Result<(), SealError> {
        if self.failed {
            Err(SealError::RandomUnavailable)
        } else {
            Ok(())
        }
    }
}

impl TryRng for OsRandom {
    type Error = Infallible;

    fn try_next_u32(&mut self) -> Result<u32, Infallible> {
        let mut bytes = [0u8; 4];
        self.try_fill_bytes(&mut bytes)?;
        Ok(u32::from_le_bytes(bytes))
    }

    fn try_next_u64(&mut self) -> Result<u64, Infallible> {
        let mut bytes = [0u8; 8];
        self.try_fill_bytes(&mut bytes)?;
        Ok(u64::from_le_bytes(bytes))
    }

    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Infallible> {
        if crate::random::fill(dst).is_err() {
            self.failed = true;
            dst.fill(0);
        }
        Ok(())
    }
}

impl TryCryptoRng for OsRandom {}
