//! Whether other server instances may be listening, so that an instance
//! alone on its database skips the NOTIFYs that tell other instances about
//! its writes (its own sockets are woken directly; a NOTIFY nobody else
//! hears is a transaction and a wake-up of its own listener for nothing).
//!
//! Every instance's listener announces itself on a shared channel at each
//! of its pings, so instances hear each other at least once per ping
//! interval. Its first ping after it subscribes is a hello, which every
//! listening instance answers at once with a ping of its own, so a new
//! instance need not wait a ping interval to learn it has company. An
//! instance tells others about its writes while it cannot hear (its
//! listener is down), for `answer_within` after its listener (re)subscribed
//! (the answers to its hello may still be on their way), and for three ping
//! intervals after it last heard another instance. A NOTIFY is a hint
//! either way: sockets that reconnect and the workers' fallback polls cover
//! one that was not sent.
//!
//! Times are monotonic durations since any fixed start the caller keeps.

use std::time::Duration;

/// How long one hearing of another instance counts, in ping intervals: a
/// peer whose pings are late or lost twice in a row still counts.
pub const PEER_WINDOW_PINGS: u32 = 3;

/// What an instance knows of other instances on its database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerPresence {
    /// How long one hearing of another instance counts.
    window: Duration,
    /// How long after subscribing the answers to the hello may take.
    answer_within: Duration,
    /// Since when the listener is subscribed; `None` while it is down.
    listening_since: Option<Duration>,
    /// When another instance was last heard.
    last_heard: Option<Duration>,
}

impl PeerPresence {
    /// No listener yet: others are assumed to be there. `ping_every` is the
    /// listener's ping interval; a hearing counts for
    /// [`PEER_WINDOW_PINGS`] of them. `answer_within` is how long after
    /// subscribing this instance waits for answers to its hello before it
    /// counts itself alone (never longer than a hearing counts).
    pub fn new(ping_every: Duration, answer_within: Duration) -> PeerPresence {
        let window = ping_every.saturating_mul(PEER_WINDOW_PINGS);
        PeerPresence {
            window,
            answer_within: answer_within.min(window),
            listening_since: None,
            last_heard: None,
        }
    }

    /// The listener (re)subscribed at `now`.
    pub fn listening(&mut self, now: Duration) {
        self.listening_since = Some(now);
    }

    /// The listener is down: nothing can be heard until it is back.
    pub fn lost(&mut self) {
        self.listening_since = None;
    }

    /// Another instance was heard at `now` (its ping or its NOTIFY).
    pub fn heard(&mut self, now: Duration) {
        self.last_heard = Some(now);
    }

    /// Whether this instance should NOTIFY other instances at `now`.
    pub fn others_may_listen(&self, now: Duration) -> bool {
        let within = |at: Duration, span: Duration| now.saturating_sub(at) < span;
        match self.listening_since {
            None => true,
            Some(since) => {
                within(since, self.answer_within)
                    || self.last_heard.is_some_and(|at| within(at, self.window))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instance_notifies_unless_its_hello_went_unanswered_and_no_one_was_heard_since() {
        let ping = Duration::from_secs(10);
        let answer = Duration::from_secs(2);
        let window = ping * PEER_WINDOW_PINGS;
        let secs = Duration::from_secs;
        struct Case {
            name: &'static str,
            listening_since: Option<u64>,
            heard: Option<u64>,
            now: u64,
            notify: bool,
        }
        let cases = [
            Case {
                name: "no listener yet",
                listening_since: None,
                heard: None,
                now: 1000,
                notify: true,
            },
            Case {
                name: "listener down, no one heard for long",
                listening_since: None,
                heard: Some(0),
                now: 1000,
                notify: true,
            },
            Case {
                name: "just subscribed, the answers may still come",
                listening_since: Some(100),
                heard: None,
                now: 100 + answer.as_secs() - 1,
                notify: true,
            },
            Case {
                name: "subscribed, the hello unanswered",
                listening_since: Some(100),
                heard: None,
                now: 100 + answer.as_secs(),
                notify: false,
            },
            Case {
                name: "the hello answered",
                listening_since: Some(100),
                heard: Some(101),
                now: 100 + window.as_secs(),
                notify: true,
            },
            Case {
                name: "a peer heard within the window",
                listening_since: Some(0),
                heard: Some(500),
                now: 500 + window.as_secs() - 1,
                notify: true,
            },
            Case {
                name: "the peer's last hearing is a window old",
                listening_since: Some(0),
                heard: Some(500),
                now: 500 + window.as_secs(),
                notify: false,
            },
        ];
        for case in cases {
            let mut presence = PeerPresence::new(ping, answer);
            if let Some(since) = case.listening_since {
                presence.listening(secs(since));
            }
            if let Some(heard) = case.heard {
                presence.heard(secs(heard));
            }
            assert_eq!(
                presence.others_may_listen(secs(case.now)),
                case.notify,
                "{}",
                case.name
            );
        }
    }

    #[test]
    fn losing_the_listener_means_notifying_again_and_a_resubscription_restarts_the_window() {
        let ping = Duration::from_secs(10);
        let answer = Duration::from_secs(1);
        let t0 = Duration::from_secs(7);
        let mut presence = PeerPresence::new(ping, answer);
        presence.listening(t0);
        let alone = t0 + answer;
        assert!(!presence.others_may_listen(alone));
        presence.lost();
        assert!(presence.others_may_listen(alone));
        presence.listening(alone);
        assert!(presence.others_may_listen(alone + answer / 2));
        assert!(!presence.others_may_listen(alone + answer));
        presence.heard(alone + ping);
        assert!(presence.others_may_listen(alone + ping * PEER_WINDOW_PINGS));
        assert!(!presence.others_may_listen(alone + ping * (PEER_WINDOW_PINGS + 1)));
    }

    #[test]
    fn the_wait_for_answers_is_never_longer_than_a_hearing_counts() {
        let ping = Duration::from_secs(1);
        let mut presence = PeerPresence::new(ping, Duration::from_secs(60));
        presence.listening(Duration::ZERO);
        assert!(presence.others_may_listen(ping * PEER_WINDOW_PINGS - Duration::from_millis(1)));
        assert!(!presence.others_may_listen(ping * PEER_WINDOW_PINGS));
    }
}
