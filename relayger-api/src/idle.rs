//! Closing connections that hold a place without asking for anything.
//!
//! hyper bounds the time an HTTP/1 client takes to send its headers, but
//! nothing bounds a connection that has not yet shown which protocol it
//! speaks, an HTTP/2 handshake, or an HTTP/2 connection with no stream open:
//! without this, `--max-connections` silent clients keep every other client
//! (and `/healthz`) out. So every connection counts its requests in flight
//! (from the moment its headers are parsed until its response body is
//! sent), and one with none for the idle limit is shut down: gracefully
//! first, then dropped if the client does not let it close.

use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use tokio::time::Instant;

/// How long an idle connection told to close may take to do so before it is
/// dropped: an HTTP/2 client answers the GOAWAY's ping within a round trip,
/// a silent or stalled one never does.
pub(crate) const CLOSE_GRACE: Duration = Duration::from_millis(250);

/// The requests in flight on one connection and since when it has had none.
#[derive(Debug)]
pub(crate) struct Activity {
    in_flight: AtomicUsize,
    idle_since: Mutex<Instant>,
}

impl Activity {
    pub(crate) fn new() -> Arc<Activity> {
        Arc::new(Activity {
            in_flight: AtomicUsize::new(0),
            idle_since: Mutex::new(Instant::now()),
        })
    }

    /// Counts a request from its headers until the returned guard (moved into
    /// the response body) is dropped.
    pub(crate) fn begin(self: &Arc<Activity>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight(self.clone())
    }

    /// When the connection will have been idle for `limit`, or `None` while a
    /// request is in flight.
    fn idle_deadline(&self, limit: Duration) -> Option<Instant> {
        let since = *self.idle_since.lock().unwrap_or_else(|e| e.into_inner());
        (self.in_flight.load(Ordering::SeqCst) == 0).then(|| since + limit)
    }
}

/// One request in flight on a connection.
#[derive(Debug)]
pub(crate) struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        *self.0.idle_since.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A response body that keeps its request counted until it has been sent.
pub(crate) struct TrackedBody {
    inner: Body,
    _in_flight: InFlight,
}

impl TrackedBody {
    pub(crate) fn new(inner: Body, in_flight: InFlight) -> TrackedBody {
        TrackedBody {
            inner,
            _in_flight: in_flight,
        }
    }
}

impl HttpBody for TrackedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// What the idle timer found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IdleCheck {
    /// Look again at this instant.
    RecheckAt(Instant),
    /// Idle for the whole limit: close the connection.
    Close,
}

impl Activity {
    /// Whether a connection idle for `limit` should close at `now`.
    pub(crate) fn check(&self, limit: Duration, now: Instant) -> IdleCheck {
        match self.idle_deadline(limit) {
            None => IdleCheck::RecheckAt(now + limit),
            Some(deadline) if deadline > now => IdleCheck::RecheckAt(deadline),
            Some(_) => IdleCheck::Close,
        }
    }
}
