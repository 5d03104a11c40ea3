//! Wake signals inside one server process, fed by LISTEN/NOTIFY so that
//! several instances sharing a database wake each other's sockets.
//!
//! Commit → the store's wake bus → this instance's sockets at once, and a
//! queue → one coalesced NOTIFY (on a connection of its own) → the other
//! instances' listeners → their sockets. A listener skips the NOTIFYs of its
//! own instance. An instance that has heard no other instance lately
//! (every listener pings with its origin on a shared channel, and answers
//! a new listener's hello at once) sends no NOTIFY: nobody would hear it
//! ([`relayger_core::peers`] has the rule).
//!
//! Runtime changes (a claim, finish, heartbeat, release, retry or
//! configuration, reported by the runtime routes once the store call has
//! returned) travel the same way, keyed by the runtime's agent, to the
//! sockets that asked for them (the dashboard's) and to no other: a worker
//! never hears them, and with no such socket open they cost a map lookup.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use relayger_core::peers::PeerPresence;
use relayger_store::Store;
use relayger_store::listen::{Announcement, ListenOptions, listen};
use relayger_store::wake::{ChangeBatch, Notifier, PublishedWakes};
use tokio::sync::{Notify, broadcast, mpsc, watch};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::token_cache::TokenCache;

/// What a subscriber hears.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HubSignal {
    /// `None` when nobody knows when (a reconnected listener, a lagged bus).
    InboxChanged(Option<Published>),
    /// One of the agent's runtimes changed (only to change subscribers).
    RuntimeChanged,
    /// A recipient's job of one of the identity's questions changed.
    DeliveryChanged,
    TokenRevoked(Uuid),
}

/// When a wake was published and how it reached this instance: what the
/// signal lag metric needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Published {
    pub(crate) at: SystemTime,
    pub(crate) path: WakePath,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WakePath {
    /// Committed on this instance.
    Local,
    /// Heard in another instance's NOTIFY.
    Notify,
}

impl WakePath {
    pub(crate) fn label(self) -> &'static str {
        match self {
            WakePath::Local => "local",
            WakePath::Notify => "notify",
        }
    }
}

/// Identities to NOTIFY other instances about, with the earliest publish
/// time among them.
#[derive(Debug, Default)]
struct PendingIds {
    ids: Vec<Uuid>,
    since: Option<SystemTime>,
}

impl PendingIds {
    fn add(&mut self, ids: &[Uuid], at: SystemTime) {
        self.ids.extend_from_slice(ids);
        self.since = Some(self.since.map_or(at, |since| since.min(at)));
    }

    /// The sorted, deduplicated ids and their time, if there are any.
    fn take(&mut self) -> Option<(Vec<Uuid>, SystemTime)> {
        let mut ids = std::mem::take(&mut self.ids);
        let since = self.since.take()?;
        ids.sort();
        ids.dedup();
        (!ids.is_empty()).then_some((ids, since))
    }
}

#[derive(Debug, Default)]
struct Pending {
    inboxes: PendingIds,
    runtimes: PendingIds,
    deliveries: PendingIds,
}

/// Broadcast channels by identity id, made on first subscription and
/// dropped when the last subscriber leaves.
#[derive(Debug, Default)]
struct Subscribers(Mutex<HashMap<Uuid, broadcast::Sender<HubSignal>>>);

impl Subscribers {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, broadcast::Sender<HubSignal>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn subscribe(&self, identity: Uuid) -> broadcast::Receiver<HubSignal> {
        self.map()
            .entry(identity)
            .or_insert_with(|| broadcast::channel(16).0)
            .subscribe()
    }

    fn prune(&self, identity: Uuid) {
        let mut map = self.map();
        if map
            .get(&identity)
            .is_some_and(|tx| tx.receiver_count() == 0)
        {
            map.remove(&identity);
        }
    }

    fn send(&self, identity: Uuid, signal: HubSignal) {
        if let Some(tx) = self.map().get(&identity) {
            let _ = tx.send(signal);
        }
    }

    fn broadcast_all(&self, signal: HubSignal) {
        for tx in self.map().values() {
            let _ = tx.send(signal);
        }
    }
}

#[derive(Debug)]
struct HubInner {
    /// Every socket: inbox signals and revocations.
    identities: Subscribers,
    /// Sockets that asked for runtime changes, by the runtimes' agent.
    runtime_changes: Subscribers,
    /// What to NOTIFY other instances about, and its signal.
    pending: Mutex<Pending>,
    notify: Notify,
    /// True once the LISTEN connection has subscribed.
    listening: watch::Sender<bool>,
    tokens: TokenCache,
    /// Whether another instance may hear a NOTIFY, in monotonic times
    /// since `started`.
    peers: Mutex<PeerPresence>,
    started: Instant,
}

impl Default for HubInner {
    fn default() -> Self {
        HubInner {
            identities: Subscribers::default(),
            runtime_changes: Subscribers::default(),
            pending: Mutex::default(),
            notify: Notify::new(),
            listening: watch::channel(false).0,
            tokens: TokenCache::default(),
            peers: Mutex::new(presence(ListenOptions::default())),
            started: Instant::now(),
        }
    }
}

/// What an instance with these listener settings knows of others before
/// its listener subscribes.
fn presence(options: ListenOptions) -> PeerPresence {
    PeerPresence::new(options.ping_every, options.answer_within)
}

/// Cheap to clone; shared by every handler of the process.
#[derive(Debug, Clone, Default)]
pub(crate) struct Hub {
    inner: Arc<HubInner>,
}

impl Hub {
    /// Subscribes to an identity's signals.
    pub(crate) fn subscribe(&self, identity: Uuid) -> broadcast::Receiver<HubSignal> {
        self.inner.identities.subscribe(identity)
    }

    /// Subscribes to changes of an agent's runtimes.
    pub(crate) fn subscribe_runtime_changes(&self, agent: Uuid) -> broadcast::Receiver<HubSignal> {
        self.inner.runtime_changes.subscribe(agent)
    }

    /// Drops channels nobody listens to any more.
    pub(crate) fn prune(&self, identity: Uuid) {
        self.inner.identities.prune(identity);
        self.inner.runtime_changes.prune(identity);
    }

    fn send(&self, identity: Uuid, signal: HubSignal) {
        self.inner.identities.send(identity, signal);
    }

    fn broadcast_all(&self, signal: HubSignal) {
        self.inner.identities.broadcast_all(signal);
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

    /// A runtime route committed a change to one of this agent's runtimes:
    /// tell the change subscribers here now, and the other instances by
    /// NOTIFY.
    pub(crate) fn runtime_changed(&self, agent: Uuid) {
        self.inner
            .runtime_changes
            .send(agent, HubSignal::RuntimeChanged);
        self.lock_pending()
            .runtimes
            .add(&[agent], SystemTime::now());
        self.inner.notify.notify_one();
    }

    /// Reads or updates what this instance knows of other instances, at
    /// the monotonic time now.
    fn peers<R>(&self, with: impl FnOnce(&mut PeerPresence, Duration) -> R) -> R {
        let mut peers = self.inner.peers.lock().unwrap_or_else(|e| e.into_inner());
        with(&mut peers, self.inner.started.elapsed())
    }

    /// Whether a NOTIFY may reach another instance now.
    fn others_may_listen(&self) -> bool {
        self.peers(|peers, now| peers.others_may_listen(now))
    }

    fn lock_pending(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.inner.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn apply(&self, announcement: Announcement) {
        match announcement {
            // Changes are heard only from other instances.
            Announcement::InboxChanged {
                identity_ids,
                published_at,
            } => {
                self.peers(PeerPresence::heard);
                let published = published_at.map(|at| Published {
                    at,
                    path: WakePath::Notify,
                });
                for id in identity_ids {
                    self.send(id, HubSignal::InboxChanged(published));
                }
            }
            Announcement::RuntimesChanged { identity_ids, .. } => {
                self.peers(PeerPresence::heard);
                for id in identity_ids {
                    self.inner
                        .runtime_changes
                        .send(id, HubSignal::RuntimeChanged);
                }
            }
            Announcement::DeliveriesChanged { identity_ids } => {
                self.peers(PeerPresence::heard);
                for id in identity_ids {
                    self.send(id, HubSignal::DeliveryChanged);
                }
            }
            Announcement::TokenRevoked(token) => self.token_revoked(token),
            // Anything may have been missed while disconnected.
            Announcement::Listening => {
                self.peers(PeerPresence::listening);
                self.inner.tokens.set_listening(true);
                self.inner.listening.send_replace(true);
                self.broadcast_all(HubSignal::InboxChanged(None));
                self.inner
                    .runtime_changes
                    .broadcast_all(HubSignal::RuntimeChanged);
            }
            // Revocations are not heard until it is back, nor other
            // instances.
            Announcement::Lost => {
                self.peers(|peers, _| peers.lost());
                self.inner.tokens.set_listening(false);
            }
            Announcement::PeerHeard => self.peers(PeerPresence::heard),
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
        self.peers(|peers, _| *peers = presence(listen_options));
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
                    Ok(wakes) => {
                        let signal = HubSignal::InboxChanged(Some(Published {
                            at: wakes.published_at,
                            path: WakePath::Local,
                        }));
                        for id in wakes.identity_ids.iter() {
                            hub.send(*id, signal);
                        }
                        for id in wakes.asker_ids.iter() {
                            hub.send(*id, HubSignal::DeliveryChanged);
                        }
                        hub.queue_notify(&wakes, wakes.published_at);
                    }
                    Err(broadcast::error::RecvError::Lagged(missed)) => {
                        // Which identities is unknown: wake every local
                        // socket; other instances fall back on their polls.
                        tracing::warn!(missed, "wake bus lagged; waking every socket");
                        hub.broadcast_all(HubSignal::InboxChanged(None));
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
                let batch = {
                    let mut pending = hub.lock_pending();
                    ChangeBatch {
                        inboxes: pending.inboxes.take(),
                        runtimes: pending.runtimes.take(),
                        deliveries: pending.deliveries.take(),
                    }
                };
                // Alone on the database: nobody would hear it.
                if !hub.others_may_listen() {
                    continue;
                }
                // A failure is a hint lost: other instances' sockets and
                // workers still have their fallback polls.
                if let Err(err) = notifier.changed(&batch).await {
                    tracing::warn!(%err, "change NOTIFY failed");
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

    /// Queues a committed write's wakes for the next NOTIFY to other
    /// instances.
    fn queue_notify(&self, wakes: &PublishedWakes, published_at: SystemTime) {
        {
            let mut pending = self.lock_pending();
            if !wakes.identity_ids.is_empty() {
                pending.inboxes.add(&wakes.identity_ids, published_at);
            }
            if !wakes.asker_ids.is_empty() {
                pending.deliveries.add(&wakes.asker_ids, published_at);
            }
        }
        self.inner.notify.notify_one();
    }
}
