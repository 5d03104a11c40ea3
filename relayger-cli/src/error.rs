//! Every failure the CLI reports: a snake_case code and a message, printed
//! as `error: CODE: MESSAGE` or as the server's error envelope.

use relayger_core::ErrorCode;
use relayger_worker::{ClientError, ProfileError};
use serde_json::json;

#[derive(Debug)]
pub(crate) struct CliError {
    /// The server's code when it sent one (kept as text, so a code newer
    /// than this client still prints), else one of [`ErrorCode`]'s.
    code: String,
    message: String,
    /// Machine-readable context the server sent (e.g. the stored
    /// configuration of a `runtime_configuration_conflict`).
    details: Option<serde_json::Value>,
}

impl CliError {
    pub(crate) fn new(code: ErrorCode, message: impl Into<String>) -> CliError {
        CliError::with_code(code.as_str(), message)
    }

    /// An error with a code of the CLI's own (e.g. `handler_did_not_stop`).
    pub(crate) fn with_code(code: &str, message: impl Into<String>) -> CliError {
        CliError {
            code: code.to_owned(),
            message: message.into(),
            details: None,
        }
    }

    /// A local check failed; no request was made.
    pub(crate) fn invalid(message: impl Into<String>) -> CliError {
        CliError::new(ErrorCode::InvalidArgument, message)
    }

    /// The snake_case code.
    pub(crate) fn code(&self) -> &str {
        &self.code
    }

    /// `error: CODE: MESSAGE`.
    pub(crate) fn human(&self) -> String {
        format!("error: {}: {}", self.code, self.message)
    }

    /// `{"error":{"code","message"}}` (and `details` when the server sent
    /// some) on one line.
    pub(crate) fn envelope(&self) -> String {
        match &self.details {
            Some(details) => {
                json!({"error": {"code": self.code, "message": self.message, "details": details}})
            }
            None => json!({"error": {"code": self.code, "message": self.message}}),
        }
        .to_string()
    }
}

impl From<ClientError> for CliError {
    fn from(err: ClientError) -> CliError {
        match err {
            ClientError::Api { envelope, .. } => CliError {
                code: envelope.error.code.as_str().to_owned(),
                message: envelope.error.message,
                details: envelope.error.details,
            },
            ClientError::Transport(err) => CliError::new(
                ErrorCode::Unavailable,
                format!("cannot reach the server: {}", with_sources(&err)),
            ),
            ClientError::UnexpectedResponse { .. } => {
                CliError::new(ErrorCode::Unavailable, err.to_string())
            }
            ClientError::Profile(err) => err.into(),
            ClientError::Sealing(_) | ClientError::InvalidArgument(_) => {
                CliError::invalid(err.to_string())
            }
            ClientError::Socket(_) => CliError::new(ErrorCode::Unavailable, err.to_string()),
        }
    }
}

impl From<ProfileError> for CliError {
    fn from(err: ProfileError) -> CliError {
        match err {
            ProfileError::Io { .. } => CliError::new(ErrorCode::Internal, with_sources(&err)),
            other => CliError::invalid(other.to_string()),
        }
    }
}

/// `err` and its causes, `: `-separated (reqwest's own message names only
/// the URL; the cause says "connection refused").
fn with_sources(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}
