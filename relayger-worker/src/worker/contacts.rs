//! Contact requests seen by a worker: reported once per change of the count
//! a claim response carries, or (`accept_contacts`) accepted at once — on a
//! task of their own beside the job loop, so the list and accept calls never
//! hold a claim up, and a busy worker handles them as an idle one does.

use std::collections::HashSet;
use std::time::Duration;

use relayger_core::wire::{ContactRequestState, RequestDirection};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::events::{EventSink, WorkerEvent};
use crate::client::{Client, ClientError};

/// The contact task: fed the count of every claim response that carries
/// one (the latest wins while it is busy accepting).
pub(crate) struct ContactTask {
    counts: watch::Sender<Option<u32>>,
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl ContactTask {
    pub(crate) fn start(
        client: &Client,
        accept: bool,
        events: &EventSink,
        cancel: &CancellationToken,
    ) -> ContactTask {
        let (counts, mut seen) = watch::channel(None);
        let stop = cancel.child_token();
        let client = client.clone();
        let events = events.clone();
        let task = tokio::spawn({
            let stop = stop.clone();
            async move {
                let mut contacts = ContactWatch::new(accept);
                loop {
                    tokio::select! {
                        _ = stop.cancelled() => return,
                        changed = seen.changed() => if changed.is_err() { return },
                    }
                    let Some(count) = *seen.borrow_and_update() else {
                        continue;
                    };
                    tokio::select! {
                        _ = stop.cancelled() => return,
                        () = contacts.observe(&client, count, &events) => {}
                    }
                }
            }
        });
        ContactTask { counts, stop, task }
    }

    /// A claim response said `count` requests are pending; never waits.
    pub(crate) fn observe(&self, count: u32) {
        self.counts.send_replace(Some(count));
    }

    /// Stops the task (an accept in flight is abandoned) and waits for it,
    /// so that no contact event follows the worker's `stopped`.
    pub(crate) async fn stop(self) {
        self.stop.cancel();
        let _ = self.task.await;
    }
}

struct ContactWatch {
    accept: bool,
    /// The count last reported; `None` before the first claim.
    reported: Option<u32>,
    /// Requests whose acceptance the server refused for good (reported
    /// once, not retried on every claim).
    refused: HashSet<Uuid>,
    /// A count for which the last round could do nothing (every pending
    /// request refused, or the list unreadable), and when: the same count
    /// again is not listed again before [`RECHECK`] (a busy worker claims
    /// often).
    settled: Option<(u32, Instant)>,
}

/// How soon an unchanged count whose requests could not be accepted is
/// looked at again.
const RECHECK: Duration = Duration::from_secs(5);

impl ContactWatch {
    fn new(accept: bool) -> ContactWatch {
        ContactWatch {
            accept,
            reported: None,
            refused: HashSet::new(),
            settled: None,
        }
    }

    /// A claim said `count` requests are pending.
    async fn observe(&mut self, client: &Client, count: u32, events: &EventSink) {
        if self.accept {
            let recent = self
                .settled
                .is_some_and(|(settled, at)| settled == count && at.elapsed() < RECHECK);
            if count > 0 && !recent {
                let settled = !self.accept_all(client, events).await;
                self.settled = settled.then(|| (count, Instant::now()));
            }
            return;
        }
        // At start only a non-zero count is news.
        let changed = self.reported.map_or(count != 0, |last| last != count);
        self.reported = Some(count);
        if changed {
            events.emit(WorkerEvent::ContactRequests { count });
        }
    }

    /// Accepts every pending request not refused before; whether there was
    /// any to try.
    async fn accept_all(&mut self, client: &Client, events: &EventSink) -> bool {
        let requests = match client.contact_requests(None).await {
            Ok(requests) => requests,
            // The next claim (signal or fallback) tries again.
            Err(err) => {
                events.emit(WorkerEvent::ContactError {
                    number: None,
                    code: code_of(&err),
                    message: Some(err.to_string()),
                });
                return false;
            }
        };
        let pending = requests.incoming.into_iter().filter(|request| {
            request.direction == RequestDirection::Incoming
                && request.state == ContactRequestState::Pending
        });
        let mut tried = false;
        for request in pending {
            if self.refused.contains(&request.id) {
                continue;
            }
            tried = true;
            match client.accept_contact(&request.number, None).await {
                Ok(_) => events.emit(WorkerEvent::ContactAccepted {
                    number: request.number,
                }),
                Err(err) => {
                    if !err.is_transient() {
                        self.refused.insert(request.id);
                    }
                    events.emit(WorkerEvent::ContactError {
                        number: Some(request.number),
                        code: code_of(&err),
                        message: None,
                    });
                }
            }
        }
        tried
    }
}

fn code_of(err: &ClientError) -> String {
    match err.code() {
        Some(code) => code.as_str().to_owned(),
        None => "unavailable".to_owned(),
    }
}
