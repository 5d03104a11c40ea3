use std::future::Future;

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
use crate::hub::Hub;
use crate::overload::{Admission, admit};
use crate::route_table::api_routes;

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
}

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
        }
    }
}

/// Shared by every handler.
#[derive(Debug, Clone)]
pub struct AppState {
    pub store: Store,
    pub config: ApiConfig,
    pub(crate) hub: Hub,
}

impl AppState {
    pub fn new(store: Store, config: ApiConfig) -> AppState {
        AppState {
            store,
            config,
            hub: Hub::default(),
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
/// envelope for unknown routes and methods, admission control, the body
/// limit, and tracing.
pub fn router(state: AppState) -> Router {
    api_routes()
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(
            Admission::new(state.config.max_in_flight),
            admit,
        ))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(TraceLayer::new_for_http())
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
    let result = axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown)
        .await;
    background.cancel();
    result
}
