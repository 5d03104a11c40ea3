use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use relayger_core::naming::NameError;
use relayger_core::{ErrorCode, ErrorEnvelope};
use relayger_store::StoreError;

/// An error on its way to the client: a code from relayger-core and a
/// message. This is the only place where errors become HTTP responses.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
    pub details: Option<serde_json::Value>,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ApiError {
            code,
            message: message.into(),
            details: None,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.code.http_status())
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let shed = matches!(self.code, ErrorCode::RateLimited | ErrorCode::Unavailable);
        let mut envelope = ErrorEnvelope::new(self.code, self.message);
        envelope.error.details = self.details;
        let mut response = (status, Json(envelope)).into_response();
        if shed {
            // Load was shed, a transaction was rolled back, or the database
            // is away: a client may come back in a second (clients retry
            // writes with the same ids, which the server treats as one).
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        response
    }
}

/// A refused name, label or room list is the caller's mistake; the core's
/// message is the one clients see.
impl From<NameError> for ApiError {
    fn from(err: NameError) -> Self {
        ApiError::new(ErrorCode::InvalidArgument, err.to_string())
    }
}

impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> Self {
        match err {
            // The pool sheds load rather than queueing without bound.
            StoreError::Rejected { code, message } => ApiError::new(code, message),
            StoreError::RejectedWithDetails {
                code,
                message,
                details,
            } => ApiError {
                code,
                message,
                details: Some(details),
            },
            StoreError::Pool(_) | StoreError::Connect(_) => {
                tracing::warn!(%err, "database unavailable");
                ApiError::new(
                    ErrorCode::Unavailable,
                    "the database is unavailable; retry shortly",
                )
            }
            StoreError::Contention(detail) => {
                tracing::warn!(%detail, "transaction conflict");
                ApiError::new(
                    ErrorCode::Unavailable,
                    "the request conflicted with a concurrent one and was rolled back; retry",
                )
            }
            other => {
                // Details stay in the server log; the client learns nothing
                // about the schema.
                tracing::error!(err = %other, "store error");
                ApiError::new(ErrorCode::Internal, "internal error")
            }
        }
    }
}
