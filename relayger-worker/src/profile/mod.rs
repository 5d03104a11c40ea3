//! Local profiles: one JSON file per identity under `$RELAYGER_HOME`, holding
//! the server URL, a token and the identity's X25519 key pair. The format is
//! documented in `docs/profiles.md`; other clients (the JavaScript SDK) read
//! the same files.

mod dir;
#[cfg(test)]
mod tests;

use std::fmt;
use std::path::PathBuf;

use relayger_core::ids::IdentityNumber;
use relayger_core::naming::PROFILE_NAME_RULE;
use relayger_core::sealed::KeyPair;
use relayger_core::wire::{IdentityKind, RegisterResponse};
use serde::{Deserialize, Serialize};
use thiserror::Error;
use uuid::Uuid;

pub use self::dir::{ProfileDir, ProfileEntry};

/// The profile used when none is named.
pub const DEFAULT_PROFILE: &str = "default";
/// The environment variable naming the profile directory.
pub const HOME_ENV: &str = "RELAYGER_HOME";
/// The file under the profile directory naming the profile chosen with
/// `relayger profiles use NAME`: the default when none is named.
pub const CURRENT_FILE: &str = "current";
/// The file format version this crate writes and reads.
pub(crate) const FORMAT_VERSION: u32 = 1;

/// Why a profile could not be found, read or written.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ProfileError {
    /// Profile names are 1–64 of `A-Z a-z 0-9 . _ -` (and not `.`/`..`).
    #[error("`{name}` is not a valid profile name: {}", PROFILE_NAME_RULE)]
    InvalidName {
        /// The name given.
        name: String,
    },
    /// No file for this profile.
    #[error(
        "profile `{name}` does not exist in {}; create it with `relayger{} register --server URL --name NAME` (or, from a person's profile, `relayger agents create --name NAME --save-as {name}`)",
        dir.display(),
        profile_flag(name)
    )]
    NotFound {
        /// The profile's name.
        name: String,
        /// The directory searched.
        dir: PathBuf,
    },
    /// Creating a profile never replaces one: that would lose its key.
    #[error("profile `{name}` already exists ({}); choose another name", path.display())]
    AlreadyExists {
        /// The profile's name.
        name: String,
        /// Its file.
        path: PathBuf,
    },
    /// The file is not a profile this version understands.
    #[error("profile file {} is not valid: {message}", path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// The stored key pair is unusable.
    #[error("the key pair of the profile for {number} is not valid: {message}")]
    InvalidKey {
        /// The profile's identity number.
        number: IdentityNumber,
        /// What is wrong with the key.
        message: String,
    },
    /// Neither `$RELAYGER_HOME` nor a user config directory.
    #[error("no profile directory: set {HOME_ENV}")]
    NoHome,
    /// The file system refused.
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        /// What was being done (`read`, `write`, …).
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
}

fn profile_flag(name: &str) -> String {
    if name == DEFAULT_PROFILE {
        String::new()
    } else {
        format!(" --profile {name}")
    }
}

/// One profile file: everything a client needs to act as one identity.
/// Field names are the camelCase keys of the JSON file.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Profile {
    /// The file format version (1).
    pub version: u32,
    /// The server's base URL, e.g. `http://127.0.0.1:7070`.
    pub server: String,
    /// The id of the token below (for `tokens list`/`revoke`).
    pub token_id: Uuid,
    /// The bearer token's secret.
    pub token: String,
    /// The identity's id.
    pub identity_id: Uuid,
    /// The identity's number.
    pub number: IdentityNumber,
    /// Person or agent.
    pub kind: IdentityKind,
    /// The name given at registration.
    pub display_name: String,
    /// For an agent created by a person: the owner's number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_number: Option<IdentityNumber>,
    /// Base64 of the X25519 public key (the one the server knows).
    pub public_key: String,
    /// Base64 of the X25519 secret key; never leaves this file.
    pub secret_key: String,
}

impl fmt::Debug for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Profile")
            .field("server", &self.server)
            .field("token_id", &self.token_id)
            .field("identity_id", &self.identity_id)
            .field("number", &self.number)
            .field("kind", &self.kind)
            .field("display_name", &self.display_name)
            .finish_non_exhaustive()
    }
}

impl Profile {
    /// The profile for an identity just registered (or created as an agent)
    /// on `server` with `key_pair`.
    pub fn from_registration(
        server: &str,
        response: &RegisterResponse,
        key_pair: &KeyPair,
    ) -> Profile {
        let identity = &response.identity;
        Profile {
            version: FORMAT_VERSION,
            server: server.trim_end_matches('/').to_owned(),
            token_id: response.token.id,
            token: response.token.secret.clone(),
            identity_id: identity.id,
            number: identity.number.clone(),
            kind: identity.kind,
            display_name: identity.display_name.clone(),
            owner_number: identity.owner_number.clone(),
            public_key: key_pair.public_base64(),
            secret_key: key_pair.secret_base64(),
        }
    }

    /// The key pair stored in the profile; its public half must be the
    /// `publicKey` the profile records.
    pub fn key_pair(&self) -> Result<KeyPair, ProfileError> {
        let invalid = |message: String| ProfileError::InvalidKey {
            number: self.number.clone(),
            message,
        };
        let key_pair = KeyPair::from_secret_base64(&self.secret_key)
            .map_err(|err| invalid(format!("secretKey: {err}")))?;
        if key_pair.public_base64() != self.public_key {
            return Err(invalid(
                "publicKey is not the public half of secretKey".into(),
            ));
        }
        Ok(key_pair)
    }
}
