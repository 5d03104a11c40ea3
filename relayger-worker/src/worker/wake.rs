//! The runtime socket as a wake-up source: kept open in the background,
//! reconnected with backoff, and turned into one coalescing notification
//! the worker loop waits on.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::backoff::Backoff;
use super::events::{EventSink, SocketState, WorkerEvent};
use crate::client::Client;
use crate::socket::SignalSocket;

/// A connection that lasted this long was healthy: the next break starts the
/// backoff from the beginning again.
const HEALTHY_CONNECTION: Duration = Duration::from_secs(10);

/// Signals from the runtime socket, coalesced: many signals while the worker
/// is busy are one wake-up.
pub(crate) struct Wakeups {
    pub(crate) notify: Arc<Notify>,
    pub(crate) state: SocketState,
    task: Option<JoinHandle<()>>,
    stop: CancellationToken,
}

impl Wakeups {
    /// Opens the runtime socket (before the first claim, so no signal is
    /// missed between the two) and keeps it open in the background. With
    /// `enabled` false there is no socket: only the timers wake the worker.
    pub(crate) async fn start(
        client: &Client,
        runtime_id: Uuid,
        enabled: bool,
        cancel: &CancellationToken,
        events: &EventSink,
    ) -> Wakeups {
        let notify = Arc::new(Notify::new());
        let stop = cancel.child_token();
        if !enabled {
            return Wakeups {
                notify,
                state: SocketState::Disabled,
                task: None,
                stop,
            };
        }
        let first = tokio::select! {
            _ = stop.cancelled() => None,
            socket = client.runtimes().socket(runtime_id) => socket
                .inspect_err(|err| tracing::warn!(%err, "runtime socket unavailable; polling until it returns"))
                .ok(),
        };
        let state = if first.is_some() {
            SocketState::Connected
        } else {
            SocketState::Unavailable
        };
        let watcher = SocketWatcher {
            client: client.clone(),
            runtime_id,
            notify: Arc::clone(&notify),
            stop: stop.clone(),
            events: events.clone(),
        };
        let task = tokio::spawn(watcher.run(first));
        Wakeups {
            notify,
            state,
            task: Some(task),
            stop,
        }
    }

    /// Closes the socket.
    pub(crate) async fn stop(mut self) {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

struct SocketWatcher {
    client: Client,
    runtime_id: Uuid,
    notify: Arc<Notify>,
    stop: CancellationToken,
    events: EventSink,
}

impl SocketWatcher {
    async fn run(self, first: Option<SignalSocket>) {
        let mut backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(30));
        let mut socket = first;
        loop {
            if let Some(mut open) = socket.take() {
                let opened_at = Instant::now();
                let error = loop {
                    tokio::select! {
                        _ = self.stop.cancelled() => {
                            open.close().await;
                            return;
                        }
                        signal = open.next_signal() => match signal {
                            Ok(_) => self.notify.notify_one(),
                            Err(err) => break err,
                        },
                    }
                };
                if opened_at.elapsed() >= HEALTHY_CONNECTION {
                    backoff.reset();
                }
                self.events.emit(WorkerEvent::SocketDisconnected {
                    error: error.to_string(),
                });
            }
            tokio::select! {
                _ = self.stop.cancelled() => return,
                _ = sleep(backoff.next_delay()) => {}
            }
            let connected = tokio::select! {
                _ = self.stop.cancelled() => return,
                connected = self.client.runtimes().socket(self.runtime_id) => connected,
            };
            match connected {
                Ok(open) => {
                    self.events.emit(WorkerEvent::SocketConnected);
                    // Signals sent while the socket was down are lost: look
                    // again now.
                    self.notify.notify_one();
                    socket = Some(open);
                }
                Err(err) => tracing::debug!(%err, "runtime socket still unavailable"),
            }
        }
    }
}
