//! Fixed bounds of the runtime routes: how many runtimes an agent keeps, how
//! many jobs one claim grants (in all and in one room), and how many log
//! records one page answers. The store applies them inside its statements;
//! the numbers and the clamping of what a caller asks for are decided here.

/// The most runtimes one agent may have; registering one more is refused
/// (`runtime_limit`) until `runtimes delete ID` frees a name. Every runtime
/// is scanned, claimed and kept by the server for good, so an agent cannot
/// make that work grow without bound.
pub const MAX_RUNTIMES_PER_AGENT: i64 = 8;

/// The most jobs one claim grants, whatever `maxJobs` asks for: one claim
/// is one transaction holding the runtime's row lock, and its statements
/// and response grow with the batch.
pub const MAX_JOBS_PER_CLAIM: u32 = 64;

/// The most jobs one claim grants in one room: a batch spread over rooms
/// lets the finishes that follow run in parallel instead of queueing on one
/// room's lock. The rest of the room stays pending (`morePending`).
pub const JOBS_PER_ROOM: usize = 4;

/// The most records one page of a runtime's log (and of its dead letters)
/// answers, so a response stays bounded however long the log is.
pub const MAX_LOG_PAGE: i64 = 100;

/// How many jobs a claim asking for `max_jobs` may grant at most (before
/// concurrency and budget): at least 1, at most [`MAX_JOBS_PER_CLAIM`].
pub fn claim_size(max_jobs: u32) -> u32 {
    max_jobs.clamp(1, MAX_JOBS_PER_CLAIM)
}

/// The size of a log page for a requested `limit`: [`MAX_LOG_PAGE`] when
/// none is given, else the limit brought into 1 to [`MAX_LOG_PAGE`].
pub fn log_page_size(limit: Option<i64>) -> i64 {
    limit.unwrap_or(MAX_LOG_PAGE).clamp(1, MAX_LOG_PAGE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_grants_one_to_the_cap() {
        let table = [(0, 1), (1, 1), (5, 5), (64, 64), (65, 64), (u32::MAX, 64)];
        for (asked, size) in table {
            assert_eq!(claim_size(asked), size, "maxJobs {asked}");
        }
    }

    #[test]
    fn a_log_page_is_one_to_the_cap() {
        let table = [
            (None, 100),
            (Some(i64::MIN), 1),
            (Some(-1), 1),
            (Some(0), 1),
            (Some(1), 1),
            (Some(42), 42),
            (Some(100), 100),
            (Some(101), 100),
            (Some(i64::MAX), 100),
        ];
        for (limit, size) in table {
            assert_eq!(log_page_size(limit), size, "limit {limit:?}");
        }
    }
}
