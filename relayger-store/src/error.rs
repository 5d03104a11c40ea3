use relayger_core::ErrorCode;
use thiserror::Error;

/// Everything the store can fail with. The API layer maps these to the wire
/// error envelope in one place.
#[derive(Debug, Error)]
pub enum StoreError {
    #[error("database query failed: {0}")]
    Query(diesel::result::Error),
    /// Lost a lock race with a concurrent transaction (serialization
    /// failure or deadlock): nothing was written and a retry may succeed.
    #[error("the transaction conflicted with a concurrent one: {0}")]
    Contention(String),
    #[error("cannot connect to the database: {0}")]
    Connect(String),
    #[error("the database connection pool is exhausted or unavailable: {0}")]
    Pool(String),
    #[error("database migrations failed: {0}")]
    Migration(String),
    /// A domain rule refused the operation inside its transaction (not
    /// found, not allowed, conflict…); nothing was written.
    #[error("{code}: {message}")]
    Rejected { code: ErrorCode, message: String },
    /// As `Rejected`, with machine-readable context for the client.
    #[error("{code}: {message}")]
    RejectedWithDetails {
        code: ErrorCode,
        message: String,
        details: serde_json::Value,
    },
}

impl StoreError {
    pub(crate) fn rejected(code: ErrorCode, message: impl Into<String>) -> StoreError {
        StoreError::Rejected {
            code,
            message: message.into(),
        }
    }

    pub(crate) fn not_found(message: impl Into<String>) -> StoreError {
        StoreError::rejected(ErrorCode::NotFound, message)
    }

    pub(crate) fn invalid(message: impl Into<String>) -> StoreError {
        StoreError::rejected(ErrorCode::InvalidArgument, message)
    }

    pub(crate) fn conflict(message: impl Into<String>) -> StoreError {
        StoreError::rejected(ErrorCode::Conflict, message)
    }

    pub(crate) fn forbidden(message: impl Into<String>) -> StoreError {
        StoreError::rejected(ErrorCode::Forbidden, message)
    }
}

impl From<diesel::result::Error> for StoreError {
    fn from(err: diesel::result::Error) -> Self {
        use diesel::result::{DatabaseErrorKind, Error};
        match &err {
            Error::DatabaseError(DatabaseErrorKind::SerializationFailure, info) => {
                StoreError::Contention(info.message().to_owned())
            }
            Error::DatabaseError(_, info) if info.message().contains("deadlock detected") => {
                StoreError::Contention(info.message().to_owned())
            }
            _ => StoreError::Query(err),
        }
    }
}

impl From<diesel_async::pooled_connection::deadpool::PoolError> for StoreError {
    fn from(err: diesel_async::pooled_connection::deadpool::PoolError) -> Self {
        StoreError::Pool(err.to_string())
    }
}

impl From<diesel::ConnectionError> for StoreError {
    fn from(err: diesel::ConnectionError) -> Self {
        StoreError::Connect(err.to_string())
    }
}
