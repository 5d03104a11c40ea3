//! The life of one inbox job (one message for one runtime).
//!
//! ```text
//! pending ──Claim──▶ claimed ──Reply──▶ handled
//!    │                │ ──Skip───▶ skipped
//!    │                │ ──Fail / LeaseExpired──▶ pending (retry) or dead
//!    │                └──Release──▶ pending
//!    └──PolicySkip──▶ skipped            dead ──ManualRetry──▶ pending
//! ```
//!
//! Handled and skipped are final: a configure or a restart never replays
//! them. Dead letters stay until an operator revives one by hand.

use std::fmt;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::wire::{FinishOutcome, FinishResponse};

/// An enum whose values are stored in the database as text: `ALL`, the
/// stored name (`as_str`, also `Display`), and `parse`, which answers
/// `None` for a name this version does not know (the store reports that as
/// corrupt data, never as a default). The migrations hold each list as one
/// named constraint (a domain's, or the log's CHECK); a store test compares
/// the two.
macro_rules! stored_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $text:literal, )+
        }
    ) => {
        $(#[$meta])*
        pub enum $name {
            $( $(#[$vmeta])* $variant, )+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The name stored in the database (and shown on the wire).
            pub fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $text, )+
                }
            }

            /// Reads a stored name; `None` for one this version does not know.
            pub fn parse(name: &str) -> Option<Self> {
                Self::ALL.iter().copied().find(|value| value.as_str() == name)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

stored_enum! {
    /// Where a job stands.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
    #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
    #[serde(rename_all = "snake_case")]
    pub enum JobState {
        /// Waiting for a claim (first attempt, retry or released).
        Pending = "pending",
        /// Under a lease; a handler may be running.
        Claimed = "claimed",
        /// Finished with a reply (or a completion without a reply).
        Handled = "handled",
        /// Deliberately not answered: by policy or by the handler's `skip`.
        Skipped = "skipped",
        /// Failed `maxAttempts` times; kept with its reason, not retried.
        Dead = "dead",
    }
}

/// How an attempt completed its job (every outcome but `failed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Completion {
    /// With a reply message.
    Replied,
    /// Without a reply (a note only, or nothing).
    Handled,
    /// The handler chose not to answer.
    Skipped,
}

impl Completion {
    /// The attempt's stored outcome.
    pub fn outcome(self) -> AttemptOutcome {
        match self {
            Completion::Replied => AttemptOutcome::Replied,
            Completion::Handled => AttemptOutcome::Handled,
            Completion::Skipped => AttemptOutcome::Skipped,
        }
    }

    /// The completion a stored outcome records; `None` for a failed
    /// attempt.
    pub fn of(outcome: AttemptOutcome) -> Option<Completion> {
        match outcome {
            AttemptOutcome::Replied => Some(Completion::Replied),
            AttemptOutcome::Handled => Some(Completion::Handled),
            AttemptOutcome::Skipped => Some(Completion::Skipped),
            AttemptOutcome::Failed => None,
        }
    }

    /// The finish's answer. It is not stored beside the attempt's outcome
    /// and reply, which say the same: a retry with the same fingerprint
    /// gets it made again from them. (A failed attempt's answer, its retry
    /// time or that it was the last, is stored.)
    pub fn answer(self, reply_message_id: Option<Uuid>) -> FinishResponse {
        let outcome = match self {
            Completion::Replied => FinishOutcome::Replied,
            Completion::Handled => FinishOutcome::Handled,
            Completion::Skipped => FinishOutcome::Skipped,
        };
        FinishResponse {
            outcome,
            reply_message_id,
            retry_at: None,
        }
    }
}

impl JobState {
    /// Whether no event can move the job any more.
    pub fn is_final(self) -> bool {
        matches!(self, JobState::Handled | JobState::Skipped)
    }
}

stored_enum! {
    /// How a finished attempt ended (`attempts.outcome`); an attempt that
    /// expired or was released has none.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
    #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
    #[serde(rename_all = "snake_case")]
    pub enum AttemptOutcome {
        /// Completed with a reply message.
        Replied = "replied",
        /// Completed without a reply (a note only, or nothing).
        Handled = "handled",
        /// The handler chose not to answer.
        Skipped = "skipped",
        /// The handler reported an error (the job retries or is dead).
        Failed = "failed",
    }
}

stored_enum! {
    /// Why an attempt is over (`attempts.ended`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
    #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
    #[serde(rename_all = "snake_case")]
    pub enum AttemptEnd {
        /// Its holder finished it (with any outcome).
        Finished = "finished",
        /// Its lease ran out first.
        Expired = "expired",
        /// Its holder gave it back while stopping.
        Released = "released",
        /// The asker canceled the question while it was held.
        Canceled = "canceled",
    }
}

stored_enum! {
    /// The kind of a runtime log record (`runtime_log.kind`; the log's
    /// `kind` on the wire).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum RuntimeEvent {
        /// A process registered the runtime for the first time.
        Registered = "registered",
        /// An operator changed the policy.
        Configured = "configured",
        /// A claim granted a lease.
        Claimed = "claimed",
        /// A finish with a reply, or a completion without one.
        Replied = "replied",
        /// Skipped, by the policy at claim time or by the handler.
        Skipped = "skipped",
        /// A failed attempt that will be retried.
        Failed = "failed",
        /// A lease ran out; the job will be retried.
        Expired = "expired",
        /// The job failed or expired for the last time.
        DeadLetter = "dead_letter",
        /// A stopping worker gave the job back.
        Released = "released",
        /// An operator revived a dead letter.
        Retried = "retried",
        /// The asker canceled the question while a lease was held on it.
        Canceled = "canceled",
    }
}

/// Something that happens to a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobEvent {
    /// A worker took the job under a new lease.
    Claim,
    /// The holder finished with a reply (or an empty completion).
    Reply,
    /// The holder's handler chose not to answer.
    Skip,
    /// The holder reported an error (including a finish that rolled back).
    Fail,
    /// The lease ran out without a finish.
    LeaseExpired,
    /// The holder gave the job back while stopping.
    Release,
    /// The claim transaction found the current policy forbids it (sender,
    /// room, deadline passed, access lost).
    PolicySkip,
    /// An operator revived a dead letter (`runtimes retry`).
    ManualRetry,
}

impl JobEvent {
    /// Every event, for tables.
    pub const ALL: [JobEvent; 8] = [
        JobEvent::Claim,
        JobEvent::Reply,
        JobEvent::Skip,
        JobEvent::Fail,
        JobEvent::LeaseExpired,
        JobEvent::Release,
        JobEvent::PolicySkip,
        JobEvent::ManualRetry,
    ];

    /// The snake_case name, for logs and error messages.
    pub fn as_str(self) -> &'static str {
        match self {
            JobEvent::Claim => "claim",
            JobEvent::Reply => "reply",
            JobEvent::Skip => "skip",
            JobEvent::Fail => "fail",
            JobEvent::LeaseExpired => "lease_expired",
            JobEvent::Release => "release",
            JobEvent::PolicySkip => "policy_skip",
            JobEvent::ManualRetry => "manual_retry",
        }
    }
}

impl fmt::Display for JobEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An event that does not apply to the job's current state; the store
/// treats it as a lost race or a bug, never as a silent no-op.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a {state} job cannot take the event `{event}`")]
pub struct InvalidTransition {
    /// The state the job was in.
    pub state: JobState,
    /// The event that does not apply to it.
    pub event: JobEvent,
}

/// The state after `event`. `attempts_so_far` counts every claim made so
/// far, including the one that just ended, so with `max_attempts = 3` the
/// third failure dead-letters. A release never dead-letters: stopping a
/// worker is not the job's fault. A manual retry is the only way out of
/// `dead`; the store resets the attempt count with it.
pub fn next_state(
    state: JobState,
    event: JobEvent,
    attempts_so_far: u32,
    max_attempts: u32,
) -> Result<JobState, InvalidTransition> {
    use JobEvent as E;
    use JobState as S;
    match (state, event) {
        (S::Pending, E::Claim) => Ok(S::Claimed),
        (S::Pending, E::PolicySkip) => Ok(S::Skipped),
        (S::Claimed, E::Reply) => Ok(S::Handled),
        (S::Claimed, E::Skip) => Ok(S::Skipped),
        (S::Claimed, E::Fail | E::LeaseExpired) if attempts_so_far < max_attempts => Ok(S::Pending),
        (S::Claimed, E::Fail | E::LeaseExpired) => Ok(S::Dead),
        (S::Claimed, E::Release) => Ok(S::Pending),
        (S::Dead, E::ManualRetry) => Ok(S::Pending),
        _ => Err(InvalidTransition { state, event }),
    }
}

/// The idempotency key of one (runtime, message): stable across attempts,
/// processes and owners, and computed only here (the store keeps the ids,
/// not the key). A message id is unique only within its room, so the room is
/// part of the key.
pub fn job_key(runtime_id: Uuid, room_id: Uuid, message_id: Uuid) -> String {
    format!(
        "job_{}_{}_{}",
        runtime_id.simple(),
        room_id.simple(),
        message_id.simple()
    )
}

/// The runtime, room and message a job key names: the inverse of
/// [`job_key`], `None` for text that is not a key in exactly its form
/// (three 32-digit lowercase hex ids).
pub fn job_key_ids(key: &str) -> Option<(Uuid, Uuid, Uuid)> {
    let mut parts = key.strip_prefix("job_")?.split('_');
    let mut id = || {
        parts
            .next()
            .filter(|part| {
                part.len() == 32 && part.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
            })
            .and_then(|part| Uuid::parse_str(part).ok())
    };
    let ids = (id()?, id()?, id()?);
    parts.next().is_none().then_some(ids)
}

/// The first retry waits this long.
const FIRST_RETRY_MS: u64 = 1_000;
/// No retry waits longer: an hour-long silence after a transient outage
/// would look like a hung listener.
pub const MAX_RETRY_BACKOFF_MS: u64 = 300_000;

/// How long a failed job waits before it may be claimed again, after its
/// `attempt`-th failure (1-based): 1 s, 2 s, 4 s, … up to 5 minutes.
pub fn retry_backoff_ms(attempt: u32) -> u64 {
    let doublings = attempt.saturating_sub(1);
    // Past 2^19 s the cap has long been reached; stopping there also keeps
    // the shift far from dropping bits.
    if doublings >= 20 {
        return MAX_RETRY_BACKOFF_MS;
    }
    (FIRST_RETRY_MS << doublings).min(MAX_RETRY_BACKOFF_MS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_completion_is_answered_from_its_stored_outcome_and_reply() {
        let reply = Some(Uuid::from_u128(7));
        let cases = [
            (AttemptOutcome::Replied, reply, Some(FinishOutcome::Replied)),
            (AttemptOutcome::Handled, None, Some(FinishOutcome::Handled)),
            (AttemptOutcome::Skipped, None, Some(FinishOutcome::Skipped)),
            (AttemptOutcome::Failed, None, None),
        ];
        for (outcome, reply_message_id, expected) in cases {
            let completion = Completion::of(outcome);
            if let Some(completion) = completion {
                // Stored and read back, the same completion.
                assert_eq!(completion.outcome(), outcome);
            }
            let answer = completion.map(|c| c.answer(reply_message_id));
            assert_eq!(answer.as_ref().map(|a| a.outcome), expected, "{outcome:?}");
            if let Some(answer) = answer {
                assert_eq!(answer.reply_message_id, reply_message_id);
                assert_eq!(answer.retry_at, None);
            }
        }
    }

    #[test]
    fn every_state_and_event_pair() {
        use JobEvent as E;
        use JobState as S;
        // (state, event, result with attempts 1 of 3, result with attempts 3 of 3)
        let table: [(S, E, Option<S>, Option<S>); 40] = [
            (S::Pending, E::Claim, Some(S::Claimed), Some(S::Claimed)),
            (S::Pending, E::Reply, None, None),
            (S::Pending, E::Skip, None, None),
            (S::Pending, E::Fail, None, None),
            (S::Pending, E::LeaseExpired, None, None),
            (S::Pending, E::Release, None, None),
            (
                S::Pending,
                E::PolicySkip,
                Some(S::Skipped),
                Some(S::Skipped),
            ),
            (S::Pending, E::ManualRetry, None, None),
            (S::Claimed, E::Claim, None, None),
            (S::Claimed, E::Reply, Some(S::Handled), Some(S::Handled)),
            (S::Claimed, E::Skip, Some(S::Skipped), Some(S::Skipped)),
            (S::Claimed, E::Fail, Some(S::Pending), Some(S::Dead)),
            (S::Claimed, E::LeaseExpired, Some(S::Pending), Some(S::Dead)),
            (S::Claimed, E::Release, Some(S::Pending), Some(S::Pending)),
            (S::Claimed, E::PolicySkip, None, None),
            (S::Claimed, E::ManualRetry, None, None),
            (S::Handled, E::Claim, None, None),
            (S::Handled, E::Reply, None, None),
            (S::Handled, E::Skip, None, None),
            (S::Handled, E::Fail, None, None),
            (S::Handled, E::LeaseExpired, None, None),
            (S::Handled, E::Release, None, None),
            (S::Handled, E::PolicySkip, None, None),
            (S::Handled, E::ManualRetry, None, None),
            (S::Skipped, E::Claim, None, None),
            (S::Skipped, E::Reply, None, None),
            (S::Skipped, E::Skip, None, None),
            (S::Skipped, E::Fail, None, None),
            (S::Skipped, E::LeaseExpired, None, None),
            (S::Skipped, E::Release, None, None),
            (S::Skipped, E::PolicySkip, None, None),
            (S::Skipped, E::ManualRetry, None, None),
            (S::Dead, E::Claim, None, None),
            (S::Dead, E::Reply, None, None),
            (S::Dead, E::Skip, None, None),
            (S::Dead, E::Fail, None, None),
            (S::Dead, E::LeaseExpired, None, None),
            (S::Dead, E::Release, None, None),
            (S::Dead, E::PolicySkip, None, None),
            (S::Dead, E::ManualRetry, Some(S::Pending), Some(S::Pending)),
        ];
        for &state in JobState::ALL {
            for event in JobEvent::ALL {
                assert!(
                    table.iter().any(|row| row.0 == state && row.1 == event),
                    "{state} {event} missing from the table"
                );
            }
        }
        for (state, event, early, last) in table {
            for (attempts, expected) in [(1, early), (3, last)] {
                let result = next_state(state, event, attempts, 3);
                let expected = expected.ok_or(InvalidTransition { state, event });
                assert_eq!(result, expected, "{state} {event} attempts {attempts}");
            }
            if state.is_final() {
                assert!(next_state(state, event, 0, 3).is_err());
            }
        }
    }

    #[test]
    fn attempts_boundary() {
        let table = [
            (1, 1, JobState::Dead),
            (1, 2, JobState::Pending),
            (2, 2, JobState::Dead),
            (2, 3, JobState::Pending),
            (4, 3, JobState::Dead),
            (19, 20, JobState::Pending),
            (20, 20, JobState::Dead),
        ];
        for (attempts, max, expected) in table {
            for event in [JobEvent::Fail, JobEvent::LeaseExpired] {
                let result = next_state(JobState::Claimed, event, attempts, max);
                assert_eq!(result, Ok(expected), "{event} after {attempts} of {max}");
            }
            let released = next_state(JobState::Claimed, JobEvent::Release, attempts, max);
            assert_eq!(
                released,
                Ok(JobState::Pending),
                "release never dead-letters"
            );
        }
    }

    #[test]
    fn names_round_trip() {
        for &state in JobState::ALL {
            assert_eq!(JobState::parse(state.as_str()), Some(state));
            let json = serde_json::to_string(&state).expect("serialize");
            assert_eq!(json, format!("\"{state}\""));
        }
        for event in JobEvent::ALL {
            let json = serde_json::to_string(&event).expect("serialize");
            assert_eq!(json, format!("\"{event}\""));
        }
        for bad in ["Pending", "", "done", "dead_letter"] {
            assert_eq!(JobState::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn stored_names_are_distinct_snake_case_and_round_trip() {
        fn check<T: Copy + PartialEq + std::fmt::Debug>(
            all: &[T],
            as_str: fn(T) -> &'static str,
            parse: fn(&str) -> Option<T>,
        ) {
            let mut names: Vec<&str> = all.iter().map(|&value| as_str(value)).collect();
            for &value in all {
                assert_eq!(parse(as_str(value)), Some(value));
                let name = as_str(value);
                assert!(
                    name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                    "{name} is not snake_case"
                );
                assert_eq!(parse(&name.to_uppercase()), None, "{name}: names are exact");
            }
            names.sort_unstable();
            names.dedup();
            assert_eq!(names.len(), all.len(), "two values share a name");
            assert_eq!(parse(""), None);
        }
        check(JobState::ALL, JobState::as_str, JobState::parse);
        check(
            AttemptOutcome::ALL,
            AttemptOutcome::as_str,
            AttemptOutcome::parse,
        );
        check(AttemptEnd::ALL, AttemptEnd::as_str, AttemptEnd::parse);
        check(RuntimeEvent::ALL, RuntimeEvent::as_str, RuntimeEvent::parse);
    }

    #[test]
    fn a_job_key_names_runtime_room_and_message() {
        let id = |n: u128| Uuid::from_u128(n);
        assert_eq!(
            job_key(id(1), id(0xab), id(0xffff)),
            "job_00000000000000000000000000000001_000000000000000000000000000000ab_0000000000000000000000000000ffff"
        );
        // The room is part of the key: a message id is unique only within its room.
        assert_ne!(job_key(id(1), id(2), id(3)), job_key(id(1), id(4), id(3)));
    }

    #[test]
    fn a_job_key_reads_back_as_its_ids_and_nothing_else_does() {
        let (runtime, room, message) = (
            Uuid::from_u128(1),
            Uuid::from_u128(0xab),
            Uuid::from_u128(u128::MAX),
        );
        let key = job_key(runtime, room, message);
        let hex = "0123456789abcdef0123456789abcdef";
        let table: [(String, bool); 7] = [
            (key.clone(), true),
            (key.to_uppercase(), false),
            (key.replacen("job_", "", 1), false),
            (format!("job_{hex}_{hex}"), false),
            (format!("job_{hex}_{hex}_{hex}_{hex}"), false),
            (format!("job_{hex}_{hex}_{}", &hex[1..]), false),
            (format!("job_{hex}_{hex}_{hex}"), true),
        ];
        for (text, is_key) in table {
            assert_eq!(job_key_ids(&text).is_some(), is_key, "{text}");
        }
        assert_eq!(job_key_ids(&key), Some((runtime, room, message)));
    }

    #[test]
    fn backoff_table() {
        let table = [
            (0, 1_000),
            (1, 1_000),
            (2, 2_000),
            (3, 4_000),
            (4, 8_000),
            (9, 256_000),
            (10, 300_000),
            (20, 300_000),
            (64, 300_000),
            (65, 300_000),
            (u32::MAX, 300_000),
        ];
        for (attempt, expected) in table {
            assert_eq!(retry_backoff_ms(attempt), expected, "attempt {attempt}");
        }
    }
}
