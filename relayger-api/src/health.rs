use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use relayger_core::wire::{DatabaseHealth, HealthResponse};

use crate::AppState;

const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// `GET /healthz`: 200 when the database answers, 503 otherwise. It needs no
/// token, so load balancers and operators can probe it.
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
    };
    (status, Json(body))
}

fn unavailable() -> DatabaseHealth {
    DatabaseHealth {
        status: "unavailable".into(),
        migrations: None,
    }
}
