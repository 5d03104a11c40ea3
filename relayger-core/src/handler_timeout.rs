//! How long a handler may run for one job.
//!
//! The server computes this once per claim (with the question's deadline
//! measured against the database clock) and sends it in the claim response,
//! so the worker only ever counts a monotonic duration and never compares its
//! own wall clock with the server's.

/// The handler time when the operator asks for nothing else.
pub const DEFAULT_HANDLER_TIMEOUT_MS: u64 = 20_000;
/// No handler runs longer than this, whatever is requested: a job that takes
/// longer holds its lease, its concurrency slot and the asker's attention.
pub const MAX_HANDLER_TIMEOUT_MS: u64 = 120_000;

/// A requested handler timeout outside what Relayger allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "the handler timeout must be from 1 to {MAX_HANDLER_TIMEOUT_MS} milliseconds (at most 120 s), got {requested_ms}"
)]
pub struct HandlerTimeoutError {
    /// What the operator asked for.
    pub requested_ms: u64,
}

/// Checks an operator's `--handler-timeout` up front, so a typo fails at
/// start instead of being silently capped on every job.
pub fn validate_requested_timeout_ms(requested_ms: u64) -> Result<u64, HandlerTimeoutError> {
    if (1..=MAX_HANDLER_TIMEOUT_MS).contains(&requested_ms) {
        Ok(requested_ms)
    } else {
        Err(HandlerTimeoutError { requested_ms })
    }
}

/// The time a handler gets: the smallest of the cap, the requested (or
/// default) timeout and the time left until the question's deadline. A
/// deadline already passed gives 0: the answer would come too late anyway.
pub fn handler_timeout_ms(requested_ms: Option<u64>, deadline_remaining_ms: Option<i64>) -> u64 {
    let wanted = requested_ms
        .unwrap_or(DEFAULT_HANDLER_TIMEOUT_MS)
        .min(MAX_HANDLER_TIMEOUT_MS);
    match deadline_remaining_ms {
        Some(remaining) => wanted.min(u64::try_from(remaining).unwrap_or(0)),
        None => wanted,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_table() {
        let table = [
            (0, false),
            (1, true),
            (20_000, true),
            (120_000, true),
            (120_001, false),
            (u64::MAX, false),
        ];
        for (requested, ok) in table {
            let result = validate_requested_timeout_ms(requested);
            assert_eq!(result.is_ok(), ok, "{requested}");
        }
        let message = validate_requested_timeout_ms(200_000)
            .expect_err("too long")
            .to_string();
        assert!(
            message.contains("120000") && message.contains("200000"),
            "{message}"
        );
    }

    #[test]
    fn effective_timeout_table() {
        let table: [(Option<u64>, Option<i64>, u64); 12] = [
            (None, None, 20_000),
            (Some(5_000), None, 5_000),
            (Some(120_000), None, 120_000),
            (Some(500_000), None, 120_000),
            (None, Some(60_000), 20_000),
            (None, Some(7_500), 7_500),
            // The deadline is earlier than the request: the deadline wins.
            (Some(90_000), Some(30_000), 30_000),
            (Some(90_000), Some(100_000), 90_000),
            // The deadline has already passed.
            (None, Some(0), 0),
            (Some(10_000), Some(-5_000), 0),
            (None, Some(i64::MIN), 0),
            (None, Some(i64::MAX), 20_000),
        ];
        for (requested, remaining, expected) in table {
            assert_eq!(
                handler_timeout_ms(requested, remaining),
                expected,
                "{requested:?} {remaining:?}"
            );
        }
    }
}
