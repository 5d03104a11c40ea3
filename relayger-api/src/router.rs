use std::future::Future;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::Uri;
use axum::routing::get;
use relayger_core::ErrorCode;
use relayger_core::lease::DEFAULT_LEASE_MS;
use relayger_store::Store;
use tower_http::trace::TraceLayer;

use crate::ApiError;
use crate::health::healthz;

/// Request bodies above this size are refused before they are read whole.
const MAX_BODY_BYTES: usize = 256 * 1024;

/// Server settings the handlers need.
#[derive(Debug, Clone)]
pub struct ApiConfig {
    /// The lease length granted on claim (`--lease-ms`).
    pub lease_ms: u64,
}

impl Default for ApiConfig {
    fn default() -> Self {
        ApiConfig {
            lease_ms: DEFAULT_LEASE_MS,
        }
    }
}

/// Shared by every handler.
#[derive(Debug, Clone)]
pub struct AppState {
    pub store: Store,
    pub config: ApiConfig,
}

/// The whole HTTP surface.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}

async fn not_found(uri: Uri) -> ApiError {
    ApiError::new(ErrorCode::NotFound, format!("no route for {}", uri.path()))
}

/// Serves until `shutdown` resolves, then lets in-flight requests finish.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown)
        .await
}
