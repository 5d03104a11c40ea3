//! Wake signals. A write gathers the identities whose inbox changed in a
//! [`Wakes`] inside its transaction; once the transaction has committed, the
//! store publishes them on its in-process wake bus (no database work). The
//! API's hub wakes this process's sockets from the bus at once and tells
//! other instances with one coalesced NOTIFY per batch, sent by a
//! [`Notifier`] on a connection of its own, never inside the committing
//! transaction (PostgreSQL serialises committing notifiers on one lock).
//!
//! NOTIFY is a hint: a crash between commit and notify loses it, and the
//! sockets' reconnect and the worker's fallback poll cover that.
//!
//! Every published batch carries the time it was published (just after its
//! commit), and a NOTIFY carries the earliest such time of what it
//! coalesces, so the instance that wakes a socket can tell how long the
//! signal took (the `relayger_signal_lag_seconds` metric).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use diesel::sql_types::{Array, Text};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl, SimpleAsyncConnection};
use tokio::sync::broadcast;
use uuid::Uuid;

use crate::prepared::CachedExt;
use crate::{Store, StoreError};

/// The NOTIFY channel that carries identity ids whose inbox changed.
pub const INBOX_CHANNEL: &str = "relayger_inbox";
/// The NOTIFY channel that carries revoked token ids (sockets close).
pub const REVOKED_CHANNEL: &str = "relayger_revoked";
/// The NOTIFY channel that carries agent identity ids one of whose runtimes
/// changed (a claim, finish, heartbeat, release, retry or configuration).
pub const RUNTIME_CHANNEL: &str = "relayger_runtime";

/// The NOTIFY channel that carries identity ids one of whose questions'
/// delivery changed (a recipient's job claimed, ended, released or
/// canceled).
pub const DELIVERY_CHANNEL: &str = "relayger_delivery";

/// The NOTIFY channel every instance's listener pings with its origin, so
/// instances hear of each other ([`relayger_core::peers`]).
pub const PRESENCE_CHANNEL: &str = "relayger_presence";

/// NOTIFY payloads must stay under 8000 bytes: 36-byte UUIDs plus a comma,
/// after the 32-byte origin, its publish time and a colon.
const IDS_PER_NOTIFY: usize = 200;
/// Published batches a slow subscriber may fall behind by before it is told
/// it lagged (and then wakes everyone).
const BUS_CAPACITY: usize = 4096;

/// Identities to wake, gathered inside a transaction and published by the
/// store only after that transaction commits.
#[derive(Debug, Default)]
pub(crate) struct Wakes {
    inboxes: Vec<Uuid>,
    askers: Vec<Uuid>,
}

impl Wakes {
    /// Identities whose inbox changed.
    pub(crate) fn add(&mut self, identity_ids: &[Uuid]) {
        self.inboxes.extend_from_slice(identity_ids);
    }

    /// Identities one of whose questions' delivery changed.
    pub(crate) fn add_askers(&mut self, identity_ids: &[Uuid]) {
        self.askers.extend_from_slice(identity_ids);
    }

    /// Only askers.
    pub(crate) fn askers(identity_ids: Vec<Uuid>) -> Wakes {
        Wakes {
            inboxes: Vec::new(),
            askers: identity_ids,
        }
    }
}

/// One committed transaction's wakes, as the bus carries them.
#[derive(Debug, Clone)]
pub struct PublishedWakes {
    /// Identities whose inbox changed, sorted, without duplicates.
    pub identity_ids: Arc<[Uuid]>,
    /// Identities one of whose questions' delivery changed, sorted,
    /// without duplicates.
    pub asker_ids: Arc<[Uuid]>,
    /// When the store published them, right after the commit.
    pub published_at: SystemTime,
}

/// The in-process bus committed wakes are published on.
#[derive(Debug, Clone)]
pub(crate) struct WakeBus(broadcast::Sender<PublishedWakes>);

impl Default for WakeBus {
    fn default() -> Self {
        WakeBus(broadcast::channel(BUS_CAPACITY).0)
    }
}

/// The body of a transaction that gathers wakes (see
/// [`Store::write_and_wake`]). Its future must be `Send` (requests run on a
/// multi-threaded runtime), which an `AsyncFnOnce` bound alone cannot say;
/// every such async closure has this trait.
pub(crate) trait WakingBody<'r, R>:
    AsyncFnOnce(&'r mut AsyncPgConnection, &'r mut Wakes) -> Result<R, StoreError>
    + FnOnce(&'r mut AsyncPgConnection, &'r mut Wakes) -> <Self as WakingBody<'r, R>>::Fut
{
    type Fut: Future<Output = Result<R, StoreError>> + Send;
}

impl<'r, F, Fut, R> WakingBody<'r, R> for F
where
    F: AsyncFnOnce(&'r mut AsyncPgConnection, &'r mut Wakes) -> Result<R, StoreError>
        + FnOnce(&'r mut AsyncPgConnection, &'r mut Wakes) -> Fut,
    Fut: Future<Output = Result<R, StoreError>> + Send,
{
    type Fut = Fut;
}

impl Store {
    /// Runs `body` in one transaction on a pooled connection; the wakes it
    /// gathers are published once that transaction has committed, and
    /// dropped when it rolls back.
    pub(crate) async fn write_and_wake<R, F>(&self, body: F) -> Result<R, StoreError>
    where
        F: for<'r> WakingBody<'r, R> + Send,
        R: Send,
    {
        let mut conn = self.conn().await?;
        let mut wakes = Wakes::default();
        let gathered = &mut wakes;
        let out = conn
            .transaction(async move |conn| body(conn, gathered).await)
            .await?;
        self.publish_wakes(wakes);
        Ok(out)
    }

    /// Publishes the wakes of a committed transaction to this process.
    pub(crate) fn publish_wakes(&self, wakes: Wakes) {
        let Wakes {
            inboxes: mut ids,
            mut askers,
        } = wakes;
        if ids.is_empty() && askers.is_empty() {
            return;
        }
        for list in [&mut ids, &mut askers] {
            list.sort();
            list.dedup();
        }
        // No subscriber (no hub running) is not an error.
        let _ = self.wakes.0.send(PublishedWakes {
            identity_ids: ids.into(),
            asker_ids: askers.into(),
            published_at: SystemTime::now(),
        });
    }

    /// Every committed wake of this process from now on: identities whose
    /// inbox changed. A receiver that lags should wake everyone.
    pub fn subscribe_wakes(&self) -> broadcast::Receiver<PublishedWakes> {
        self.wakes.0.subscribe()
    }

    /// Tells every server instance that a token was revoked.
    pub async fn notify_revoked(&self, token_id: Uuid) -> Result<(), StoreError> {
        let mut conn = self.conn().await?;
        notify(&mut conn, REVOKED_CHANNEL, &token_id.to_string()).await
    }
}

async fn notify(
    conn: &mut AsyncPgConnection,
    channel: &str,
    payload: &str,
) -> Result<(), StoreError> {
    diesel::sql_query("SELECT pg_notify($1, $2)")
        .bind::<Text, _>(channel)
        .bind::<Text, _>(payload)
        .execute(conn)
        .await?;
    Ok(())
}

/// The NOTIFY payload of an inbox or runtime change:
/// `origin@micros:id,id,…`, the sending instance, the earliest publish time
/// it carries (microseconds since the Unix epoch, by the sender's clock),
/// then the ids. A reader that knows no `@` takes the whole prefix for an
/// origin that is not its own, and still reads the ids.
pub(crate) fn change_payload(origin: Uuid, published_at: SystemTime, ids: &[Uuid]) -> String {
    let ids = ids.iter().map(Uuid::to_string).collect::<Vec<_>>();
    let micros = published_at
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_micros();
    format!("{}@{micros}:{}", origin.simple(), ids.join(","))
}

/// The publish time of a payload's `@micros`, if it has a readable one.
pub(crate) fn payload_published_at(micros: &str) -> Option<SystemTime> {
    let micros: u64 = micros.parse().ok()?;
    SystemTime::UNIX_EPOCH.checked_add(Duration::from_micros(micros))
}

/// Sends inbox and runtime NOTIFYs for one server instance on a dedicated
/// connection (opened on first use and again after a failure). A batch is
/// one autocommit statement with `synchronous_commit = off`: it writes
/// nothing durable, so it never waits for a WAL flush.
pub struct Notifier {
    database_url: String,
    origin: Uuid,
    conn: Option<AsyncPgConnection>,
}

impl std::fmt::Debug for Notifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL may carry a password: never print it.
        f.debug_struct("Notifier")
            .field("origin", &self.origin)
            .finish_non_exhaustive()
    }
}

impl Notifier {
    /// `origin` names this instance in every payload, so its own listener
    /// can ignore what it sent.
    pub fn new(database_url: &str, origin: Uuid) -> Notifier {
        Notifier {
            database_url: database_url.to_owned(),
            origin,
            conn: None,
        }
    }

    /// NOTIFYs other instances of one batch of changes: identities whose
    /// inboxes changed and agents one of whose runtimes changed, each with
    /// the earliest publish time among its ids. Every NOTIFY of the batch
    /// (one per [`IDS_PER_NOTIFY`] ids a channel) goes in one statement, so
    /// a batch is one round trip and one (non-durable) commit. On failure
    /// the connection is dropped and the next call opens a new one.
    pub async fn changed(&mut self, batch: &ChangeBatch) -> Result<(), StoreError> {
        let (channels, payloads) = self.notifications(batch);
        if channels.is_empty() {
            return Ok(());
        }
        let result = self.send_on_connection(&channels, &payloads).await;
        if result.is_err() {
            self.conn = None;
        }
        result
    }

    /// The batch's NOTIFYs as (channels, payloads), inboxes first.
    fn notifications(&self, batch: &ChangeBatch) -> (Vec<&'static str>, Vec<String>) {
        let mut channels = Vec::new();
        let mut payloads = Vec::new();
        for (channel, change) in [
            (INBOX_CHANNEL, &batch.inboxes),
            (RUNTIME_CHANNEL, &batch.runtimes),
            (DELIVERY_CHANNEL, &batch.deliveries),
        ] {
            let Some((ids, published_at)) = change else {
                continue;
            };
            for chunk in ids.chunks(IDS_PER_NOTIFY) {
                channels.push(channel);
                payloads.push(change_payload(self.origin, *published_at, chunk));
            }
        }
        (channels, payloads)
    }

    async fn send_on_connection(
        &mut self,
        channels: &[&str],
        payloads: &[String],
    ) -> Result<(), StoreError> {
        let conn = match &mut self.conn {
            Some(conn) => conn,
            None => {
                let mut conn = AsyncPgConnection::establish(&self.database_url).await?;
                // Its one statement, kept prepared, runs a generic plan: the
                // plan for a few channels is the plan for many, and without
                // this PostgreSQL re-plans it for each batch (it judges the
                // generic plan by a guessed array size).
                conn.batch_execute(
                    "SET synchronous_commit = off; SET plan_cache_mode = force_generic_plan",
                )
                .await?;
                self.conn.insert(conn)
            }
        };
        // Notifications of one transaction are delivered in the order sent.
        diesel::sql_query(
            "SELECT pg_notify(n.channel, n.payload) \
             FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS n(channel, payload, i) \
             ORDER BY n.i",
        )
        .bind::<Array<Text>, _>(channels)
        .bind::<Array<Text>, _>(payloads)
        .cached()
        .execute(conn)
        .await?;
        Ok(())
    }
}

/// One batch of changes for [`Notifier::changed`]: each side, when present,
/// the ids and the earliest time they were published.
#[derive(Debug, Default)]
pub struct ChangeBatch {
    /// Identities whose inbox changed.
    pub inboxes: Option<(Vec<Uuid>, SystemTime)>,
    /// Agents one of whose runtimes changed.
    pub runtimes: Option<(Vec<Uuid>, SystemTime)>,
    /// Identities one of whose questions' delivery changed.
    pub deliveries: Option<(Vec<Uuid>, SystemTime)>,
}

#[cfg(test)]
mod tests {
    use relayger_core::wire::{Identity, IdentityKind};

    use super::*;
    use crate::test_support::{self, TestDatabase};
    use crate::{Caller, MessageBody, NewMessage};

    async fn register(store: &Store, name: &str) -> (Identity, Caller) {
        let (identity, token) = test_support::register(store, name, IdentityKind::Agent).await;
        (identity, token.caller())
    }

    fn text_to(identity: &Identity, text: &str) -> NewMessage {
        NewMessage {
            to: Some(identity.number.clone()),
            room_id: None,
            message_id: None,
            body: MessageBody::Text(text.to_owned()),
            ask: false,
            deadline: None,
            reply_to: None,
        }
    }

    fn any_sealed(_: &relayger_core::wire::SealedPayload, _: &[Uuid]) -> Result<(), String> {
        Ok(())
    }

    #[tokio::test]
    async fn committed_writes_publish_their_wakes_and_refused_ones_publish_none() {
        let db = TestDatabase::create().await;
        let store = db.store().await;
        let (alice, alice_caller) = register(&store, "alice").await;
        let (bob, _) = register(&store, "bob").await;
        let (carol, _) = register(&store, "carol").await;
        let mut bus = store.subscribe_wakes();

        store
            .request_contact(alice.id, bob.number.clone())
            .await
            .expect("request");
        assert_eq!(
            &*bus.try_recv().expect("request wake").identity_ids,
            &[bob.id]
        );
        store
            .accept_contact(bob.id, alice.number.clone())
            .await
            .expect("accept");
        let mut both = vec![alice.id, bob.id];
        both.sort();
        assert_eq!(
            &*bus.try_recv().expect("accept wake").identity_ids,
            both.as_slice()
        );

        // Refused (carol is no contact): rolled back, nothing published.
        store
            .send_message(&alice_caller, text_to(&carol, "no"), any_sealed)
            .await
            .expect_err("not a contact");
        assert!(matches!(
            bus.try_recv(),
            Err(broadcast::error::TryRecvError::Empty)
        ));
        // Committed: the other member is published, not the sender, and it
        // is there as soon as the call returns.
        let before_send = SystemTime::now();
        store
            .send_message(&alice_caller, text_to(&bob, "hi"), any_sealed)
            .await
            .expect("send");
        let sent = bus.try_recv().expect("send wake");
        assert_eq!(&*sent.identity_ids, &[bob.id]);
        assert!(sent.published_at >= before_send, "published after commit");
    }

    #[tokio::test]
    async fn a_batch_is_heard_in_order_on_both_channels() {
        use crate::listen::{Announcement, ListenOptions, listen};

        let db = TestDatabase::create().await;
        let (tx, mut rx) = tokio::sync::mpsc::channel(16);
        let listener = tokio::spawn(listen(
            db.url().to_owned(),
            ListenOptions::default(),
            Uuid::new_v4(),
            tx,
        ));
        assert_eq!(rx.recv().await, Some(Announcement::Listening));

        // More inbox ids than one payload carries, and one runtime change.
        let mut inboxes: Vec<Uuid> = (0..IDS_PER_NOTIFY + 50).map(|_| Uuid::now_v7()).collect();
        inboxes.sort();
        let agent = Uuid::now_v7();
        let at = SystemTime::UNIX_EPOCH + Duration::from_micros(1_796_000_000_000_001);
        let mut notifier = Notifier::new(db.url(), Uuid::new_v4());
        let batch = ChangeBatch {
            inboxes: Some((inboxes.clone(), at)),
            runtimes: Some((vec![agent], at)),
            deliveries: None,
        };
        assert_eq!(notifier.notifications(&batch).0.len(), 3, "three NOTIFYs");
        notifier.changed(&batch).await.expect("notify");

        let (first, rest) = inboxes.split_at(IDS_PER_NOTIFY);
        for (expected, what) in [
            (
                Announcement::InboxChanged {
                    identity_ids: first.to_vec(),
                    published_at: Some(at),
                },
                "the first inbox payload",
            ),
            (
                Announcement::InboxChanged {
                    identity_ids: rest.to_vec(),
                    published_at: Some(at),
                },
                "the second inbox payload",
            ),
            (
                Announcement::RuntimesChanged {
                    identity_ids: vec![agent],
                    published_at: Some(at),
                },
                "the runtime payload",
            ),
        ] {
            assert_eq!(rx.recv().await, Some(expected), "{what}");
        }
        // An empty batch sends nothing (and needs no connection).
        notifier
            .changed(&ChangeBatch::default())
            .await
            .expect("nothing to send");
        drop(rx);
        listener.abort();
    }
}
