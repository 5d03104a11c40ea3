//! Wake signals inside one server process, fed by LISTEN/NOTIFY so that
//! several instances sharing a database wake each other's sockets.
//!
//! Commit → the store's wake bus → this instance's sockets at once, and a
//! queue → one coalesced NOTIFY (on a connection of its own) → the other
//! instances' listeners → their sockets. A listener skips the NOTIFYs of its
//! own instance.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use relayger_store::Store;
use relayger_store::listen::{Announcement, ListenOptions, listen};
use relayger_store::wake::Notifier;
use tokio::sync::{Notify, broadcast, mpsc, watch};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::token_cache::TokenCache;

/// What a subscriber hears.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HubSignal {
    InboxChanged,
    TokenRevoked(Uuid),
}

#[derive(Debug)]
struct HubInner {
    identities: Mutex<HashMap<Uuid, broadcast::Sender<HubSignal>>>,
    /// Identities to NOTIFY other instances about, and its signal.
    pending: Mutex<Vec<Uuid>>,
    notify: Notify,
    /// True once the LISTEN connection has subscribed.
    listening: watch::Sender<bool>,
    tokens: TokenCache,
}

impl Default for HubInner {
    fn default() -> Self {
        HubInner {
            identities: Mutex::default(),
            pending: Mutex::default(),
            notify: Notify::new(),
            listening: watch::channel(false).0,
            tokens: TokenCache::default(),
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

    /// Recently authenticated tokens, kept true by the revocations heard.
    pub(crate) fn tokens(&self) -> &TokenCache {
        &self.inner.tokens
    }

    /// A token of this instance was revoked (its NOTIFY follows for the
    /// other instances): forget it and close its sockets now.
    pub(crate) fn token_revoked(&self, token: Uuid) {
        self.inner.tokens.revoked(token);
        self.broadcast_all(HubSignal::TokenRevoked(token));
    }

    fn apply(&self, announcement: Announcement) {
        match announcement {
            Announcement::InboxChanged(ids) => {
                for id in ids {
                    self.send(id, HubSignal::InboxChanged);
                }
            }
            Announcement::TokenRevoked(token) => self.token_revoked(token),
            // Anything may have been missed while disconnected.
            Announcement::Listening => {
                self.inner.tokens.set_listening(true);
                self.inner.listening.send_replace(true);
                self.broadcast_all(HubSignal::InboxChanged);
            }
            // Revocations are not heard until it is back.
            Announcement::Lost => self.inner.tokens.set_listening(false),
        }
    }

    /// Wakes this process's sockets for every committed write, tells the
    /// other instances with coalesced NOTIFYs, and relays what they
    /// announce, until `cancel` fires.
    pub(crate) fn spawn_background(
        &self,
        store: Store,
        listen_options: ListenOptions,
        cancel: CancellationToken,
    ) {
        // Names this instance in its NOTIFYs, so its listener skips them.
        let origin = Uuid::new_v4();
        let mut wakes = store.subscribe_wakes();
        let hub = self.clone();
        let wake_cancel = cancel.clone();
        tokio::spawn(async move {
            loop {
                let ids = tokio::select! {
                    () = wake_cancel.cancelled() => return,
                    ids = wakes.recv() => ids,
                };
                match ids {
                    Ok(ids) => {
                        for id in ids.iter() {
                            hub.send(*id, HubSignal::InboxChanged);
                        }
                        hub.queue_notify(&ids);
                    }
                    Err(broadcast::error::RecvError::Lagged(missed)) => {
                        // Which identities is unknown: wake every local
                        // socket; other instances fall back on their polls.
                        tracing::warn!(missed, "wake bus lagged; waking every socket");
                        hub.broadcast_all(HubSignal::InboxChanged);
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
        });

        let hub = self.clone();
        let notify_cancel = cancel.clone();
        let mut notifier = Notifier::new(store.database_url(), origin);
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = notify_cancel.cancelled() => return,
                    () = hub.inner.notify.notified() => {}
                }
                // Everything queued while the previous NOTIFY was in flight
                // goes in this one: one NOTIFY per batch, no timer.
                let mut ids = std::mem::take(
                    &mut *hub.inner.pending.lock().unwrap_or_else(|e| e.into_inner()),
                );
                ids.sort();
                ids.dedup();
                if ids.is_empty() {
                    continue;
                }
                if let Err(err) = notifier.inbox_changed(&ids).await {
                    // A hint lost: other instances' sockets and workers
                    // still have their fallback polls.
                    tracing::warn!(%err, "inbox NOTIFY failed");
                }
            }
        });

        let hub = self.clone();
        let (tx, mut rx) = mpsc::channel(256);
        let listener = tokio::spawn(listen(
            store.listen_url().to_owned(),
            listen_options,
            origin,
            tx,
        ));
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

    /// Queues identities for the next NOTIFY to other instances.
    fn queue_notify(&self, ids: &[Uuid]) {
        self.inner
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(ids);
        self.inner.notify.notify_one();
    }
}
