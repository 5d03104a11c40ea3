//! The connection loop: accepts TCP connections up to `--max-connections`
//! in all and `--max-connections-per-address` from one peer address (the
//! next one is closed at once), terminates TLS when configured (the
//! handshake bounded by the header timeout), closes a connection that has
//! had no request in flight for the header timeout (before its protocol is
//! known, during an HTTP/2 handshake, or idle between requests: see
//! [`crate::idle`]), tells the router the peer address (for per-address
//! rate limits), and on shutdown stops accepting and lets open requests
//! finish.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use crate::idle::{Activity, CLOSE_GRACE, IdleCheck, TrackedBody};
use crate::overload::{ClientCounts, Counted};
use crate::tls::TlsConfig;

/// Connection settings of [`accept_loop`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct ConnectionLimits {
    pub(crate) max_connections: usize,
    pub(crate) max_connections_per_address: usize,
    /// Also the time a connection may stay without a request in flight.
    pub(crate) header_read_timeout: Duration,
}

type Builder = auto::Builder<TokioExecutor>;

/// Serves `app` on `listener` until `shutdown` resolves.
pub(crate) async fn accept_loop(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    clients: Arc<ClientCounts>,
    tls: Option<TlsConfig>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let tls = tls.map(|config| TlsAcceptor::from(config.0));
    // At shutdown every permit is taken back at once, which takes a u32.
    let max_connections = u32::try_from(limits.max_connections.max(1)).unwrap_or(u32::MAX);
    let connections = Arc::new(Semaphore::new(max_connections as usize));
    let per_address = Arc::new(AddressCounts::new(limits.max_connections_per_address));
    let stopping = CancellationToken::new();
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    // A peer that stops answering pings while a request is in flight is
    // gone; one with nothing in flight is closed by the idle limit.
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(Some(limits.header_read_timeout))
        .keep_alive_timeout(limits.header_read_timeout);
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    // Out of file descriptors and the like: back off a moment
                    // rather than spin.
                    tracing::warn!(%err, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Some(address_slot) = per_address.take(peer.ip()) else {
            tracing::warn!(
                limit = limits.max_connections_per_address,
                %peer,
                "closing a new connection: at the connection limit of its address"
            );
            drop(stream);
            continue;
        };
        let Ok(permit) = connections.clone().try_acquire_owned() else {
            tracing::warn!(
                limit = limits.max_connections,
                %peer,
                "closing a new connection: at the connection limit"
            );
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let (builder, stopping, app) = (builder.clone(), stopping.clone(), app.clone());
        let (clients, tls) = (clients.clone(), tls.clone());
        let idle_limit = limits.header_read_timeout;
        tokio::spawn(async move {
            let _open = Counted::new(&clients.connections);
            let connection = Connection {
                peer,
                idle_limit,
                stopping,
            };
            match tls {
                None => connection.serve(&builder, stream, app).await,
                Some(acceptor) => {
                    match tokio::time::timeout(idle_limit, acceptor.accept(stream)).await {
                        Ok(Ok(stream)) => connection.serve(&builder, stream, app).await,
                        Ok(Err(err)) => tracing::debug!(%err, %peer, "TLS handshake failed"),
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                }
            }
            drop(address_slot);
            drop(permit);
        });
    }
    drop(listener);
    stopping.cancel();
    // Every connection holds a permit until it has ended.
    let _all = connections.acquire_many(max_connections).await;
    Ok(())
}

/// One accepted connection.
struct Connection {
    peer: SocketAddr,
    idle_limit: Duration,
    stopping: CancellationToken,
}

impl Connection {
    /// Serves requests until the client closes, the server stops (open
    /// requests finish first) or the connection has had no request in
    /// flight for the idle limit (then it is asked to close and dropped
    /// after [`CLOSE_GRACE`]).
    async fn serve<I>(self, builder: &Builder, io: I, app: Router)
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let peer = self.peer;
        let activity = Activity::new();
        let requests = activity.clone();
        let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
            let in_flight = requests.begin();
            request.extensions_mut().insert(ConnectInfo(peer));
            let app = app.clone();
            async move {
                let response = app.oneshot(request).await.unwrap_or_else(|e| match e {});
                Ok::<_, Infallible>(response.map(|body| TrackedBody::new(body, in_flight)))
            }
        });
        let connection = builder.serve_connection_with_upgrades(TokioIo::new(io), service);
        tokio::pin!(connection);
        let timer = tokio::time::sleep(self.idle_limit);
        tokio::pin!(timer);
        let (mut closing, mut stop_heard) = (false, false);
        let result = loop {
            tokio::select! {
                result = connection.as_mut() => break result,
                () = self.stopping.cancelled(), if !stop_heard => {
                    stop_heard = true;
                    connection.as_mut().graceful_shutdown();
                }
                () = &mut timer => {
                    if closing {
                        tracing::debug!(%peer, "dropping an idle connection that did not close");
                        break Ok(());
                    }
                    let now = tokio::time::Instant::now();
                    match activity.check(self.idle_limit, now) {
                        IdleCheck::RecheckAt(at) => timer.as_mut().reset(at),
                        IdleCheck::Close => {
                            tracing::debug!(%peer, "closing a connection with no request in flight");
                            closing = true;
                            connection.as_mut().graceful_shutdown();
                            timer.as_mut().reset(now + CLOSE_GRACE);
                        }
                    }
                }
            }
        };
        if let Err(err) = result {
            tracing::debug!(%err, %peer, "connection ended with an error");
        }
    }
}

/// Open connections per peer address.
#[derive(Debug)]
struct AddressCounts {
    limit: usize,
    open: Mutex<HashMap<IpAddr, usize>>,
}

/// One connection's place in [`AddressCounts`], given back on drop.
struct AddressSlot {
    counts: Arc<AddressCounts>,
    address: IpAddr,
}

impl AddressCounts {
    fn new(limit: usize) -> AddressCounts {
        AddressCounts {
            limit: limit.max(1),
            open: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, usize>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A place for one more connection from `address`, unless it has its limit.
    fn take(self: &Arc<AddressCounts>, address: IpAddr) -> Option<AddressSlot> {
        let mut open = self.lock();
        let count = open.entry(address).or_insert(0);
        if *count >= self.limit {
            return None;
        }
        *count += 1;
        Some(AddressSlot {
            counts: self.clone(),
            address,
        })
    }
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let mut open = self.counts.lock();
        if let Some(count) = open.get_mut(&self.address) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.address);
            }
        }
    }
}
