use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{Method, Uri};
use axum::middleware;
use relayger_core::ErrorCode;
use relayger_core::lease::DEFAULT_LEASE_MS;
use relayger_store::Store;
use relayger_store::listen::ListenOptions;
use tokio_util::sync::CancellationToken;
use tower_http::trace::TraceLayer;

use crate::ApiError;
use crate::access_log::access_log;
use crate::hub::Hub;
use crate::listener::{ConnectionLimits, accept_loop};
use crate::overload::{
    Admission, BodyRead, ClientCounts, RateLimit, RateLimits, admit, rate_limit, read_body,
};
use crate::route_table::api_routes;
use crate::socket::SocketCounts;
use crate::tls::TlsConfig;

/// Request bodies above this size are refused before they are read whole
/// (a 64 KiB text, JSON-escaped, plus the envelope fits).
const MAX_BODY_BYTES: usize = 512 * 1024;

/// Who may register.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Registration {
    /// Anyone who can reach the server.
    Open,
    /// Only with an invite code from `relayger-server invites create`.
    Closed,
}

/// Server settings the handlers need.
#[derive(Debug, Clone)]
pub struct ApiConfig {
    /// The lease length granted on claim (`--lease-ms`).
    pub lease_ms: u64,
    pub registration: Registration,
    /// API requests handled at once (`--max-in-flight`); the next one is
    /// refused with 429 at once. `/healthz` is not counted.
    pub max_in_flight: usize,
    /// The LISTEN connection's liveness check (a self-NOTIFY every
    /// `ping_every`, answered within `ping_timeout`, or reconnect).
    pub listen: ListenOptions,
    /// Open connections (`--max-connections`); the next one is closed at once.
    pub max_connections: usize,
    /// Open connections from one peer address
    /// (`--max-connections-per-address`); the next one is closed at once.
    pub max_connections_per_address: usize,
    /// Time for a client to send its request headers
    /// (`--header-timeout-ms`); the connection closes after it. Also how
    /// long a connection may stay with no request in flight: before its
    /// protocol is known, during an HTTP/2 handshake, between requests.
    pub header_read_timeout: Duration,
    /// Time for a client to send its whole body (`--body-timeout-ms`); 408
    /// `request_timeout` after it. The body is read before the request takes
    /// an in-flight slot.
    pub body_read_timeout: Duration,
    /// Per-token rate (`--token-rate`, `--token-burst`); `None` or a zero
    /// rate: no limit.
    pub token_rate: Option<RateLimit>,
    /// Per-address rate of requests without a token, registration above all
    /// (`--address-rate`, `--address-burst`); `None` or zero: no limit.
    pub address_rate: Option<RateLimit>,
    /// Lookups of identities by number per person, its agents' included
    /// (`--lookup-rate`, `--lookup-burst`); `None` or zero: no limit.
    pub lookup_rate: Option<RateLimit>,
    /// Agents one person may own (`--max-agents-per-person`); the next
    /// creation is 409 `conflict`.
    pub max_agents_per_person: u32,
    /// WebSockets one token may hold open on this instance
    /// (`--max-sockets-per-token`); the next upgrade is 429.
    pub max_sockets_per_token: usize,
    /// How often an open socket pings and re-checks its token; a check that
    /// cannot reach the database closes the socket.
    pub socket_check_interval: Duration,
    /// Terminate TLS with this certificate (`--tls-cert`, `--tls-key`);
    /// `None`: plain HTTP.
    pub tls: Option<TlsConfig>,
    /// The URL clients reach this server at (`--public-url`), as checked by
    /// `relayger_core::a2a::serve::public_url`: the base of the A2A
    /// interface URL in agent cards. `None`: the scheme served and the
    /// request's `Host`.
    pub public_url: Option<String>,
}

/// A worker holds one socket; a fleet sharing one token fits.
pub const DEFAULT_MAX_SOCKETS_PER_TOKEN: usize = 64;
/// Socket keep-alive and token re-check period.
pub const DEFAULT_SOCKET_CHECK_INTERVAL: Duration = Duration::from_secs(20);

/// Open connections at once: each may hold a body of up to 512 KiB while it
/// arrives, so this also bounds the memory slow clients can take.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
/// A quarter of the connections: one address cannot hold them all. Behind a
/// reverse proxy every client has the proxy's address; raise it there.
pub const DEFAULT_MAX_CONNECTIONS_PER_ADDRESS: usize = 256;
/// Headers arrive in one round trip from any real client.
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// 512 KiB in 10 s is 50 KiB/s: slower than any client worth serving.
pub const DEFAULT_BODY_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// A whole worker fleet shares one agent token: claims, heartbeats and
/// finishes of hundreds of concurrent jobs fit well under this.
pub const DEFAULT_TOKEN_RATE: RateLimit = RateLimit {
    per_second: 1000,
    burst: 2000,
};
/// A person's assistants, with room to spare; bounds how many identities
/// one registration can mint.
pub const DEFAULT_MAX_AGENTS_PER_PERSON: u32 = 100;
/// `GET /v1/identities/{number}` per person (its agents included): a client fetches a
/// sender's key once, so this is plenty, and walking every number is slow.
pub const DEFAULT_LOOKUP_RATE: RateLimit = RateLimit {
    per_second: 2,
    burst: 60,
};
/// Registrations (and refused token-less requests) from one address.
pub const DEFAULT_ADDRESS_RATE: RateLimit = RateLimit {
    per_second: 20,
    burst: 200,
};

/// Enough for every worker of a busy agent fleet to claim, heartbeat and
/// finish at once, small enough that the pool's acquire timeout (not an
/// unbounded queue) decides what waits.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 512;

impl Default for ApiConfig {
    fn default() -> Self {
        ApiConfig {
            lease_ms: DEFAULT_LEASE_MS,
            registration: Registration::Open,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            listen: ListenOptions::default(),
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_connections_per_address: DEFAULT_MAX_CONNECTIONS_PER_ADDRESS,
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            body_read_timeout: DEFAULT_BODY_READ_TIMEOUT,
            token_rate: Some(DEFAULT_TOKEN_RATE),
            address_rate: Some(DEFAULT_ADDRESS_RATE),
            lookup_rate: Some(DEFAULT_LOOKUP_RATE),
            max_agents_per_person: DEFAULT_MAX_AGENTS_PER_PERSON,
            max_sockets_per_token: DEFAULT_MAX_SOCKETS_PER_TOKEN,
            socket_check_interval: DEFAULT_SOCKET_CHECK_INTERVAL,
            tls: None,
            public_url: None,
        }
    }
}

/// Shared by every handler.
#[derive(Debug, Clone)]
pub struct AppState {
    pub store: Store,
    pub config: ApiConfig,
    pub(crate) hub: Hub,
    pub(crate) rate_limits: RateLimits,
    pub(crate) clients: Arc<ClientCounts>,
    pub(crate) sockets: SocketCounts,
}

impl AppState {
    pub fn new(store: Store, config: ApiConfig) -> AppState {
        AppState {
            rate_limits: RateLimits::new(
                config.token_rate,
                config.address_rate,
                config.lookup_rate,
            ),
            store,
            config,
            hub: Hub::default(),
            clients: Arc::default(),
            sockets: SocketCounts::default(),
        }
    }
}

impl AppState {
    /// Resolves once `serve` has subscribed to cross-instance wake signals;
    /// before that, a NOTIFY from another instance could pass unheard.
    pub async fn wait_until_listening(&self) {
        self.hub.wait_until_listening().await;
    }
}

/// The whole HTTP surface: the routes of [`crate::ROUTE_TABLE`], an
/// envelope for unknown routes and methods, and, from the outside in:
/// the access log with request ids, tracing, the body limit, rate limits,
/// the bounded body read, admission control.
pub fn router(state: AppState) -> Router {
    api_routes()
        .merge(crate::dashboard::routes())
        .route(
            crate::openapi::OPENAPI_PATH,
            axum::routing::get(crate::openapi::serve_document),
        )
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(
            Admission::new(state.config.max_in_flight),
            admit,
        ))
        .layer(middleware::from_fn_with_state(
            BodyRead {
                max_bytes: MAX_BODY_BYTES,
                timeout: state.config.body_read_timeout,
                counts: state.clients.clone(),
            },
            read_body,
        ))
        .layer(middleware::from_fn_with_state(
            state.rate_limits.clone(),
            rate_limit,
        ))
        .layer(middleware::from_fn(
            crate::dashboard::socket_token_from_subprotocol,
        ))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(TraceLayer::new_for_http())
        .layer(middleware::from_fn(access_log))
        .with_state(state)
}

async fn not_found(uri: Uri) -> ApiError {
    ApiError::new(ErrorCode::NotFound, format!("no route for {}", uri.path()))
}

async fn method_not_allowed(method: Method, uri: Uri) -> ApiError {
    ApiError::new(
        ErrorCode::BadRequest,
        format!("{method} is not allowed on {}", uri.path()),
    )
}

/// Serves until `shutdown` resolves, then lets in-flight requests finish.
/// Also runs the wake relay (local sockets, NOTIFYs) and the LISTEN connection.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let background = CancellationToken::new();
    state
        .hub
        .spawn_background(state.store.clone(), state.config.listen, background.clone());
    let limits = ConnectionLimits {
        max_connections: state.config.max_connections,
        max_connections_per_address: state.config.max_connections_per_address,
        header_read_timeout: state.config.header_read_timeout,
    };
    let rate_limits = state.rate_limits.clone();
    let forget = background.clone();
    tokio::spawn(async move {
        let mut every = tokio::time::interval(Duration::from_secs(60));
        loop {
            tokio::select! {
                _ = every.tick() => rate_limits.forget_idle(),
                () = forget.cancelled() => break,
            }
        }
    });
    let clients = state.clients.clone();
    let tls = state.config.tls.clone();
    let result = accept_loop(listener, router(state), limits, clients, tls, shutdown).await;
    background.cancel();
    result
}
