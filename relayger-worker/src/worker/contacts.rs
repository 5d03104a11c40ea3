//! Contact requests seen by a waiting worker: reported once per change of
//! the count an idle claim carries, or (`accept_contacts`) accepted at once.

use std::collections::HashSet;

use relayger_core::wire::{ContactRequestState, RequestDirection};
use uuid::Uuid;

use super::events::{EventSink, WorkerEvent};
use crate::client::{Client, ClientError};

pub(crate) struct ContactWatch {
    accept: bool,
    /// The count last reported; `None` before the first idle claim.
    reported: Option<u32>,
    /// Requests whose acceptance the server refused for good (reported
    /// once, not retried on every idle claim).
    refused: HashSet<Uuid>,
}

impl ContactWatch {
    pub(crate) fn new(accept: bool) -> ContactWatch {
        ContactWatch {
            accept,
            reported: None,
            refused: HashSet::new(),
        }
    }

    /// An idle claim said `count` requests are pending.
    pub(crate) async fn observe(&mut self, client: &Client, count: u32, events: &EventSink) {
        if self.accept {
            if count > 0 {
                self.accept_all(client, events).await;
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

    async fn accept_all(&mut self, client: &Client, events: &EventSink) {
        let requests = match client.contact_requests(None).await {
            Ok(requests) => requests,
            // The next idle claim (signal or fallback) tries again.
            Err(err) => {
                tracing::warn!(%err, "cannot list contact requests");
                return;
            }
        };
        let pending = requests.incoming.into_iter().filter(|request| {
            request.direction == RequestDirection::Incoming
                && request.state == ContactRequestState::Pending
        });
        for request in pending {
            if self.refused.contains(&request.id) {
                continue;
            }
            match client.accept_contact(&request.number, None).await {
                Ok(_) => events.emit(WorkerEvent::ContactAccepted {
                    number: request.number,
                }),
                Err(err) => {
                    if !err.is_transient() {
                        self.refused.insert(request.id);
                    }
                    events.emit(WorkerEvent::ContactError {
                        number: request.number,
                        code: code_of(&err),
                    });
                }
            }
        }
    }
}

fn code_of(err: &ClientError) -> String {
    match err.code() {
        Some(code) => code.as_str().to_owned(),
        None => "unavailable".to_owned(),
    }
}
