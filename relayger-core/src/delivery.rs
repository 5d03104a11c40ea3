//! What became of a question, as its asker sees it: each recipient's
//! [`DeliveryState`] made from the jobs its runtimes hold of the message,
//! and the question's state summed up over the recipients.
//!
//! The asker sees states and codes only: a skip the recipient's handler
//! chose is `handler_skipped` whatever its text, a dead letter
//! `attempts_exhausted` whatever its error, and nothing says which policy
//! rule of the recipient's is which beyond the skip's code.

use uuid::Uuid;

use crate::job::JobState;
use crate::policy::SkipReason;
use crate::wire::DeliveryState;

/// The reason of a dead letter, whatever its attempts' errors were.
pub const ATTEMPTS_EXHAUSTED: &str = "attempts_exhausted";
/// The reason of a skip the recipient's handler chose.
pub const HANDLER_SKIPPED: &str = "handler_skipped";
/// The reason of a job completed without a reply (a note only).
pub const NO_REPLY: &str = "no_reply";

impl DeliveryState {
    /// The wire name (`queued`, `working`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryState::Queued => "queued",
            DeliveryState::Working => "working",
            DeliveryState::Answered => "answered",
            DeliveryState::Failed => "failed",
            DeliveryState::Rejected => "rejected",
            DeliveryState::Canceled => "canceled",
        }
    }

    /// How far along a state is: of several runtimes (or recipients), the
    /// most advanced one speaks for them all.
    fn rank(self) -> u8 {
        match self {
            DeliveryState::Answered => 5,
            DeliveryState::Working => 4,
            DeliveryState::Queued => 3,
            DeliveryState::Canceled => 2,
            DeliveryState::Failed => 1,
            DeliveryState::Rejected => 0,
        }
    }

    /// The question ended without an answer: nothing more will come of it
    /// unless someone acts (a manual retry, a new question).
    pub fn is_unanswered_end(self) -> bool {
        matches!(
            self,
            DeliveryState::Failed | DeliveryState::Rejected | DeliveryState::Canceled
        )
    }
}

/// One runtime's job of the message, as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobRecord<'a> {
    pub state: JobState,
    /// A skipped job's stored reason (a policy code or the handler's text).
    pub reason: Option<&'a str>,
    /// A claimed job's lease has not run out by the database clock.
    pub lease_live: bool,
    /// Leases granted on it.
    pub attempts: u32,
}

/// What one runtime of a recipient has of the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuntimeRecord<'a> {
    /// The runtime's scan made a job of it.
    Job(JobRecord<'a>),
    /// No job yet: `will_consider` when its scan has not passed the message
    /// and its triggers take it; otherwise the runtime never will.
    NoJob { will_consider: bool },
}

/// Everything about one recipient the delivery is made of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecipientFacts<'a> {
    /// The recipient's first reply to the question.
    pub reply: Option<Uuid>,
    /// The asker canceled the question.
    pub canceled: bool,
    pub runtimes: Vec<RuntimeRecord<'a>>,
}

/// One recipient's delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecipientView {
    pub state: DeliveryState,
    pub reason: Option<&'static str>,
    pub attempts: u32,
    pub reply: Option<Uuid>,
    pub listeners: u32,
}

/// A stored skip reason as the asker may see it.
fn skip_code(reason: Option<&str>) -> (DeliveryState, &'static str) {
    match reason.and_then(|reason| {
        SkipReason::ALL
            .into_iter()
            .find(|known| known.as_str() == reason)
    }) {
        Some(SkipReason::Canceled) => (DeliveryState::Canceled, SkipReason::Canceled.as_str()),
        Some(policy) => (DeliveryState::Rejected, policy.as_str()),
        None => (DeliveryState::Rejected, HANDLER_SKIPPED),
    }
}

/// One runtime's state of the message, with its reason; `None` for a
/// runtime that never considers it.
fn runtime_state(
    record: RuntimeRecord<'_>,
    canceled: bool,
) -> Option<(DeliveryState, Option<&'static str>)> {
    let waiting = if canceled {
        (DeliveryState::Canceled, None)
    } else {
        (DeliveryState::Queued, None)
    };
    let job = match record {
        RuntimeRecord::NoJob { will_consider } => return will_consider.then_some(waiting),
        RuntimeRecord::Job(job) => job,
    };
    Some(match job.state {
        JobState::Pending => waiting,
        JobState::Claimed if job.lease_live => (DeliveryState::Working, None),
        // Its lease ran out: the next claim ends it and another takes it.
        JobState::Claimed => waiting,
        // A reply the recipient wrote is found by [`recipient`] itself.
        JobState::Handled => (DeliveryState::Rejected, Some(NO_REPLY)),
        JobState::Skipped => {
            let (state, code) = skip_code(job.reason);
            (
                state,
                Some(code).filter(|_| state == DeliveryState::Rejected),
            )
        }
        JobState::Dead => (DeliveryState::Failed, Some(ATTEMPTS_EXHAUSTED)),
    })
}

/// A recipient's delivery: answered once it replied; otherwise the most
/// advanced state among its runtimes that consider the message, and queued
/// (or canceled) when none does.
pub fn recipient(facts: &RecipientFacts<'_>) -> RecipientView {
    let attempts = facts
        .runtimes
        .iter()
        .map(|record| match record {
            RuntimeRecord::Job(job) => job.attempts,
            RuntimeRecord::NoJob { .. } => 0,
        })
        .fold(0u32, u32::saturating_add);
    let states: Vec<_> = facts
        .runtimes
        .iter()
        .filter_map(|record| runtime_state(*record, facts.canceled))
        .collect();
    let listeners = u32::try_from(states.len()).unwrap_or(u32::MAX);
    let (state, reason) = match facts.reply {
        Some(_) => (DeliveryState::Answered, None),
        None => states
            .into_iter()
            .reduce(|best, next| {
                if next.0.rank() > best.0.rank() {
                    next
                } else {
                    best
                }
            })
            .unwrap_or(if facts.canceled {
                (DeliveryState::Canceled, None)
            } else {
                (DeliveryState::Queued, None)
            }),
    };
    RecipientView {
        state,
        reason,
        attempts,
        reply: facts.reply,
        listeners,
    }
}

/// The question's state over all its recipients: the most advanced one;
/// with no recipient at all, queued (or canceled).
pub fn summary(recipients: &[DeliveryState], canceled: bool) -> DeliveryState {
    recipients
        .iter()
        .copied()
        .max_by_key(|state| state.rank())
        .unwrap_or(if canceled {
            DeliveryState::Canceled
        } else {
            DeliveryState::Queued
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(state: JobState) -> RuntimeRecord<'static> {
        RuntimeRecord::Job(JobRecord {
            state,
            reason: None,
            lease_live: false,
            attempts: 1,
        })
    }

    fn with(record: RuntimeRecord<'static>, reason: &'static str) -> RuntimeRecord<'static> {
        match record {
            RuntimeRecord::Job(job) => RuntimeRecord::Job(JobRecord {
                reason: Some(reason),
                ..job
            }),
            other => other,
        }
    }

    fn live(record: RuntimeRecord<'static>) -> RuntimeRecord<'static> {
        match record {
            RuntimeRecord::Job(job) => RuntimeRecord::Job(JobRecord {
                lease_live: true,
                ..job
            }),
            other => other,
        }
    }

    const LISTENING: RuntimeRecord<'static> = RuntimeRecord::NoJob {
        will_consider: true,
    };
    const DEAF: RuntimeRecord<'static> = RuntimeRecord::NoJob {
        will_consider: false,
    };

    #[test]
    fn a_recipient_s_state_table() {
        use DeliveryState::*;
        let reply = Some(Uuid::from_u128(7));
        type Row = (
            &'static str,
            Option<Uuid>,
            bool,
            Vec<RuntimeRecord<'static>>,
            (DeliveryState, Option<&'static str>, u32),
        );
        let table: Vec<Row> = vec![
            (
                "no runtime: nobody listens yet",
                None,
                false,
                vec![],
                (Queued, None, 0),
            ),
            (
                "a runtime that passed the message never takes it",
                None,
                false,
                vec![DEAF],
                (Queued, None, 0),
            ),
            (
                "a runtime yet to scan it",
                None,
                false,
                vec![LISTENING],
                (Queued, None, 1),
            ),
            (
                "pending",
                None,
                false,
                vec![job(JobState::Pending)],
                (Queued, None, 1),
            ),
            (
                "held under a live lease",
                None,
                false,
                vec![live(job(JobState::Claimed))],
                (Working, None, 1),
            ),
            (
                "a lease that ran out waits for the next",
                None,
                false,
                vec![job(JobState::Claimed)],
                (Queued, None, 1),
            ),
            (
                "a dead letter",
                None,
                false,
                vec![job(JobState::Dead)],
                (Failed, Some(ATTEMPTS_EXHAUSTED), 1),
            ),
            (
                "a policy skip shows its code",
                None,
                false,
                vec![with(job(JobState::Skipped), "deadline_passed")],
                (Rejected, Some("deadline_passed"), 1),
            ),
            (
                "a handler's skip never shows its text",
                None,
                false,
                vec![with(job(JobState::Skipped), "my secret policy says no")],
                (Rejected, Some(HANDLER_SKIPPED), 1),
            ),
            (
                "a skip by cancel",
                None,
                false,
                vec![with(job(JobState::Skipped), "canceled")],
                (Canceled, None, 1),
            ),
            (
                "handled without a reply",
                None,
                false,
                vec![job(JobState::Handled)],
                (Rejected, Some(NO_REPLY), 1),
            ),
            (
                "handled with a reply",
                reply,
                false,
                vec![job(JobState::Handled)],
                (Answered, None, 1),
            ),
            (
                "a reply written by hand answers too",
                reply,
                false,
                vec![],
                (Answered, None, 0),
            ),
            (
                "working beats queued beats failed beats rejected",
                None,
                false,
                vec![
                    with(job(JobState::Skipped), "room_not_allowed"),
                    job(JobState::Dead),
                    job(JobState::Pending),
                    live(job(JobState::Claimed)),
                ],
                (Working, None, 4),
            ),
            (
                "failed beats rejected",
                None,
                false,
                vec![
                    with(job(JobState::Skipped), "sender_not_allowed"),
                    job(JobState::Dead),
                ],
                (Failed, Some(ATTEMPTS_EXHAUSTED), 2),
            ),
            (
                "canceled: what waited is canceled",
                None,
                true,
                vec![job(JobState::Pending), LISTENING],
                (Canceled, None, 2),
            ),
            (
                "canceled beats an earlier dead letter",
                None,
                true,
                vec![
                    job(JobState::Dead),
                    with(job(JobState::Skipped), "canceled"),
                ],
                (Canceled, None, 2),
            ),
            (
                "canceled with nobody listening",
                None,
                true,
                vec![],
                (Canceled, None, 0),
            ),
            (
                "an answer stays an answer after a cancel",
                reply,
                true,
                vec![job(JobState::Pending)],
                (Answered, None, 1),
            ),
        ];
        for (name, reply, canceled, runtimes, (state, reason, listeners)) in table {
            let view = recipient(&RecipientFacts {
                reply,
                canceled,
                runtimes,
            });
            assert_eq!(
                (view.state, view.reason, view.listeners),
                (state, reason, listeners),
                "{name}"
            );
            assert_eq!(view.reply, reply, "{name}");
        }
    }

    #[test]
    fn attempts_add_up_over_runtimes() {
        let two = |attempts| {
            RuntimeRecord::Job(JobRecord {
                state: JobState::Dead,
                reason: None,
                lease_live: false,
                attempts,
            })
        };
        let view = recipient(&RecipientFacts {
            reply: None,
            canceled: false,
            runtimes: vec![two(3), two(2), LISTENING],
        });
        assert_eq!(view.attempts, 5);
    }

    #[test]
    fn the_summary_table() {
        use DeliveryState::*;
        let table: [(&[DeliveryState], bool, DeliveryState); 7] = [
            (&[], false, Queued),
            (&[], true, Canceled),
            (&[Rejected, Failed], false, Failed),
            (&[Rejected, Queued], false, Queued),
            (&[Queued, Answered, Working], false, Answered),
            (&[Canceled, Rejected], true, Canceled),
            (&[Rejected, Rejected], false, Rejected),
        ];
        for (recipients, canceled, expected) in table {
            assert_eq!(summary(recipients, canceled), expected, "{recipients:?}");
        }
    }

    #[test]
    fn each_state_s_name_is_its_wire_name() {
        use DeliveryState::*;
        for state in [Queued, Working, Answered, Failed, Rejected, Canceled] {
            assert_eq!(
                serde_json::to_value(state).expect("json"),
                serde_json::json!(state.as_str())
            );
        }
    }

    #[test]
    fn only_failed_rejected_and_canceled_end_a_question_unanswered() {
        use DeliveryState::*;
        for (state, ended) in [
            (Queued, false),
            (Working, false),
            (Answered, false),
            (Failed, true),
            (Rejected, true),
            (Canceled, true),
        ] {
            assert_eq!(state.is_unanswered_end(), ended, "{state:?}");
        }
    }
}
