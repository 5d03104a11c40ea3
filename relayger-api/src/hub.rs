//! Wake signals inside one server process, fed by LISTEN/NOTIFY so that
//! several instances sharing a database wake each other's sockets.
//!
//! Commit → outbox row → dispatcher → NOTIFY → every instance's listener →
//! `Hub::wake` → the sockets of those identities. A poke after each write
//! keeps the path short; a periodic pass dispatches anything left behind.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use relayger_store::Store;
use relayger_store::listen::{Announcement, ListenOptions, listen};
use tokio::sync::{Notify, broadcast, mpsc, watch};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// How often leftover outbox rows are dispatched without a poke.
const DISPATCH_INTERVAL: Duration = Duration::from_secs(2);

/// What a subscriber hears.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HubSignal {
    InboxChanged,
    TokenRevoked(Uuid),
}

#[derive(Debug)]
struct HubInner {
    identities: Mutex<HashMap<Uuid, broadcast::Sender<HubSignal>>>,
    dispatch: Notify,
    /// True once the LISTEN connection has subscribed.
    listening: watch::Sender<bool>,
}

impl Default for HubInner {
    fn default() -> Self {
        HubInner {
            identities: Mutex::default(),
            dispatch: Notify::new(),
            listening: watch::channel(false).0,
        }
    }
}

/// Cheap to clone; shared by every handler of the process.
#[derive(Debug, Clone, Default)]
pub(crate) struct Hub {
    inner: Arc<HubInner>,
}

impl Hub {
    /// Subscribes to an identity's signals.
    pub(crate) fn subscribe(&self, identity: Uuid) -> broadcast::Receiver<HubSignal> {
        let mut map = self
            .inner
            .identities
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        map.entry(identity)
            .or_insert_with(|| broadcast::channel(16).0)
            .subscribe()
    }

    /// Drops channels nobody listens to any more.
    pub(crate) fn prune(&self, identity: Uuid) {
        let mut map = self
            .inner
            .identities
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if map
            .get(&identity)
            .is_some_and(|tx| tx.receiver_count() == 0)
        {
            map.remove(&identity);
        }
    }

    fn send(&self, identity: Uuid, signal: HubSignal) {
        let map = self
            .inner
            .identities
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(tx) = map.get(&identity) {
            let _ = tx.send(signal);
        }
    }

    fn broadcast_all(&self, signal: HubSignal) {
        let map = self
            .inner
            .identities
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        for tx in map.values() {
            let _ = tx.send(signal);
        }
    }

    /// Resolves once this process receives NOTIFYs from the database.
    pub(crate) async fn wait_until_listening(&self) {
        let mut rx = self.inner.listening.subscribe();
        let _ = rx.wait_for(|listening| *listening).await;
    }

    /// Asks the dispatcher to run now (after a commit that wrote the outbox).
    pub(crate) fn poke_dispatcher(&self) {
        self.inner.dispatch.notify_one();
    }

    fn apply(&self, announcement: Announcement) {
        match announcement {
            Announcement::InboxChanged(ids) => {
                for id in ids {
                    self.send(id, HubSignal::InboxChanged);
                }
            }
            Announcement::TokenRevoked(token) => self.broadcast_all(HubSignal::TokenRevoked(token)),
            // Anything may have been missed while disconnected.
            Announcement::Listening => {
                self.inner.listening.send_replace(true);
                self.broadcast_all(HubSignal::InboxChanged);
            }
        }
    }

    /// Runs the dispatcher and the listener until `cancel` fires.
    pub(crate) fn spawn_background(
        &self,
        store: Store,
        listen_options: ListenOptions,
        cancel: CancellationToken,
    ) {
        let hub = self.clone();
        let dispatcher_store = store.clone();
        let dispatcher_cancel = cancel.clone();
        tokio::spawn(async move {
            loop {
                loop {
                    match dispatcher_store.dispatch_outbox().await {
                        Ok(0) => break,
                        Ok(_) => {}
                        Err(err) => {
                            tracing::warn!(%err, "outbox dispatch failed");
                            break;
                        }
                    }
                }
                tokio::select! {
                    () = dispatcher_cancel.cancelled() => return,
                    () = hub.inner.dispatch.notified() => {}
                    () = tokio::time::sleep(DISPATCH_INTERVAL) => {}
                }
            }
        });

        let hub = self.clone();
        let (tx, mut rx) = mpsc::channel(256);
        let listener = tokio::spawn(listen(store.listen_url().to_owned(), listen_options, tx));
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = cancel.cancelled() => break,
                    announcement = rx.recv() => match announcement {
                        Some(announcement) => hub.apply(announcement),
                        None => break,
                    },
                }
            }
            listener.abort();
        });
    }
}
