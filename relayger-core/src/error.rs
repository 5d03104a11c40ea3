//! The error codes every layer speaks, their HTTP status, and the wire envelope
//! `{"error":{"code","message"}}`.

use serde::{Deserialize, Serialize};

/// A stable, snake_case error code. The HTTP status for each code is fixed
/// here once, so the server maps errors in exactly one place and clients can
/// rely on the pairing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    BadRequest,
    InvalidJson,
    InvalidPolicy,
    InvalidArgument,
    Unauthorized,
    Forbidden,
    /// A room-restricted token tried an identity-wide action.
    TokenRestricted,
    NotFound,
    /// The client did not send its request (headers or body) in time.
    RequestTimeout,
    Conflict,
    PayloadTooLarge,
    ContextItemTooLarge,
    UnprocessableEntity,
    RuntimeConfigurationConflict,
    RuntimeBusy,
    RuntimeLimit,
    VersionConflict,
    LeaseLost,
    /// The asker canceled the question a lease was held on: the handler
    /// should stop, and nothing of its result is written.
    JobCanceled,
    FingerprintMismatch,
    RegistrationClosed,
    RateLimited,
    Unavailable,
    Internal,
    /// A code this version does not know (from a newer server).
    #[serde(other)]
    Unknown,
}

impl ErrorCode {
    /// Every code, for table-driven checks.
    pub const ALL: [ErrorCode; 24] = [
        ErrorCode::BadRequest,
        ErrorCode::InvalidJson,
        ErrorCode::InvalidPolicy,
        ErrorCode::InvalidArgument,
        ErrorCode::Unauthorized,
        ErrorCode::Forbidden,
        ErrorCode::TokenRestricted,
        ErrorCode::NotFound,
        ErrorCode::RequestTimeout,
        ErrorCode::Conflict,
        ErrorCode::PayloadTooLarge,
        ErrorCode::ContextItemTooLarge,
        ErrorCode::UnprocessableEntity,
        ErrorCode::RuntimeConfigurationConflict,
        ErrorCode::RuntimeBusy,
        ErrorCode::RuntimeLimit,
        ErrorCode::VersionConflict,
        ErrorCode::LeaseLost,
        ErrorCode::JobCanceled,
        ErrorCode::FingerprintMismatch,
        ErrorCode::RegistrationClosed,
        ErrorCode::RateLimited,
        ErrorCode::Unavailable,
        ErrorCode::Internal,
    ];

    /// The HTTP status code that carries this error.
    pub const fn http_status(self) -> u16 {
        match self {
            ErrorCode::BadRequest
            | ErrorCode::InvalidJson
            | ErrorCode::InvalidPolicy
            | ErrorCode::InvalidArgument => 400,
            ErrorCode::Unauthorized => 401,
            ErrorCode::Forbidden | ErrorCode::TokenRestricted | ErrorCode::RegistrationClosed => {
                403
            }
            ErrorCode::NotFound => 404,
            ErrorCode::RequestTimeout => 408,
            ErrorCode::Conflict
            | ErrorCode::RuntimeConfigurationConflict
            | ErrorCode::RuntimeBusy
            | ErrorCode::RuntimeLimit
            | ErrorCode::VersionConflict
            | ErrorCode::LeaseLost
            | ErrorCode::JobCanceled
            | ErrorCode::FingerprintMismatch => 409,
            ErrorCode::PayloadTooLarge | ErrorCode::ContextItemTooLarge => 413,
            ErrorCode::UnprocessableEntity => 422,
            ErrorCode::RateLimited => 429,
            ErrorCode::Internal | ErrorCode::Unknown => 500,
            ErrorCode::Unavailable => 503,
        }
    }

    /// The snake_case name, as it appears on the wire and in CLI output.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BadRequest => "bad_request",
            ErrorCode::InvalidJson => "invalid_json",
            ErrorCode::InvalidPolicy => "invalid_policy",
            ErrorCode::InvalidArgument => "invalid_argument",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::TokenRestricted => "token_restricted",
            ErrorCode::NotFound => "not_found",
            ErrorCode::RequestTimeout => "request_timeout",
            ErrorCode::Conflict => "conflict",
            ErrorCode::PayloadTooLarge => "payload_too_large",
            ErrorCode::ContextItemTooLarge => "context_item_too_large",
            ErrorCode::UnprocessableEntity => "unprocessable_entity",
            ErrorCode::RuntimeConfigurationConflict => "runtime_configuration_conflict",
            ErrorCode::RuntimeBusy => "runtime_busy",
            ErrorCode::RuntimeLimit => "runtime_limit",
            ErrorCode::VersionConflict => "version_conflict",
            ErrorCode::LeaseLost => "lease_lost",
            ErrorCode::JobCanceled => "job_canceled",
            ErrorCode::FingerprintMismatch => "fingerprint_mismatch",
            ErrorCode::RegistrationClosed => "registration_closed",
            ErrorCode::RateLimited => "rate_limited",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::Internal => "internal",
            ErrorCode::Unknown => "unknown",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The inner object of the error envelope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorBody {
    pub code: ErrorCode,
    pub message: String,
    /// Machine-readable context where a code has some, e.g. the stored
    /// configuration in a `runtime_configuration_conflict`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<serde_json::Value>,
}

/// `{"error":{"code":"…","message":"…"}}`, the one shape every error takes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorEnvelope {
    pub error: ErrorBody,
}

impl ErrorEnvelope {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ErrorEnvelope {
            error: ErrorBody {
                code,
                message: message.into(),
                details: None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_name_matches_as_str_for_every_code() {
        for code in ErrorCode::ALL {
            let json = serde_json::to_string(&code).expect("serialize");
            assert_eq!(json, format!("\"{}\"", code.as_str()));
            let back: ErrorCode = serde_json::from_str(&json).expect("deserialize");
            assert_eq!(back, code);
        }
    }

    #[test]
    fn statuses_are_client_or_server_errors() {
        let table = [
            (ErrorCode::InvalidPolicy, 400),
            (ErrorCode::Unauthorized, 401),
            (ErrorCode::Forbidden, 403),
            (ErrorCode::TokenRestricted, 403),
            (ErrorCode::NotFound, 404),
            (ErrorCode::RequestTimeout, 408),
            (ErrorCode::RuntimeBusy, 409),
            (ErrorCode::LeaseLost, 409),
            (ErrorCode::ContextItemTooLarge, 413),
            (ErrorCode::UnprocessableEntity, 422),
            (ErrorCode::Internal, 500),
            (ErrorCode::Unavailable, 503),
        ];
        for (code, status) in table {
            assert_eq!(code.http_status(), status, "{code}");
        }
        for code in ErrorCode::ALL {
            assert!((400..600).contains(&code.http_status()), "{code}");
        }
    }

    #[test]
    fn envelope_shape() {
        let env = ErrorEnvelope::new(ErrorCode::RuntimeBusy, "a lease is active");
        let value = serde_json::to_value(&env).expect("serialize");
        assert_eq!(
            value,
            serde_json::json!({"error": {"code": "runtime_busy", "message": "a lease is active"}})
        );
    }
}
