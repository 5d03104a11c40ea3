use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use std::sync::atomic::Ordering;

use relayger_core::wire::{ClientHealth, ConnectionHealth, DatabaseHealth, HealthResponse};

use crate::AppState;

const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// `GET /healthz`: 200 when the database answers, 503 otherwise. It needs no
/// token, so load balancers and operators can probe it. It is outside the
/// admission limit and probes on a connection of its own, so it answers
/// truthfully while the server sheds requests.
pub(crate) async fn healthz(State(state): State<AppState>) -> (StatusCode, Json<HealthResponse>) {
    let probe = tokio::time::timeout(PROBE_TIMEOUT, state.store.schema_migration_count()).await;
    let (status, database) = match probe {
        Ok(Ok(count)) => (
            StatusCode::OK,
            DatabaseHealth {
                status: "ok".into(),
                migrations: Some(count),
            },
        ),
        Ok(Err(err)) => {
            tracing::warn!(%err, "health probe failed");
            (StatusCode::SERVICE_UNAVAILABLE, unavailable())
        }
        Err(_) => (StatusCode::SERVICE_UNAVAILABLE, unavailable()),
    };
    let body = HealthResponse {
        status: if status == StatusCode::OK {
            "ok"
        } else {
            "degraded"
        }
        .into(),
        version: env!("CARGO_PKG_VERSION").into(),
        database,
        connections: Some(connection_health(state.store.pool_load())),
        clients: Some(ClientHealth {
            connections: count(state.clients.connections.load(Ordering::Relaxed)),
            reading_bodies: count(state.clients.reading_bodies.load(Ordering::Relaxed)),
        }),
    };
    (status, Json(body))
}

fn unavailable() -> DatabaseHealth {
    DatabaseHealth {
        status: "unavailable".into(),
        migrations: None,
    }
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn connection_health(load: relayger_store::PoolLoad) -> ConnectionHealth {
    ConnectionHealth {
        max: count(load.max),
        in_use: count(load.in_use),
        waiting: count(load.waiting),
    }
}
