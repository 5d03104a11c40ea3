//! `GET /v1/socket`: a WebSocket that carries only content-free
//! `{"event":"inbox_changed"}` frames for the token's identity; for a
//! room-restricted token, only when one of its rooms changed (a new
//! message, a member joining or leaving). Opened with
//! `?runtimeChanges=true` (the dashboard does), it also carries
//! `{"event":"runtime_changed"}` after each claim, finish, heartbeat,
//! release, retry or configuration of one of the identity's runtimes, on
//! any instance; workers do not ask for it, and a room-restricted token
//! does not get it (a change may be in any room). The identity socket (not
//! a runtime's) also carries `{"event":"delivery_changed"}` when a
//! recipient's job of one of the identity's questions changed state; it
//! names no question or room, so a room-restricted token gets it too. It closes
//! when the token is revoked, and also when the revocation check cannot
//! reach the database (fail closed: the client reconnects, and the upgrade
//! checks the token again). Client frames and messages are limited to
//! 1 KiB, and one token holds at most `max_sockets_per_token` sockets on an
//! instance.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::response::Response;
use relayger_core::wire::{Scope, SocketSignal};
use relayger_store::RoomsState;
use serde::Deserialize;
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::RecvError;
use uuid::Uuid;

use crate::extract::{ApiPath, ApiQuery, Auth};
use crate::hub::HubSignal;
use crate::{ApiError, AppState};

/// Clients only ever send pings/pongs and close frames: a larger frame (or
/// message) closes the socket as soon as its header says so, before its
/// payload is read.
const MAX_CLIENT_MESSAGE: usize = 1024;

/// Open sockets per token on this instance.
#[derive(Debug, Clone, Default)]
pub(crate) struct SocketCounts(Arc<Mutex<HashMap<Uuid, usize>>>);

/// One socket's place in [`SocketCounts`], given back on drop.
struct SocketSlot {
    counts: SocketCounts,
    token: Uuid,
}

impl SocketCounts {
    fn reserve(&self, token: Uuid, max: usize) -> Option<SocketSlot> {
        let mut counts = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let open = counts.entry(token).or_insert(0);
        if *open >= max {
            return None;
        }
        *open += 1;
        Some(SocketSlot {
            counts: self.clone(),
            token,
        })
    }
}

impl Drop for SocketSlot {
    fn drop(&mut self) {
        let mut counts = self.counts.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(open) = counts.get_mut(&self.token) {
            *open = open.saturating_sub(1);
            if *open == 0 {
                counts.remove(&self.token);
            }
        }
    }
}

/// `runtimeChanges=true`: also signal changes of the identity's runtimes.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct SocketQuery {
    runtime_changes: Option<bool>,
}

pub(crate) async fn identity_socket(
    State(state): State<AppState>,
    auth: Auth,
    ApiQuery(query): ApiQuery<SocketQuery>,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    open_socket(state, auth, query, upgrade, Deliveries::Signal).await
}

/// Whether a socket signals changes of its identity's questions' delivery:
/// the identity socket does, a runtime's socket (a worker's) does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Deliveries {
    Signal,
    Ignore,
}

/// `GET /v1/runtimes/{id}/socket`: the same signals, for a runtime's agent.
pub(crate) async fn runtime_socket(
    State(state): State<AppState>,
    auth: Auth,
    ApiPath(runtime_id): ApiPath<Uuid>,
    ApiQuery(query): ApiQuery<SocketQuery>,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    crate::routes::runtime::socket_check(&state, &auth, runtime_id).await?;
    open_socket(state, auth, query, upgrade, Deliveries::Ignore).await
}

async fn open_socket(
    state: AppState,
    auth: Auth,
    query: SocketQuery,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
    deliveries: Deliveries,
) -> Result<Response, ApiError> {
    auth.require(Scope::Read)?;
    let upgrade = upgrade.map_err(|rejection| {
        ApiError::new(
            relayger_core::ErrorCode::BadRequest,
            format!("this endpoint is a WebSocket: {}", rejection.body_text()),
        )
    })?;
    // Before the subscription: whatever commits after the client sees the
    // upgrade differs from this.
    let rooms = match auth.0.rooms {
        Some(_) => Some(state.store.restricted_rooms_state(&auth.0.caller()).await?),
        None => None,
    };
    let max = state.config.max_sockets_per_token;
    let slot = state.sockets.reserve(auth.0.token_id, max).ok_or_else(|| {
        ApiError::new(
            relayger_core::ErrorCode::RateLimited,
            format!("this token already has its limit of {max} open sockets"),
        )
    })?;
    Ok(upgrade
        .max_message_size(MAX_CLIENT_MESSAGE)
        .max_frame_size(MAX_CLIENT_MESSAGE)
        // Subscribe before the handshake completes: a signal committed after
        // the client sees the upgrade (and, say, claims) must reach it.
        .on_upgrade({
            let signals = state.hub.subscribe(auth.0.identity.id);
            let changes = (query.runtime_changes.unwrap_or(false) && rooms.is_none())
                .then(|| state.hub.subscribe_runtime_changes(auth.0.identity.id));
            // Counted from the handshake's answer, as the slot is held: a
            // client that saw the upgrade and scrapes finds its socket
            // counted (the task below may not have started yet). A failed
            // upgrade drops both with the closure.
            let open = crate::metrics::OpenSocket::new();
            move |socket| async move {
                serve_socket(socket, state, auth, (signals, rooms), changes, deliveries).await;
                drop((slot, open));
            }
        }))
}

/// The next signal on an optional subscription (never, without one).
async fn next_change(
    changes: &mut Option<broadcast::Receiver<HubSignal>>,
) -> Result<HubSignal, RecvError> {
    match changes {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// Whether a wake concerns the socket: always for an unrestricted token;
/// for a restricted one (`rooms`: its rooms' state when it last heard),
/// when one of its rooms changed since.
async fn concerns_socket(
    state: &AppState,
    auth: &Auth,
    rooms: &mut Option<RoomsState>,
) -> Result<bool, relayger_store::StoreError> {
    let Some(last) = rooms else {
        return Ok(true);
    };
    let now = state.store.restricted_rooms_state(&auth.0.caller()).await?;
    if now == *last {
        return Ok(false);
    }
    *last = now;
    Ok(true)
}

async fn serve_socket(
    mut socket: WebSocket,
    state: AppState,
    auth: Auth,
    (mut signals, mut rooms): (broadcast::Receiver<HubSignal>, Option<RoomsState>),
    mut changes: Option<broadcast::Receiver<HubSignal>>,
    deliveries: Deliveries,
) {
    let identity = auth.0.identity.id;
    let token = auth.0.token_id;
    // Keep-alive pings; also when the token is re-checked (revocation on
    // another instance whose NOTIFY was missed).
    let mut ping = tokio::time::interval(state.config.socket_check_interval);
    ping.tick().await;
    let frame = serde_json::to_string(&SocketSignal::InboxChanged).unwrap_or_default();
    let change_frame = serde_json::to_string(&SocketSignal::RuntimeChanged).unwrap_or_default();
    let delivery_frame = serde_json::to_string(&SocketSignal::DeliveryChanged).unwrap_or_default();
    loop {
        tokio::select! {
            signal = signals.recv() => {
                let published = match signal {
                    Ok(HubSignal::InboxChanged(published)) => published,
                    // Some signals were missed: at least one change.
                    Err(RecvError::Lagged(_)) => None,
                    Ok(HubSignal::TokenRevoked(revoked)) if revoked == token => break,
                    Ok(HubSignal::TokenRevoked(_) | HubSignal::RuntimeChanged) => continue,
                    Ok(HubSignal::DeliveryChanged) => {
                        if deliveries == Deliveries::Ignore {
                            continue;
                        }
                        if socket.send(Message::Text(delivery_frame.clone().into())).await.is_err() {
                            break;
                        }
                        continue;
                    }
                    Err(RecvError::Closed) => break,
                };
                match concerns_socket(&state, &auth, &mut rooms).await {
                    Ok(true) => {}
                    Ok(false) => continue,
                    Err(err) => {
                        // Fail closed, as below: the client reconnects.
                        tracing::warn!(%err, "closing a socket: its rooms could not be read");
                        break;
                    }
                }
                // Measured as the frame goes out (so a client that saw it
                // and scrapes finds it counted).
                if let Some(published) = published {
                    crate::metrics::record_signal_lag(published);
                }
                if socket.send(Message::Text(frame.clone().into())).await.is_err() {
                    break;
                }
            }
            // A change, or a lag (some changes, at least one).
            change = next_change(&mut changes) => match change {
                Ok(
                    HubSignal::TokenRevoked(_)
                    | HubSignal::InboxChanged(_)
                    | HubSignal::DeliveryChanged,
                ) => {}
                Ok(HubSignal::RuntimeChanged) | Err(RecvError::Lagged(_)) => {
                    if socket.send(Message::Text(change_frame.clone().into())).await.is_err() {
                        break;
                    }
                }
                Err(RecvError::Closed) => break,
            },
            incoming = socket.recv() => match incoming {
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                Some(Ok(_)) => {}
            },
            _ = ping.tick() => {
                match state.store.token_is_active(token).await {
                    Ok(true) => {}
                    Ok(false) => break,
                    Err(err) => {
                        // Fail closed: a socket whose revocation cannot be
                        // checked does not stay open on trust.
                        tracing::warn!(%err, "closing a socket: its token could not be checked");
                        break;
                    }
                }
                if socket.send(Message::Ping(Vec::new().into())).await.is_err() {
                    break;
                }
            }
        }
    }
    let _ = socket.send(Message::Close(None)).await;
    drop(signals);
    drop(changes);
    state.hub.prune(identity);
}
