//! What a call to the server can fail with, and how a response that is not
//! a success becomes one.

use relayger_core::{ErrorCode, ErrorEnvelope};
use reqwest::Response;
use serde::de::DeserializeOwned;
use thiserror::Error;

use crate::profile::ProfileError;

/// How much of an unreadable response body an error quotes.
const BODY_EXCERPT_CHARS: usize = 200;

/// What a call to the server can fail with.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The server answered with its error envelope
    /// `{"error":{"code","message"}}` and this HTTP status.
    #[error("{}: {}", .envelope.error.code, .envelope.error.message)]
    Api {
        /// The HTTP status (fixed per code by `ErrorCode::http_status`).
        status: u16,
        /// The server's code and message.
        envelope: ErrorEnvelope,
    },
    /// The server could not be reached, or the connection broke.
    #[error("cannot reach the server: {0}")]
    Transport(#[from] reqwest::Error),
    /// The server answered, but not with the JSON this client expects (a
    /// proxy's error page, or a server of another version).
    #[error(
        "the server answered HTTP {status} with a body this client cannot read ({reason}): {excerpt}"
    )]
    UnexpectedResponse {
        /// The HTTP status.
        status: u16,
        /// Why the body could not be read.
        reason: String,
        /// The start of the body.
        excerpt: String,
    },
    /// A local profile could not be read or written.
    #[error(transparent)]
    Profile(#[from] ProfileError),
    /// A sealed message could not be prepared (no local key pair, a member
    /// without a public key, not a contact, …).
    #[error("cannot send sealed: {0}")]
    Sealing(String),
    /// A WebSocket could not be opened (network, TLS, handshake) or broke.
    /// A refusal with the server's error envelope is [`ClientError::Api`].
    #[error("socket: {0}")]
    Socket(String),
    /// A value this client refuses to send (checked before any request).
    #[error("{0}")]
    InvalidArgument(String),
    /// A typed name or id named no runtime, or several (the error lists
    /// them).
    #[error(transparent)]
    Lookup(#[from] relayger_core::lookup::LookupError),
}

impl ClientError {
    /// The server's error code, when it answered with its envelope.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            ClientError::Api { envelope, .. } => Some(envelope.error.code),
            _ => None,
        }
    }

    /// Whether the same call may succeed later without any change: the
    /// server was unreachable or restarting (transport errors, a broken
    /// socket, HTTP 5xx, 429, or a body from something other than the
    /// server, such as a proxy's error page).
    pub fn is_transient(&self) -> bool {
        match self {
            ClientError::Api { status, .. } => *status >= 500 || *status == 429,
            ClientError::Transport(_) | ClientError::Socket(_) => true,
            ClientError::UnexpectedResponse { status, .. } => *status >= 500 || *status == 429,
            ClientError::Profile(_)
            | ClientError::Sealing(_)
            | ClientError::InvalidArgument(_)
            | ClientError::Lookup(_) => false,
        }
    }
}

/// A success body as `T`; anything else as the error it carries.
pub(crate) async fn decode<T: DeserializeOwned>(response: Response) -> Result<T, ClientError> {
    let status = response.status();
    let bytes = response.bytes().await?;
    if !status.is_success() {
        return Err(error_from(status.as_u16(), &bytes));
    }
    serde_json::from_slice(&bytes)
        .map_err(|err| unexpected(status.as_u16(), &err.to_string(), &bytes))
}

/// The error envelope of a failed response, or what the body looked like
/// when it is not one.
pub(crate) fn error_from(status: u16, bytes: &[u8]) -> ClientError {
    match serde_json::from_slice::<ErrorEnvelope>(bytes) {
        Ok(envelope) => ClientError::Api { status, envelope },
        Err(err) => unexpected(status, &err.to_string(), bytes),
    }
}

fn unexpected(status: u16, reason: &str, bytes: &[u8]) -> ClientError {
    let text = String::from_utf8_lossy(bytes);
    let mut excerpt: String = text.chars().take(BODY_EXCERPT_CHARS).collect();
    if text.chars().count() > BODY_EXCERPT_CHARS {
        excerpt.push('…');
    }
    ClientError::UnexpectedResponse {
        status,
        reason: reason.to_owned(),
        excerpt,
    }
}
