//! The connection loop: accepts TCP connections up to `--max-connections`
//! (the next one is closed at once), terminates TLS when configured (the
//! handshake bounded by the header timeout), gives each a header read
//! timeout, tells
//! the router the peer address (for per-address rate limits), and on
//! shutdown stops accepting and lets open requests finish.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

use crate::overload::{ClientCounts, Counted};
use crate::tls::TlsConfig;

/// Connection settings of [`accept_loop`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct ConnectionLimits {
    pub(crate) max_connections: usize,
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
    let connections = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    builder.http2().timer(TokioTimer::new());
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
        let (builder, watcher, app) = (builder.clone(), graceful.watcher(), app.clone());
        let (clients, tls) = (clients.clone(), tls.clone());
        let handshake_timeout = limits.header_read_timeout;
        tokio::spawn(async move {
            let _open = Counted::new(&clients.connections);
            match tls {
                None => serve_connection(&builder, watcher, stream, peer, app).await,
                Some(acceptor) => {
                    match tokio::time::timeout(handshake_timeout, acceptor.accept(stream)).await {
                        Ok(Ok(stream)) => {
                            serve_connection(&builder, watcher, stream, peer, app).await;
                        }
                        Ok(Err(err)) => tracing::debug!(%err, %peer, "TLS handshake failed"),
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                }
            }
            drop(permit);
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

async fn serve_connection<I>(
    builder: &Builder,
    watcher: Watcher,
    io: I,
    peer: SocketAddr,
    app: Router,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
        request.extensions_mut().insert(ConnectInfo(peer));
        let app = app.clone();
        async move { Ok::<_, Infallible>(app.oneshot(request).await.unwrap_or_else(|e| match e {})) }
    });
    let connection = builder.serve_connection_with_upgrades(TokioIo::new(io), service);
    if let Err(err) = watcher.watch(connection).await {
        tracing::debug!(%err, %peer, "connection ended with an error");
    }
}
