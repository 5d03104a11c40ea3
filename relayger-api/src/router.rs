use std::future::Future;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{Method, Uri};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{delete, get, post, put};
use relayger_core::ErrorCode;
use relayger_core::lease::DEFAULT_LEASE_MS;
use relayger_store::Store;
use tokio_util::sync::CancellationToken;
use tower_http::trace::TraceLayer;

use crate::ApiError;
use crate::health::healthz;
use crate::hub::Hub;
use crate::routes::{contacts, identity, messages, rooms, runtime};
use crate::socket::{identity_socket, runtime_socket};

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
}

impl Default for ApiConfig {
    fn default() -> Self {
        ApiConfig {
            lease_ms: DEFAULT_LEASE_MS,
            registration: Registration::Open,
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

/// The whole HTTP surface.
pub fn router(state: AppState) -> Router {
    let v1 = Router::new()
        .route("/register", post(identity::register))
        .route("/agents", post(identity::create_agent))
        .route("/me", get(identity::me))
        .route("/identities/{number}", get(identity::identity))
        .route(
            "/tokens",
            post(identity::create_token).get(identity::list_tokens),
        )
        .route("/tokens/{id}", delete(identity::revoke_token))
        .route("/contacts", get(contacts::list))
        .route(
            "/contacts/requests",
            get(contacts::requests).post(contacts::request),
        )
        .route("/contacts/requests/{number}", delete(contacts::withdraw))
        .route("/contacts/requests/{number}/accept", post(contacts::accept))
        .route(
            "/contacts/requests/{number}/decline",
            post(contacts::decline),
        )
        .route("/contacts/{number}", delete(contacts::remove))
        .route(
            "/contacts/{number}/block",
            post(contacts::block).delete(contacts::unblock),
        )
        .route("/rooms", get(rooms::list).post(rooms::create))
        .route("/rooms/{room}", get(rooms::get))
        .route("/rooms/{room}/members", post(rooms::add_member))
        .route("/rooms/{room}/leave", post(rooms::leave))
        .route("/rooms/{room}/ack", post(messages::ack))
        .route("/rooms/{room}/messages/{message}", get(messages::message))
        .route(
            "/rooms/{room}/messages/{message}/thread",
            get(messages::thread),
        )
        .route("/messages", post(messages::send))
        .route("/inbox", get(messages::inbox))
        .route("/socket", get(identity_socket))
        .route("/runtimes", post(runtime::register).get(runtime::list))
        .route(
            "/runtimes/{id}",
            get(runtime::inspect).delete(runtime::delete),
        )
        .route("/runtimes/{id}/configure", post(runtime::configure))
        .route("/runtimes/{id}/claim", post(runtime::claim))
        .route(
            "/runtimes/{id}/jobs/{job}/heartbeat",
            post(runtime::heartbeat),
        )
        .route("/runtimes/{id}/jobs/{job}/finish", post(runtime::finish))
        .route("/runtimes/{id}/jobs/{job}/release", post(runtime::release))
        .route("/runtimes/{id}/jobs/{job}/retry", post(runtime::retry))
        .route("/runtimes/{id}/dead-letters", get(runtime::dead_letters))
        .route("/runtimes/{id}/log", get(runtime::log))
        .route("/runtimes/{id}/stats", get(runtime::stats))
        .route("/runtimes/{id}/notes/{room}", get(runtime::notes))
        .route("/runtimes/{id}/notes/{room}/{key}", put(runtime::put_note))
        .route("/runtimes/{id}/socket", get(runtime_socket));
    Router::new()
        .route("/healthz", get(healthz))
        .nest("/v1", v1)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(
            state.clone(),
            poke_after_writes,
        ))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}

/// Every successful write may have queued wake signals in the outbox: let
/// the dispatcher turn them into NOTIFYs now rather than on its next pass.
async fn poke_after_writes(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let is_write = !matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    );
    let response = next.run(request).await;
    if is_write && response.status().is_success() {
        state.hub.poke_dispatcher();
    }
    response
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
/// Also runs the outbox dispatcher and the LISTEN connection.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let background = CancellationToken::new();
    state
        .hub
        .spawn_background(state.store.clone(), background.clone());
    let result = axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown)
        .await;
    background.cancel();
    result
}
