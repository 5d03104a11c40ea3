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

    /// A stored value this version cannot read (a state name it does not
    /// know, a negative sequence value): a broken invariant, reported as
    /// an internal error, never read as a default.
    pub(crate) fn corrupt(what: &str, value: impl std::fmt::Debug) -> StoreError {
        StoreError::rejected(
            ErrorCode::Internal,
            format!("the database holds {what} this server cannot read: {value:?}"),
        )
    }
}

/// A stored number as the type this server reads it as (a count, an
/// attempt number, a version); a value out of that range is corrupt data,
/// reported as such and never read as a default.
pub(crate) fn stored<T: TryFrom<S>, S: Copy + std::fmt::Debug>(
    what: &str,
    value: S,
) -> Result<T, StoreError> {
    T::try_from(value).map_err(|_| StoreError::corrupt(what, value))
}

impl From<diesel::result::Error> for StoreError {
    fn from(err: diesel::result::Error) -> Self {
        use diesel::result::{DatabaseErrorKind, Error};
        match &err {
            Error::DatabaseError(DatabaseErrorKind::SerializationFailure, info) => {
                StoreError::Contention(info.message().to_owned())
            }
            Error::DatabaseError(_, info) if is_contention(info.message()) => {
                StoreError::Contention(info.message().to_owned())
            }
            Error::DatabaseError(DatabaseErrorKind::ClosedConnection, info) => {
                StoreError::Connect(info.message().to_owned())
            }
            Error::DatabaseError(_, info) if is_connection_lost(info.message()) => {
                StoreError::Connect(info.message().to_owned())
            }
            _ => StoreError::Query(err),
        }
    }
}

/// Messages of errors that mean the statement lost to concurrent work: a
/// deadlock, or a lock or statement that ran into the session limits
/// (`SESSION_LIMITS`). The transaction rolled back; a retry may succeed.
const CONTENTION: [&str; 3] = [
    "deadlock detected",
    "canceling statement due to lock timeout",
    "canceling statement due to statement timeout",
];

fn is_contention(message: &str) -> bool {
    CONTENTION.iter().any(|lost| message.contains(lost))
}

/// Messages of errors that mean the database went away under a query (a
/// restart, a failover, a killed backend), not that the query was wrong. The
/// client should retry; the pool replaces the broken connection.
const CONNECTION_LOST: [&str; 9] = [
    "terminating connection due to idle-in-transaction timeout",
    "connection closed",
    "terminating connection due to administrator command",
    "the database system is shutting down",
    "the database system is starting up",
    "the database system is in recovery mode",
    "server closed the connection unexpectedly",
    "connection reset",
    "broken pipe",
];

fn is_connection_lost(message: &str) -> bool {
    let message = message.to_ascii_lowercase();
    CONNECTION_LOST.iter().any(|lost| message.contains(lost))
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

#[cfg(test)]
mod tests {
    use diesel::result::{DatabaseErrorInformation, DatabaseErrorKind, Error};

    use super::*;

    struct Info(&'static str);

    impl DatabaseErrorInformation for Info {
        fn message(&self) -> &str {
            self.0
        }
        fn details(&self) -> Option<&str> {
            None
        }
        fn hint(&self) -> Option<&str> {
            None
        }
        fn table_name(&self) -> Option<&str> {
            None
        }
        fn column_name(&self) -> Option<&str> {
            None
        }
        fn constraint_name(&self) -> Option<&str> {
            None
        }
        fn statement_position(&self) -> Option<i32> {
            None
        }
    }

    #[test]
    fn database_errors_are_classified_for_the_client() {
        use DatabaseErrorKind::*;
        let table: [(DatabaseErrorKind, &'static str, &str); 12] = [
            (Unknown, "connection closed", "connect"),
            (
                Unknown,
                "FATAL: terminating connection due to administrator command",
                "connect",
            ),
            (Unknown, "the database system is shutting down", "connect"),
            (Unknown, "the database system is starting up", "connect"),
            (ClosedConnection, "anything", "connect"),
            (
                SerializationFailure,
                "could not serialize access",
                "contention",
            ),
            (Unknown, "deadlock detected", "contention"),
            (
                Unknown,
                "canceling statement due to lock timeout",
                "contention",
            ),
            (
                Unknown,
                "canceling statement due to statement timeout",
                "contention",
            ),
            (
                Unknown,
                "FATAL: terminating connection due to idle-in-transaction timeout",
                "connect",
            ),
            (UniqueViolation, "duplicate key value", "query"),
            (Unknown, "syntax error at or near", "query"),
        ];
        for (kind, message, expected) in table {
            let err = StoreError::from(Error::DatabaseError(kind, Box::new(Info(message))));
            let got = match err {
                StoreError::Connect(_) => "connect",
                StoreError::Contention(_) => "contention",
                StoreError::Query(_) => "query",
                _ => "other",
            };
            assert_eq!(got, expected, "{message}");
        }
    }
}
