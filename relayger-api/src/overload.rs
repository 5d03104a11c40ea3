//! Admission control. A server that accepts every request under overload
//! queues them until each one times out, and then answers none in time.
//! Instead at most `max_in_flight` API requests run at once; the next one is
//! refused at once with 429 `rate_limited` and `Retry-After`, before it reads
//! its body or touches the database, so it changed nothing and is safe to
//! retry. Requests that are admitted but find every database connection busy
//! for the pool's acquire timeout get 503 `unavailable` (see `ApiError`).
//! `/healthz` is outside this limit.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use relayger_core::ErrorCode;
use tokio::sync::Semaphore;

use crate::ApiError;

/// Probes must be answered while everything else is being shed.
const HEALTH_PATH: &str = "/healthz";

/// The in-flight request budget shared by every API route.
#[derive(Debug, Clone)]
pub(crate) struct Admission {
    permits: Arc<Semaphore>,
    limit: usize,
}

impl Admission {
    pub(crate) fn new(limit: usize) -> Admission {
        let limit = limit.max(1);
        Admission {
            permits: Arc::new(Semaphore::new(limit)),
            limit,
        }
    }
}

/// Runs the request while holding a permit, or sheds it. A WebSocket
/// upgrade holds its permit only until the upgrade answers; the open socket
/// does not count.
pub(crate) async fn admit(
    State(admission): State<Admission>,
    request: Request,
    next: Next,
) -> Response {
    if request.uri().path() == HEALTH_PATH {
        return next.run(request).await;
    }
    let Ok(permit) = admission.permits.clone().try_acquire_owned() else {
        tracing::warn!(
            limit = admission.limit,
            "shedding a request: too many in flight"
        );
        return ApiError::new(
            ErrorCode::RateLimited,
            format!(
                "the server is handling its limit of {} requests; retry shortly",
                admission.limit
            ),
        )
        .into_response();
    };
    let response = next.run(request).await;
    drop(permit);
    response
}
