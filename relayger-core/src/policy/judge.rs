//! The per-job judgement at claim time: whether the current policy lets a
//! pending job be granted, and if not, why (the recorded skip reason).

use std::fmt;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use uuid::Uuid;

use super::{MessageFacts, Policy};
use crate::ids::IdentityNumber;

/// What the claim knows about one pending job when it judges it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobFacts {
    /// The asker canceled the question.
    pub canceled: bool,
    /// The agent is still a member of the job's room.
    pub member: bool,
    /// The agent and the sender have blocked one another (either way).
    pub sender_blocked: bool,
    /// The job's room.
    pub room_id: Uuid,
    /// The sender's number; `None` when the stored text is not one (then
    /// no allow-list can name it).
    pub sender: Option<IdentityNumber>,
    /// What decides whether the policy triggers on the message.
    pub message: MessageFacts,
    /// The question's deadline, if it has one.
    pub deadline: Option<OffsetDateTime>,
}

/// Why the current policy refuses a pending job; stored as the skipped
/// job's reason and in its log record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// The asker canceled the question (`DELETE …/ask`).
    Canceled,
    /// The agent left the room (or was removed) since the message came.
    AccessLost,
    /// The agent and the sender have blocked one another.
    SenderBlocked,
    /// The room is not in `allowedRooms`.
    RoomNotAllowed,
    /// The sender is not in `allowedSenders`.
    SenderNotAllowed,
    /// The (new) triggers do not match the message.
    NotTriggered,
    /// The question's deadline passed before a worker could take it.
    DeadlinePassed,
}

impl SkipReason {
    /// Every reason, in the order [`Policy::judge`] checks them.
    pub const ALL: [SkipReason; 7] = [
        SkipReason::Canceled,
        SkipReason::AccessLost,
        SkipReason::SenderBlocked,
        SkipReason::RoomNotAllowed,
        SkipReason::SenderNotAllowed,
        SkipReason::NotTriggered,
        SkipReason::DeadlinePassed,
    ];

    /// The stored and logged name.
    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::Canceled => "canceled",
            SkipReason::AccessLost => "access_lost",
            SkipReason::SenderBlocked => "sender_blocked",
            SkipReason::RoomNotAllowed => "room_not_allowed",
            SkipReason::SenderNotAllowed => "sender_not_allowed",
            SkipReason::NotTriggered => "not_triggered",
            SkipReason::DeadlinePassed => "deadline_passed",
        }
    }
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Policy {
    /// Whether a pending job may be granted at database time `now`. Access
    /// and blocks come first (they hold whatever the policy says), then the
    /// policy's own lists and triggers, then the deadline: the first reason
    /// that applies is the one recorded.
    pub fn judge(&self, facts: &JobFacts, now: OffsetDateTime) -> Result<(), SkipReason> {
        if facts.canceled {
            return Err(SkipReason::Canceled);
        }
        if !facts.member {
            return Err(SkipReason::AccessLost);
        }
        if facts.sender_blocked {
            return Err(SkipReason::SenderBlocked);
        }
        if !self.room_allowed(&facts.room_id) {
            return Err(SkipReason::RoomNotAllowed);
        }
        if !facts
            .sender
            .as_ref()
            .is_some_and(|sender| self.sender_allowed(sender))
        {
            return Err(SkipReason::SenderNotAllowed);
        }
        if !self.triggers_on(&facts.message) {
            return Err(SkipReason::NotTriggered);
        }
        if facts.deadline.is_some_and(|deadline| deadline <= now) {
            return Err(SkipReason::DeadlinePassed);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::super::Trigger;
    use super::*;

    const NOW: OffsetDateTime = datetime!(2026-10-02 12:00:00 UTC);

    fn number(text: &str) -> IdentityNumber {
        IdentityNumber::parse(text).expect("valid number")
    }

    #[test]
    fn judge_table() {
        let room = Uuid::from_u128(1);
        let other_room = Uuid::from_u128(2);
        let sender = number("100000000001");
        let stranger = number("100000000002");
        let ask = MessageFacts {
            from_self: false,
            ask: true,
            by_runtime: false,
        };
        let good = JobFacts {
            canceled: false,
            member: true,
            sender_blocked: false,
            room_id: room,
            sender: Some(sender.clone()),
            message: ask,
            deadline: None,
        };
        let strict = Policy {
            allowed_rooms: vec![room],
            allowed_senders: vec![sender.clone()],
            ..Policy::default()
        };
        let messages = Policy {
            triggers: vec![Trigger::Messages],
            ..Policy::default()
        };
        let open = Policy::default();
        let table: Vec<(&str, &Policy, JobFacts, Result<(), SkipReason>)> = vec![
            ("granted", &strict, good.clone(), Ok(())),
            (
                "canceled, left the room, past its deadline: canceled first",
                &strict,
                JobFacts {
                    canceled: true,
                    member: false,
                    deadline: Some(NOW),
                    ..good.clone()
                },
                Err(SkipReason::Canceled),
            ),
            (
                "left the room, blocked too: access first",
                &strict,
                JobFacts {
                    member: false,
                    sender_blocked: true,
                    ..good.clone()
                },
                Err(SkipReason::AccessLost),
            ),
            (
                "blocked, in a room the policy refuses: block first",
                &strict,
                JobFacts {
                    sender_blocked: true,
                    room_id: other_room,
                    ..good.clone()
                },
                Err(SkipReason::SenderBlocked),
            ),
            (
                "room refused, sender refused: room first",
                &strict,
                JobFacts {
                    room_id: other_room,
                    sender: Some(stranger.clone()),
                    ..good.clone()
                },
                Err(SkipReason::RoomNotAllowed),
            ),
            (
                "open rooms take any room",
                &open,
                JobFacts {
                    room_id: other_room,
                    ..good.clone()
                },
                Ok(()),
            ),
            (
                "sender not listed",
                &strict,
                JobFacts {
                    sender: Some(stranger),
                    ..good.clone()
                },
                Err(SkipReason::SenderNotAllowed),
            ),
            (
                "an unreadable sender is never allowed, even by an open list",
                &open,
                JobFacts {
                    sender: None,
                    ..good.clone()
                },
                Err(SkipReason::SenderNotAllowed),
            ),
            (
                "not a question for a questions policy",
                &open,
                JobFacts {
                    message: MessageFacts { ask: false, ..ask },
                    ..good.clone()
                },
                Err(SkipReason::NotTriggered),
            ),
            (
                "a bot's reply never triggers messages",
                &messages,
                JobFacts {
                    message: MessageFacts {
                        ask: false,
                        by_runtime: true,
                        from_self: false,
                    },
                    ..good.clone()
                },
                Err(SkipReason::NotTriggered),
            ),
            (
                "the agent's own question",
                &open,
                JobFacts {
                    message: MessageFacts {
                        from_self: true,
                        ..ask
                    },
                    ..good.clone()
                },
                Err(SkipReason::NotTriggered),
            ),
            (
                "deadline exactly now has passed",
                &open,
                JobFacts {
                    deadline: Some(NOW),
                    ..good.clone()
                },
                Err(SkipReason::DeadlinePassed),
            ),
            (
                "deadline a millisecond ahead",
                &open,
                JobFacts {
                    deadline: Some(NOW + time::Duration::milliseconds(1)),
                    ..good.clone()
                },
                Ok(()),
            ),
            (
                "not triggered and past its deadline: trigger first",
                &open,
                JobFacts {
                    message: MessageFacts { ask: false, ..ask },
                    deadline: Some(NOW - time::Duration::hours(1)),
                    ..good
                },
                Err(SkipReason::NotTriggered),
            ),
        ];
        for (name, policy, facts, expected) in table {
            assert_eq!(policy.judge(&facts, NOW), expected, "{name}");
        }
    }

    #[test]
    fn reason_names() {
        for reason in SkipReason::ALL {
            let json = serde_json::to_string(&reason).expect("serialize");
            assert_eq!(json, format!("\"{reason}\""));
        }
        let names: std::collections::HashSet<_> =
            SkipReason::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(names.len(), SkipReason::ALL.len());
    }
}
