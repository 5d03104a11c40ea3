//! `GET /v1/socket`: a WebSocket that carries only content-free
//! `{"event":"inbox_changed"}` frames for the token's identity. It closes
//! when the token is revoked.

use std::time::Duration;

use axum::extract::State;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::response::Response;
use relayger_core::wire::{Scope, SocketSignal};
use tokio::sync::broadcast::error::RecvError;

use crate::extract::Auth;
use crate::hub::HubSignal;
use crate::{ApiError, AppState};

/// Keep-alive pings; also when the token is re-checked (revocation on
/// another instance whose NOTIFY was missed).
const PING_INTERVAL: Duration = Duration::from_secs(20);
/// Clients only ever send pings/pongs and close frames.
const MAX_CLIENT_MESSAGE: usize = 1024;

pub(crate) async fn identity_socket(
    State(state): State<AppState>,
    auth: Auth,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    auth.require(Scope::Read)?;
    let upgrade = upgrade.map_err(|rejection| {
        ApiError::new(
            relayger_core::ErrorCode::BadRequest,
            format!("this endpoint is a WebSocket: {}", rejection.body_text()),
        )
    })?;
    Ok(upgrade
        .max_message_size(MAX_CLIENT_MESSAGE)
        // Subscribe before the handshake completes: a signal committed after
        // the client sees the upgrade (and, say, claims) must reach it.
        .on_upgrade({
            let signals = state.hub.subscribe(auth.0.identity.id);
            move |socket| serve_socket(socket, state, auth, signals)
        }))
}

/// `GET /v1/runtimes/{id}/socket`: the same signals, for a runtime's agent.
pub(crate) async fn runtime_socket(
    State(state): State<AppState>,
    auth: Auth,
    crate::extract::ApiPath(runtime_id): crate::extract::ApiPath<uuid::Uuid>,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    crate::routes::runtime::socket_check(&state, &auth, runtime_id).await?;
    identity_socket(State(state), auth, upgrade).await
}

async fn serve_socket(
    mut socket: WebSocket,
    state: AppState,
    auth: Auth,
    mut signals: tokio::sync::broadcast::Receiver<HubSignal>,
) {
    let _open = crate::metrics::OpenSocket::new();
    let identity = auth.0.identity.id;
    let token = auth.0.token_id;
    let mut ping = tokio::time::interval(PING_INTERVAL);
    ping.tick().await;
    let frame = serde_json::to_string(&SocketSignal::InboxChanged).unwrap_or_default();
    loop {
        tokio::select! {
            signal = signals.recv() => match signal {
                Ok(HubSignal::InboxChanged) | Err(RecvError::Lagged(_)) => {
                    if socket.send(Message::Text(frame.clone().into())).await.is_err() {
                        break;
                    }
                }
                Ok(HubSignal::TokenRevoked(revoked)) if revoked == token => break,
                Ok(HubSignal::TokenRevoked(_)) => {}
                Err(RecvError::Closed) => break,
            },
            incoming = socket.recv() => match incoming {
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                Some(Ok(_)) => {}
            },
            _ = ping.tick() => {
                if !state.store.token_is_active(token).await.unwrap_or(true) {
                    break;
                }
                if socket.send(Message::Ping(Vec::new().into())).await.is_err() {
                    break;
                }
            }
        }
    }
    let _ = socket.send(Message::Close(None)).await;
    drop(signals);
    state.hub.prune(identity);
}
