//! Resources and the wake-up: `relayger://inbox`, `relayger://rooms/{id}`
//! and `relayger://contacts/requests`, and a watcher that — woken by the
//! identity socket's `inbox_changed` — reads what changed and names the
//! subscribed resources whose content differs.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use relayger_core::wire::{ContactRequests, InboxResponse};
use relayger_worker::{Client, SignalSocket};
use tokio::time::sleep;
use uuid::Uuid;

pub(super) const INBOX_URI: &str = "relayger://inbox";
pub(super) const CONTACT_REQUESTS_URI: &str = "relayger://contacts/requests";
const ROOM_PREFIX: &str = "relayger://rooms/";

/// How long to wait before opening a broken identity socket again; the
/// delay doubles after each failed attempt, up to the maximum.
const RECONNECT_DELAY: Duration = Duration::from_secs(1);
const MAX_RECONNECT_DELAY: Duration = Duration::from_secs(30);

/// What a resource URI names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Resource {
    Inbox,
    Room(Uuid),
    ContactRequests,
}

impl Resource {
    pub(super) fn parse(uri: &str) -> Option<Resource> {
        match uri {
            INBOX_URI => Some(Resource::Inbox),
            CONTACT_REQUESTS_URI => Some(Resource::ContactRequests),
            _ => {
                let id = uri.strip_prefix(ROOM_PREFIX)?;
                Uuid::parse_str(id).ok().map(Resource::Room)
            }
        }
    }

    pub(super) fn room_uri(room: Uuid) -> String {
        format!("{ROOM_PREFIX}{room}")
    }
}

/// The subscribed URIs and, for each, a fingerprint of its content when
/// last looked at (`None` when it could not be read).
pub(super) type Subscriptions = Arc<Mutex<HashMap<String, Option<String>>>>;

/// Fingerprints of `uris`' content now: the inbox's rooms with their
/// cursors, one room's cursors, the pending contact requests. A resource
/// whose source cannot be read is left out.
pub(super) async fn fingerprints(client: &Client, uris: &[String]) -> HashMap<String, String> {
    let resources: Vec<(String, Resource)> = uris
        .iter()
        .filter_map(|uri| Resource::parse(uri).map(|resource| (uri.clone(), resource)))
        .collect();
    let needs_inbox = resources
        .iter()
        .any(|(_, r)| matches!(r, Resource::Inbox | Resource::Room(_)));
    let needs_requests = resources
        .iter()
        .any(|(_, r)| *r == Resource::ContactRequests);
    let cursors = if needs_inbox {
        client.inbox().await.ok().map(|inbox| inbox_cursors(&inbox))
    } else {
        None
    };
    let requests = if needs_requests {
        client
            .contact_requests(None)
            .await
            .ok()
            .map(|requests| requests_fingerprint(&requests))
    } else {
        None
    };
    let mut out = HashMap::new();
    for (uri, resource) in resources {
        let print = match resource {
            Resource::Inbox => cursors.as_ref().map(|c| format!("{c:?}")),
            Resource::Room(room) => cursors
                .as_ref()
                .map(|c| format!("{:?}", c.get(&room).copied())),
            Resource::ContactRequests => requests.clone(),
        };
        if let Some(print) = print {
            out.insert(uri, print);
        }
    }
    out
}

/// Per room with unacknowledged messages: (acked seq, last seq).
fn inbox_cursors(inbox: &InboxResponse) -> BTreeMap<Uuid, (i64, i64)> {
    inbox
        .rooms
        .iter()
        .map(|room| (room.room_id, (room.acked_seq, room.last_seq)))
        .collect()
}

fn requests_fingerprint(requests: &ContactRequests) -> String {
    let mut lines: Vec<String> = requests
        .incoming
        .iter()
        .chain(&requests.outgoing)
        .map(|r| format!("{:?} {} {}", r.direction, r.number, r.state.as_str()))
        .collect();
    lines.sort();
    lines.join("\n")
}

/// Records the current fingerprints of `uris` as the baseline of `subs`.
pub(super) async fn subscribe(client: &Client, subs: &Subscriptions, uris: &[String]) {
    let now = fingerprints(client, uris).await;
    let mut subs = subs.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    for uri in uris {
        subs.insert(uri.clone(), now.get(uri).cloned());
    }
}

/// Holds the identity socket and says which subscribed resources changed.
pub(super) struct Watcher {
    client: Client,
    subs: Subscriptions,
    socket: Option<SignalSocket>,
    reconnect_delay: Duration,
}

impl Watcher {
    pub(super) fn new(client: Client, subs: Subscriptions) -> Watcher {
        Watcher {
            client,
            subs,
            socket: None,
            reconnect_delay: RECONNECT_DELAY,
        }
    }

    /// Waits until a signal (or a reopened socket, after which a signal
    /// may have been missed) shows that some subscribed resources changed,
    /// and returns their URIs.
    pub(super) async fn changed(&mut self) -> Vec<String> {
        loop {
            match &mut self.socket {
                Some(socket) => {
                    if socket.next_signal().await.is_err() {
                        self.socket = None;
                        continue;
                    }
                }
                None => match self.client.socket().await {
                    Ok(socket) => {
                        self.socket = Some(socket);
                        self.reconnect_delay = RECONNECT_DELAY;
                    }
                    Err(_) => {
                        // The server restarting, or a revoked token: try
                        // again, less and less often.
                        sleep(self.reconnect_delay).await;
                        self.reconnect_delay = (self.reconnect_delay * 2).min(MAX_RECONNECT_DELAY);
                        continue;
                    }
                },
            }
            let changed = self.look().await;
            if !changed.is_empty() {
                return changed;
            }
        }
    }

    /// The subscribed URIs whose fingerprint differs from the last one
    /// (which is then updated).
    async fn look(&self) -> Vec<String> {
        let uris: Vec<String> = self
            .subs
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .keys()
            .cloned()
            .collect();
        let now = fingerprints(&self.client, &uris).await;
        let mut subs = self
            .subs
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut changed = Vec::new();
        for (uri, print) in now {
            // Unsubscribed meanwhile: nothing to say.
            let Some(last) = subs.get_mut(&uri) else {
                continue;
            };
            if last.as_ref() != Some(&print) {
                *last = Some(print);
                changed.push(uri);
            }
        }
        changed.sort();
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_uris() {
        let room = Uuid::nil();
        let table = [
            ("relayger://inbox", Some(Resource::Inbox)),
            (
                "relayger://contacts/requests",
                Some(Resource::ContactRequests),
            ),
            (
                "relayger://rooms/00000000-0000-0000-0000-000000000000",
                Some(Resource::Room(room)),
            ),
            ("relayger://rooms/not-a-uuid", None),
            ("relayger://rooms/", None),
            ("relayger://outbox", None),
            ("file:///etc/passwd", None),
        ];
        for (uri, resource) in table {
            assert_eq!(Resource::parse(uri), resource, "{uri}");
        }
        assert_eq!(
            Resource::parse(&Resource::room_uri(room)),
            Some(Resource::Room(room))
        );
    }
}
