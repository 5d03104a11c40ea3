use diesel::pg::sql_state;
use diesel::result::{SqlState, SqlStateClass};
use relayger_core::ErrorCode;
use thiserror::Error;

/// Everything the store can fail with. The API layer maps these to the wire
/// error envelope in one place.
#[derive(Debug, Error)]
pub enum StoreError {
    #[error("database query failed: {0}")]
    Query(diesel::result::Error),
    /// Lost to concurrent work (a serialization failure, a deadlock, a
    /// lock or statement timeout): nothing was written and a retry may
    /// succeed.
    #[error("the transaction conflicted with a concurrent one: {0}")]
    Contention(String),
    /// The database went away (could not connect, or the connection was
    /// lost under a statement): a retry may succeed.
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
        use diesel::result::Error;
        let message = match &err {
            Error::DatabaseError(_, info) => info.message().to_owned(),
            _ => return StoreError::Query(err),
        };
        match class(&err) {
            ErrorClass::Contention => StoreError::Contention(message),
            ErrorClass::Connect => StoreError::Connect(message),
            ErrorClass::Query => StoreError::Query(err),
        }
    }
}

/// What a database error means for the caller, read from its SQLSTATE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ErrorClass {
    /// The statement lost to concurrent work: a serialization failure, a
    /// deadlock, or a lock or statement that ran into the session limits
    /// (`SESSION_LIMITS`). The transaction rolled back; a retry may succeed.
    Contention,
    /// The database went away under the query (a restart, a failover, a
    /// killed backend, a session timeout), not that the query was wrong. The
    /// client should retry; the pool replaces the broken connection.
    Connect,
    /// Anything else: the query or the data is wrong.
    Query,
}

/// The one table from a SQLSTATE to its [`ErrorClass`].
fn class_of(code: SqlState) -> ErrorClass {
    match code {
        sql_state::T_R_SERIALIZATION_FAILURE
        | sql_state::T_R_DEADLOCK_DETECTED
        // `lock_timeout`
        | sql_state::LOCK_NOT_AVAILABLE
        // `statement_timeout`
        | sql_state::QUERY_CANCELED => ErrorClass::Contention,
        sql_state::ADMIN_SHUTDOWN
        | sql_state::CRASH_SHUTDOWN
        | sql_state::CANNOT_CONNECT_NOW
        | sql_state::IDLE_SESSION_TIMEOUT
        | sql_state::IDLE_IN_TRANSACTION_SESSION_TIMEOUT => ErrorClass::Connect,
        code if code.class() == SqlStateClass::CONNECTION_EXCEPTION => ErrorClass::Connect,
        _ => ErrorClass::Query,
    }
}

/// The class of a diesel error: by its SQLSTATE when the server sent one.
fn class(err: &diesel::result::Error) -> ErrorClass {
    use diesel::result::{DatabaseErrorKind, Error};
    match err {
        Error::DatabaseError(kind, info) => match info.sqlstate() {
            Some(code) => class_of(code),
            // No SQLSTATE: the server sent no error. The one such path is
            // diesel-async's: a tokio-postgres error without a code becomes
            // `UnableToSendCommand` with that error's text — the socket
            // failed ("error communicating with the server: …") or was closed
            // ("connection closed": what the next statement on a terminated
            // or timed-out session gets), or the task driving the connection
            // ended. tokio-postgres' client-side checks (a bind count that
            // does not match the prepared statement) take the same path; the
            // store's tests run every statement. `ClosedConnection` is what
            // diesel's own `PgConnection` reports for a lost connection. Told
            // by kind alone, never by the text.
            None => match kind {
                DatabaseErrorKind::ClosedConnection | DatabaseErrorKind::UnableToSendCommand => {
                    ErrorClass::Connect
                }
                _ => ErrorClass::Query,
            },
        },
        _ => ErrorClass::Query,
    }
}

impl StoreError {
    /// Whether this is the error a store function raises for `constraint`
    /// (`RAISE … USING ERRCODE = 'check_violation', CONSTRAINT = …`):
    /// told by its SQLSTATE and constraint name, never by its text.
    pub(crate) fn is_raised(&self, constraint: &str) -> bool {
        matches!(
            self,
            StoreError::Query(diesel::result::Error::DatabaseError(_, info))
                if info.sqlstate() == Some(sql_state::CHECK_VIOLATION)
                    && info.constraint_name() == Some(constraint)
        )
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

#[cfg(test)]
mod tests {
    use diesel::result::{DatabaseErrorInformation, DatabaseErrorKind, Error};

    use super::*;

    /// An error as the server would report it: a code, a message, a
    /// constraint.
    struct Info {
        code: Option<&'static str>,
        message: &'static str,
        constraint: Option<&'static str>,
    }

    impl DatabaseErrorInformation for Info {
        fn message(&self) -> &str {
            self.message
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
            self.constraint
        }
        fn statement_position(&self) -> Option<i32> {
            None
        }
        fn sqlstate(&self) -> Option<SqlState> {
            self.code.map(|code| code.parse().expect("a SQLSTATE"))
        }
    }

    fn error(
        kind: DatabaseErrorKind,
        code: Option<&'static str>,
        message: &'static str,
        constraint: Option<&'static str>,
    ) -> Error {
        Error::DatabaseError(
            kind,
            Box::new(Info {
                code,
                message,
                constraint,
            }),
        )
    }

    fn variant(err: &StoreError) -> &'static str {
        match err {
            StoreError::Connect(_) => "connect",
            StoreError::Contention(_) => "contention",
            StoreError::Query(_) => "query",
            _ => "other",
        }
    }

    #[test]
    fn a_sqlstate_is_classified_by_one_table() {
        use ErrorClass::*;
        let table: [(&str, ErrorClass); 22] = [
            ("40001", Contention), // serialization_failure
            ("40P01", Contention), // deadlock_detected
            ("55P03", Contention), // lock_not_available (lock_timeout)
            ("57014", Contention), // query_canceled (statement_timeout)
            ("57P01", Connect),    // admin_shutdown (pg_terminate_backend)
            ("57P02", Connect),    // crash_shutdown
            ("57P03", Connect),    // cannot_connect_now (starting, in recovery)
            ("57P05", Connect),    // idle_session_timeout
            ("25P03", Connect),    // idle_in_transaction_session_timeout
            ("08000", Connect),    // connection_exception
            ("08003", Connect),    // connection_does_not_exist
            ("08006", Connect),    // connection_failure
            ("08P01", Connect),    // protocol_violation
            ("40000", Query),      // transaction_rollback, not a lost race
            ("40002", Query),      // transaction_integrity_constraint_violation
            ("40003", Query),      // statement_completion_unknown
            ("55000", Query),      // object_not_in_prerequisite_state
            ("57000", Query),      // operator_intervention
            ("23505", Query),      // unique_violation
            ("23514", Query),      // check_violation
            ("42601", Query),      // syntax_error
            ("P0001", Query),      // raise_exception
        ];
        for (code, expected) in table {
            let code: SqlState = code.parse().expect("a SQLSTATE");
            assert_eq!(class_of(code), expected, "{code}");
        }
    }

    #[test]
    fn database_errors_are_classified_by_their_code_not_their_text() {
        use DatabaseErrorKind::*;
        let table: [(DatabaseErrorKind, Option<&'static str>, &'static str, &str); 12] = [
            (Unknown, Some("40P01"), "deadlock detected", "contention"),
            (Unknown, Some("40P01"), "anything at all", "contention"),
            (
                SerializationFailure,
                Some("40001"),
                "could not serialize access",
                "contention",
            ),
            (Unknown, Some("55P03"), "anything at all", "contention"),
            (Unknown, Some("57014"), "anything at all", "contention"),
            (Unknown, Some("P0001"), "deadlock detected", "query"),
            (
                Unknown,
                Some("P0001"),
                "canceling statement due to lock timeout",
                "query",
            ),
            (Unknown, Some("57P01"), "anything at all", "connect"),
            (
                Unknown,
                Some("P0001"),
                "terminating connection due to administrator command",
                "query",
            ),
            (
                UniqueViolation,
                Some("23505"),
                "duplicate key value",
                "query",
            ),
            // No SQLSTATE: the connection failed under the statement.
            (
                UnableToSendCommand,
                None,
                "error communicating with the server",
                "connect",
            ),
            (ClosedConnection, None, "anything at all", "connect"),
        ];
        for (kind, code, message, expected) in table {
            let err = StoreError::from(error(kind, code, message, None));
            assert_eq!(variant(&err), expected, "{code:?} {message}");
        }
        // Without a code, the text no longer decides.
        for message in ["connection closed", "deadlock detected", "broken pipe"] {
            let err = StoreError::from(error(Unknown, None, message, None));
            assert_eq!(variant(&err), "query", "{message}");
        }
    }

    #[test]
    fn a_raised_error_is_told_by_its_code_and_constraint() {
        use DatabaseErrorKind::*;
        const RAISED: &str = "relayger_members_changed";
        let raised = |kind, code, constraint| {
            StoreError::from(error(kind, code, "a message", constraint)).is_raised(RAISED)
        };
        assert!(raised(CheckViolation, Some("23514"), Some(RAISED)));
        // Another constraint, another code, or no code: not ours.
        assert!(!raised(
            CheckViolation,
            Some("23514"),
            Some("jobs_state_check")
        ));
        assert!(!raised(Unknown, Some("P0001"), Some(RAISED)));
        assert!(!raised(CheckViolation, None, Some(RAISED)));
    }

    /// The error the migration's `relayger_members_changed()` raises is
    /// recognised by its code and constraint; the same text under another
    /// constraint is not it.
    #[tokio::test]
    async fn the_members_changed_error_of_the_database_is_recognised() {
        use diesel_async::RunQueryDsl;
        const RAISED: &str = "relayger_members_changed";
        let db = crate::test_support::TestDatabase::create().await;
        let store = db.store().await;
        let mut conn = store.conn().await.expect("connection");
        let raised = diesel::sql_query("SELECT relayger_members_changed()")
            .execute(&mut conn)
            .await
            .expect_err("the function raises");
        assert!(StoreError::from(raised).is_raised(RAISED));
        let look_alike = diesel::sql_query(
            "DO $$ BEGIN RAISE EXCEPTION 'the room''s members changed while the statement \
             waited for it' USING ERRCODE = 'check_violation', CONSTRAINT = 'another'; END $$",
        )
        .execute(&mut conn)
        .await
        .expect_err("the block raises");
        assert!(!StoreError::from(look_alike).is_raised(RAISED));
    }
}
