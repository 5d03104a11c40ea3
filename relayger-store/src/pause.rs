//! Named pause points inside store transactions, so a test can force one
//! interleaving of two transactions (a registration and a send, a join and
//! a scan) instead of hoping a race goes the bad way. Without the
//! `test-support` feature a pause point compiles to nothing.

use uuid::Uuid;

/// Where a transaction may be held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PausePoint {
    /// A registration has read the agent's rooms and their last seqs
    /// (keyed by the agent's identity id).
    RegisterAfterRooms,
    /// A join has marked the room and written the membership, before its
    /// transaction commits (keyed by the joining identity's id).
    JoinBeforeCommit,
    /// A claim's scan has read whether the agent is a member of its changed
    /// rooms and written what it found, holding their room locks, before
    /// the claim goes on (keyed by the runtime id).
    ScanAfterMembership,
    /// An accept has found the request and no block, before it makes the
    /// contact active (keyed by the accepting identity's id).
    AcceptAfterBlockCheck,
}

/// Holds the transaction that reaches `point` for `key`, if a test armed it.
#[cfg_attr(not(feature = "test-support"), allow(clippy::unused_async))]
pub(crate) async fn pause(point: PausePoint, key: Uuid) {
    #[cfg(feature = "test-support")]
    armed::hold(point, key).await;
    #[cfg(not(feature = "test-support"))]
    let _ = (point, key);
}

#[cfg(feature = "test-support")]
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

    pub(crate) async fn hold(point: PausePoint, key: Uuid) {
        let gate = gates()
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&(point, key));
        if let Some((reached, release)) = gate {
            let _ = reached.send(());
            // A dropped handle releases too: a failing test never hangs here.
            let _ = release.await;
        }
    }

    /// A pause armed by a test: the next transaction to reach the point for
    /// the key stops there until [`Paused::release`] (or drop).
    #[derive(Debug)]
    pub struct Paused {
        reached: Option<oneshot::Receiver<()>>,
        release: Option<oneshot::Sender<()>>,
    }

    impl Paused {
        /// Arms `point` for `key` (once).
        pub fn arm(point: PausePoint, key: Uuid) -> Paused {
            let (reached_tx, reached_rx) = oneshot::channel();
            let (release_tx, release_rx) = oneshot::channel();
            gates()
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert((point, key), (reached_tx, release_rx));
            Paused {
                reached: Some(reached_rx),
                release: Some(release_tx),
            }
        }

        /// Waits until a transaction is held at the point.
        ///
        /// # Panics
        /// When none arrives within `timeout`.
        pub async fn reached(&mut self, timeout: std::time::Duration) {
            let reached = self.reached.take().expect("reached() is awaited once");
            tokio::time::timeout(timeout, reached)
                .await
                .expect("no transaction reached the pause point in time")
                .expect("the pause point was dropped");
        }

        /// Lets the held transaction go on.
        pub fn release(&mut self) {
            if let Some(release) = self.release.take() {
                let _ = release.send(());
            }
        }
    }
}
