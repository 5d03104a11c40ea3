//! Whether other server instances may be listening, so that an instance
//! alone on its database skips the NOTIFYs that tell other instances about
//! its writes (its own sockets are woken directly; a NOTIFY nobody else
//! hears is a transaction and a wake-up of its own listener for nothing).
//!
//! Every instance's listener announces itself on a shared channel when it
//! subscribes and at each of its pings, so instances hear each other at
//! least once per ping interval. An instance tells others about its writes
//! while it cannot hear (its listener is down), during the first `window`
//! after its listener (re)subscribed (peers' pings may not have come yet),
//! and for `window` after it last heard another instance. A NOTIFY is a
//! hint either way: sockets that reconnect and the workers' fallback polls
//! cover one that was not sent.
//!
//! Times are monotonic durations since any fixed start the caller keeps.

use std::time::Duration;

/// How long one hearing of another instance counts, in ping intervals: a
/// peer whose pings are late or lost twice in a row still counts.
pub const PEER_WINDOW_PINGS: u32 = 3;

/// What an instance knows of other instances on its database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerPresence {
    window: Duration,
    /// Since when the listener is subscribed; `None` while it is down.
    listening_since: Option<Duration>,
    /// When another instance was last heard.
    last_heard: Option<Duration>,
}

impl PeerPresence {
    /// No listener yet: others are assumed to be there. `ping_every` is the
    /// listener's ping interval; a hearing counts for
    /// [`PEER_WINDOW_PINGS`] of them.
    pub fn new(ping_every: Duration) -> PeerPresence {
        PeerPresence {
            window: ping_every.saturating_mul(PEER_WINDOW_PINGS),
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
        let recent = |at: Duration| now.saturating_sub(at) < self.window;
        match self.listening_since {
            None => true,
            Some(since) => recent(since) || self.last_heard.is_some_and(recent),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instance_notifies_unless_it_has_listened_a_whole_window_and_heard_no_one() {
        let ping = Duration::from_secs(10);
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
                name: "just subscribed, no one heard yet",
                listening_since: Some(100),
                heard: None,
                now: 100 + window.as_secs() - 1,
                notify: true,
            },
            Case {
                name: "a whole window subscribed, no one heard",
                listening_since: Some(100),
                heard: None,
                now: 100 + window.as_secs(),
                notify: false,
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
            let mut presence = PeerPresence::new(ping);
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
        let t0 = Duration::from_secs(7);
        let mut presence = PeerPresence::new(ping);
        presence.listening(t0);
        let alone = t0 + ping * PEER_WINDOW_PINGS;
        assert!(!presence.others_may_listen(alone));
        presence.lost();
        assert!(presence.others_may_listen(alone));
        presence.listening(alone);
        assert!(presence.others_may_listen(alone + ping));
        presence.heard(alone + ping);
        assert!(presence.others_may_listen(alone + ping * PEER_WINDOW_PINGS));
        assert!(!presence.others_may_listen(alone + ping * (PEER_WINDOW_PINGS + 1)));
    }
}
