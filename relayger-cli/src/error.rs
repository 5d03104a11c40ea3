//! Every failure the CLI reports: a snake_case code and a message, printed
//! as `error: CODE: MESSAGE` or as the server's error envelope.

use relayger_core::ErrorCode;
use relayger_core::lookup::LookupError;
use relayger_worker::{ClientError, ProfileError};
use serde_json::json;

use crate::output::Outcome;

#[derive(Debug)]
pub(crate) struct CliError {
    /// The server's code when it sent one (kept as text, so a code newer
    /// than this client still prints), else one of [`ErrorCode`]'s.
    code: String,
    message: String,
    /// Machine-readable context the server sent (e.g. the stored
    /// configuration of a `runtime_configuration_conflict`).
    details: Option<serde_json::Value>,
    /// What the command found before it failed, printed on stdout like a
    /// result (e.g. the delivery of an `unanswered` question).
    output: Option<Box<Outcome>>,
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
            output: None,
        }
    }

    /// The error, with `output` to print on stdout as well.
    pub(crate) fn with_output(mut self, output: Outcome) -> CliError {
        self.output = Some(Box::new(output));
        self
    }

    /// What to print on stdout before the error goes to stderr.
    pub(crate) fn take_output(&mut self) -> Option<Outcome> {
        self.output.take().map(|output| *output)
    }

    /// A local check failed; no request was made.
    pub(crate) fn invalid(message: impl Into<String>) -> CliError {
        CliError::new(ErrorCode::InvalidArgument, message)
    }

    /// The process exit status for this error (see [`exit_status`]).
    pub(crate) fn exit_status(&self) -> u8 {
        exit_status(&self.code)
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
                output: None,
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
            ClientError::Lookup(LookupError::NotFound { .. }) => {
                CliError::new(ErrorCode::NotFound, err.to_string())
            }
            ClientError::Lookup(LookupError::Ambiguous { .. }) => {
                CliError::invalid(err.to_string())
            }
            other => CliError::new(ErrorCode::Internal, with_sources(&other)),
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

/// Exit statuses, documented in the README; 2 is clap's usage error.
pub(crate) mod exit {
    /// Any other failure: refused input, an internal error, a stopped worker.
    pub(crate) const FAILURE: u8 = 1;
    pub(crate) const NOT_FOUND: u8 = 3;
    /// Not signed in, or not allowed (401, 403).
    pub(crate) const AUTH: u8 = 4;
    /// A conflict with the stored state (409).
    pub(crate) const CONFLICT: u8 = 5;
    /// The server could not be reached, was overloaded or unavailable.
    pub(crate) const UNAVAILABLE: u8 = 6;
    /// A wait ran out (`send --ask --wait`).
    pub(crate) const TIMED_OUT: u8 = 7;
    /// Every recipient of a question ended without answering it (`send
    /// --ask --wait`): failed, rejected or canceled.
    pub(crate) const UNANSWERED: u8 = 8;
}

/// The CLI's own code for a question that ended without an answer.
pub(crate) const UNANSWERED: &str = "unanswered";
/// The CLI's own code for a wait that ran out.
pub(crate) const TIMEOUT: &str = "timeout";

/// The exit status for an error code, by the HTTP status the code travels
/// with, so a code newer than this client still lands in its class.
pub(crate) fn exit_status(code: &str) -> u8 {
    match code {
        TIMEOUT => return exit::TIMED_OUT,
        UNANSWERED => return exit::UNANSWERED,
        _ => {}
    }
    let known: ErrorCode = serde_json::from_value(serde_json::Value::String(code.to_owned()))
        .unwrap_or(ErrorCode::Unknown);
    match known.http_status() {
        404 => exit::NOT_FOUND,
        401 | 403 => exit::AUTH,
        409 => exit::CONFLICT,
        429 | 503 => exit::UNAVAILABLE,
        _ => exit::FAILURE,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_statuses_by_class() {
        let table = [
            ("invalid_argument", exit::FAILURE),
            ("internal", exit::FAILURE),
            ("handler_did_not_stop", exit::FAILURE),
            ("a_code_from_a_newer_server", exit::FAILURE),
            ("not_found", exit::NOT_FOUND),
            ("unauthorized", exit::AUTH),
            ("forbidden", exit::AUTH),
            ("registration_closed", exit::AUTH),
            ("conflict", exit::CONFLICT),
            ("version_conflict", exit::CONFLICT),
            ("runtime_configuration_conflict", exit::CONFLICT),
            ("rate_limited", exit::UNAVAILABLE),
            ("unavailable", exit::UNAVAILABLE),
            ("timeout", exit::TIMED_OUT),
            ("unanswered", exit::UNANSWERED),
        ];
        for (code, status) in table {
            assert_eq!(exit_status(code), status, "{code}");
        }
    }

    #[test]
    fn every_known_code_has_a_status_other_than_success_and_usage() {
        for code in ErrorCode::ALL {
            let status = exit_status(code.as_str());
            assert!(status != 0 && status != 2, "{code:?} -> {status}");
        }
    }
}
