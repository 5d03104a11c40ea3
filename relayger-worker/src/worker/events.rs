//! Delivers a running worker's [`WorkerEvent`]s (defined with the rest of
//! the wire format in `relayger_core::wire`) through an [`EventSink`].

use std::fmt;
use std::sync::Arc;

pub use relayger_core::wire::{SocketState, StopReason, WorkerEvent};
use tokio::sync::mpsc::UnboundedSender;

/// Where a worker's events go: a callback, a channel, or nowhere (the
/// default). Called from the worker's tasks, so it should not block long.
///
/// ```
/// use relayger_worker::{EventSink, WorkerEvent};
///
/// let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<WorkerEvent>();
/// let sink = EventSink::from(tx);
/// sink.emit(WorkerEvent::ContactRequests { count: 2 });
/// assert_eq!(rx.try_recv().expect("event").name(), "contact_requests");
/// ```
#[derive(Clone, Default)]
pub struct EventSink {
    callback: Option<Arc<dyn Fn(WorkerEvent) + Send + Sync>>,
}

impl fmt::Debug for EventSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventSink")
            .field("connected", &self.callback.is_some())
            .finish()
    }
}

impl EventSink {
    /// Calls `callback` with every event.
    pub fn new(callback: impl Fn(WorkerEvent) + Send + Sync + 'static) -> EventSink {
        EventSink {
            callback: Some(Arc::new(callback)),
        }
    }

    /// Delivers `event`.
    pub fn emit(&self, event: WorkerEvent) {
        if let Some(callback) = &self.callback {
            callback(event);
        }
    }
}

impl From<UnboundedSender<WorkerEvent>> for EventSink {
    fn from(sender: UnboundedSender<WorkerEvent>) -> EventSink {
        // A receiver that went away just stops listening.
        EventSink::new(move |event| {
            let _ = sender.send(event);
        })
    }
}
