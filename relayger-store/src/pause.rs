//! Named pause points inside store transactions, so a test can force one
//! interleaving of two transactions (a registration and a send, a join and
//! a scan) instead of hoping a race goes the bad way.
//!
//! Only this crate's own test build (`cfg(test)`) holds a transaction at a
//! point; everywhere else — every build of a crate that depends on this one,
//! whatever its features — a pause point is an empty function. The tests
//! that arm them are this crate's unit tests (`races_tests`), which call
//! [`Store`](crate::Store) directly.

use uuid::Uuid;

/// Where a transaction may be held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum PausePoint {
    /// A registration has read the agent's rooms and their last seqs
    /// (keyed by the agent's identity id).
    RegisterAfterRooms,
    /// A join has marked the room and written the membership, before its
    /// transaction commits (keyed by the joining identity's id).
    JoinBeforeCommit,
    /// A claim's first flight has answered: its scan has read whether the
    /// agent is a member of its changed rooms and written what it found,
    /// holding their room locks, and its first candidate round has run,
    /// before the claim goes on — or, for a runtime that is not the
    /// caller's, before it rolls back (keyed by the runtime id).
    ScanAfterMembership,
    /// An accept has found the request and no block, before it makes the
    /// contact active (keyed by the accepting identity's id).
    AcceptAfterBlockCheck,
}

/// Holds the transaction that reaches `point` for `key`, if a test armed it.
#[cfg(test)]
pub(crate) async fn pause(point: PausePoint, key: Uuid) {
    armed::hold(point, key).await;
}

/// Outside this crate's tests, nothing is held.
#[cfg(not(test))]
#[allow(clippy::unused_async)]
pub(crate) async fn pause(point: PausePoint, key: Uuid) {
    let _ = (point, key);
}

#[cfg(test)]
pub(crate) mod armed {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};

    use tokio::sync::oneshot;
    use uuid::Uuid;

    use super::PausePoint;

    type Gate = (oneshot::Sender<()>, oneshot::Receiver<()>);

    fn gates() -> &'static Mutex<HashMap<(PausePoint, Uuid), Gate>> {
        static GATES: OnceLock<Mutex<HashMap<(PausePoint, Uuid), Gate>>> = OnceLock::new();
        GATES.get_or_init(Default::default)
    }

    pub(super) async fn hold(point: PausePoint, key: Uuid) {
        let gate = gates()
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&(point, key));
        if let Some((reached, release)) = gate {
            // This line is how a binary shows it holds the pause points
            // (relayger_testdb::has_pause_points): keep the words.
            tracing::debug!(?point, %key, "relayger-store: a transaction is held at a pause point");
            let _ = reached.send(());
            // A dropped handle releases too: a failing test never hangs here.
            let _ = release.await;
        }
    }

    /// A pause armed by a test: the next transaction to reach the point for
    /// the key stops there until [`Paused::release`] (or drop).
    #[derive(Debug)]
    pub(crate) struct Paused {
        point: PausePoint,
        reached: Option<oneshot::Receiver<()>>,
        release: Option<oneshot::Sender<()>>,
    }

    impl Paused {
        /// Arms `point` for `key` (once).
        pub(crate) fn arm(point: PausePoint, key: Uuid) -> Paused {
            let (reached_tx, reached_rx) = oneshot::channel();
            let (release_tx, release_rx) = oneshot::channel();
            gates()
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert((point, key), (reached_tx, release_rx));
            Paused {
                point,
                reached: Some(reached_rx),
                release: Some(release_tx),
            }
        }

        /// Waits until a transaction is held at the point.
        ///
        /// # Panics
        /// When none arrives within `timeout`.
        pub(crate) async fn reached(&mut self, timeout: std::time::Duration) {
            let reached = self.reached.take().expect("reached() is awaited once");
            let point = self.point;
            tokio::time::timeout(timeout, reached)
                .await
                .unwrap_or_else(|_| panic!("no transaction reached {point:?} in time"))
                .expect("the pause point was dropped");
        }

        /// Lets the held transaction go on.
        pub(crate) fn release(&mut self) {
            if let Some(release) = self.release.take() {
                let _ = release.send(());
            }
        }
    }

    /// A build with the pause points shows it (the check the end-to-end
    /// tests make of the shipped binaries would see them).
    #[test]
    fn a_build_with_pause_points_shows_it() {
        let exe = std::env::current_exe().expect("current_exe");
        assert!(
            relayger_testdb::has_pause_points(&exe).expect("read the test binary"),
            "{} does not show its pause points",
            exe.display()
        );
    }
}
