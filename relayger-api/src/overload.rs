//! Admission control. A server that accepts every request under overload
//! queues them until each one times out, and then answers none in time.
//! Instead at most `max_in_flight` API requests run at once; the next one is
//! refused at once with 429 `rate_limited` and `Retry-After`, before it
//! touches the database, so it changed nothing and is safe to retry. Requests that are admitted but find every database connection busy
//! for the pool's acquire timeout get 503 `unavailable` (see `ApiError`).
//! `/healthz` is outside this limit.
//!
//! In front of that: per-token and per-address rate limits ([`rate_limit`]),
//! and the body is read whole, bounded in size and time, before the permit
//! is taken ([`read_body`]), so slow clients hold connections, not slots.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, MatchedPath, Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use http_body_util::BodyExt;
use relayger_core::ErrorCode;
use relayger_store::secret_hash;
use tokio::sync::Semaphore;
use uuid::Uuid;

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

/// A sustained rate and a burst, per key (token or address).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    /// Requests a second, sustained.
    pub per_second: u32,
    /// Requests that may come at once after a quiet spell.
    pub burst: u32,
}

impl RateLimit {
    fn quota(self) -> Option<Quota> {
        let per_second = NonZeroU32::new(self.per_second)?;
        let burst = NonZeroU32::new(self.burst.max(self.per_second))?;
        Some(Quota::per_second(per_second).allow_burst(burst))
    }
}

/// Per-token and per-address rate limits, checked before the body is read
/// and before the admission permit: one token or one address cannot take
/// every in-flight slot. A request to a route that takes no token
/// (registration above all) counts against its peer address whatever
/// headers it carries, as does one without a token. A request with a bearer
/// token counts against that token (keyed by the token's hash, so no secret
/// is kept) and, when the token turns out unknown or malformed, against its
/// address too ([`RateLimits::count_unknown_token`]): made-up tokens do not
/// give fresh buckets. `/healthz` is not limited.
#[derive(Debug, Clone, Default)]
pub(crate) struct RateLimits {
    per_token: Option<Arc<DefaultKeyedRateLimiter<Vec<u8>>>>,
    per_address: Option<Arc<DefaultKeyedRateLimiter<IpAddr>>>,
    /// Addresses whose unknown tokens used up their allowance, and until
    /// when their next unknown token is refused without a lookup.
    refusing_unknown: Arc<Mutex<HashMap<IpAddr, Instant>>>,
    /// Lookups of other identities by number, per accountable person (its
    /// tokens and all its agents' together), so numbers cannot be walked as
    /// a directory, nor faster by creating agents.
    per_lookup: Option<Arc<DefaultKeyedRateLimiter<Uuid>>>,
}

impl RateLimits {
    pub(crate) fn new(
        per_token: Option<RateLimit>,
        per_address: Option<RateLimit>,
        per_lookup: Option<RateLimit>,
    ) -> RateLimits {
        RateLimits {
            per_lookup: per_lookup
                .and_then(RateLimit::quota)
                .map(|q| Arc::new(RateLimiter::keyed(q))),
            per_token: per_token
                .and_then(RateLimit::quota)
                .map(|q| Arc::new(RateLimiter::keyed(q))),
            per_address: per_address
                .and_then(RateLimit::quota)
                .map(|q| Arc::new(RateLimiter::keyed(q))),
            refusing_unknown: Arc::default(),
        }
    }

    fn refusing(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, Instant>> {
        self.refusing_unknown
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// 429 `rate_limited`, before a token is looked up, while `peer` is over
    /// its allowance of unknown tokens.
    pub(crate) fn check_unknown_tokens(&self, peer: Option<IpAddr>) -> Result<(), ApiError> {
        let Some(peer) = peer else { return Ok(()) };
        let mut refusing = self.refusing();
        match refusing.get(&peer) {
            Some(until) if *until > Instant::now() => Err(ApiError::new(
                ErrorCode::RateLimited,
                "too many requests with unknown tokens from this address; retry shortly",
            )),
            Some(_) => {
                refusing.remove(&peer);
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// A token presented from `peer` was unknown, revoked or malformed: it
    /// counts against the address, and once the address is over its rate
    /// its next unknown tokens are refused before any lookup.
    pub(crate) fn count_unknown_token(&self, peer: Option<IpAddr>) {
        let (Some(limiter), Some(peer)) = (&self.per_address, peer) else {
            return;
        };
        if let Err(not_until) = limiter.check_key(&peer) {
            let wait = not_until.wait_time_from(DefaultClock::default().now());
            self.refusing().insert(peer, Instant::now() + wait);
        }
    }

    /// Forgets keys whose buckets are full again, so the maps stay as small
    /// as the set of recently active clients.
    pub(crate) fn forget_idle(&self) {
        if let Some(limiter) = &self.per_token {
            limiter.retain_recent();
            limiter.shrink_to_fit();
        }
        if let Some(limiter) = &self.per_address {
            limiter.retain_recent();
            limiter.shrink_to_fit();
        }
        if let Some(limiter) = &self.per_lookup {
            limiter.retain_recent();
            limiter.shrink_to_fit();
        }
        let now = Instant::now();
        self.refusing().retain(|_, until| *until > now);
    }

    /// 429 `rate_limited` when `person` (with its agents) has looked up too
    /// many numbers.
    pub(crate) fn check_lookup(&self, person: Uuid) -> Result<(), ApiError> {
        match &self.per_lookup {
            Some(limiter) => limiter.check_key(&person).map_err(|_| {
                ApiError::new(
                    ErrorCode::RateLimited,
                    "too many identity lookups; retry shortly",
                )
            }),
            None => Ok(()),
        }
    }

    /// `Err` with how long to wait when the request's key is over its rate.
    fn check(&self, request: &Request) -> Result<(), Duration> {
        let bearer = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|secret| !secret.is_empty())
            .filter(|_| takes_token(request));
        let outcome = match bearer {
            Some(secret) => match &self.per_token {
                Some(limiter) => limiter.check_key(&secret_hash(secret)),
                None => Ok(()),
            },
            None => match (&self.per_address, peer_address(request)) {
                (Some(limiter), Some(ip)) => limiter.check_key(&ip),
                _ => Ok(()),
            },
        };
        outcome.map_err(|not_until| not_until.wait_time_from(DefaultClock::default().now()))
    }
}

/// The TCP peer's address, as the connection loop recorded it.
fn peer_address<B>(request: &axum::http::Request<B>) -> Option<IpAddr> {
    request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(addr)| addr.ip())
}

/// Whether the request's route is one that takes a token: only then may a
/// bearer header choose the bucket. Registration, the dashboard's static
/// files and unknown paths count against the address whatever they carry.
fn takes_token(request: &Request) -> bool {
    request
        .extensions()
        .get::<MatchedPath>()
        .is_some_and(|matched| crate::route_table::takes_token(matched.as_str()))
}

/// Refuses a request over its token's or address's rate with 429
/// `rate_limited` and `Retry-After`, before anything else is done for it.
pub(crate) async fn rate_limit(
    State(limits): State<RateLimits>,
    request: Request,
    next: Next,
) -> Response {
    if request.uri().path() == HEALTH_PATH {
        return next.run(request).await;
    }
    if let Err(wait) = limits.check(&request) {
        let mut response = ApiError::new(
            ErrorCode::RateLimited,
            "too many requests from this token or address; retry shortly",
        )
        .into_response();
        let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        if let Ok(value) = HeaderValue::from_str(&seconds.max(1).to_string()) {
            response.headers_mut().insert(header::RETRY_AFTER, value);
        }
        return response;
    }
    next.run(request).await
}

/// Open connections and bodies being read, for `/healthz`.
#[derive(Debug, Default)]
pub(crate) struct ClientCounts {
    pub(crate) connections: AtomicUsize,
    pub(crate) reading_bodies: AtomicUsize,
}

/// Counts one in `counter` while alive.
pub(crate) struct Counted<'a>(&'a AtomicUsize);

impl<'a> Counted<'a> {
    pub(crate) fn new(counter: &'a AtomicUsize) -> Counted<'a> {
        counter.fetch_add(1, Ordering::Relaxed);
        Counted(counter)
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// How long and how much of a request body is read before the handler runs.
#[derive(Debug, Clone)]
pub(crate) struct BodyRead {
    pub(crate) max_bytes: usize,
    pub(crate) timeout: Duration,
    pub(crate) counts: Arc<ClientCounts>,
}

/// A body a little over the limit is still read (and dropped) so the client
/// finishes sending and reads the 413; one declared or found larger than the
/// limit plus this is cut off at once.
const DRAIN_BYTES: usize = 1024 * 1024;

enum BodyError {
    TooLarge,
    Broken(axum::Error),
}

/// The body's bytes, at most `max_bytes` kept; past that it is read on and
/// dropped up to [`DRAIN_BYTES`] more, then [`BodyError::TooLarge`].
async fn read_bounded(mut body: Body, max_bytes: usize) -> Result<Bytes, BodyError> {
    let mut kept = Vec::new();
    let mut total = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(BodyError::Broken)?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        total = total.saturating_add(data.len());
        if total <= max_bytes {
            kept.extend_from_slice(&data);
        } else if total > max_bytes + DRAIN_BYTES {
            return Err(BodyError::TooLarge);
        }
    }
    if total > max_bytes {
        Err(BodyError::TooLarge)
    } else {
        Ok(Bytes::from(kept))
    }
}

/// Reads the whole body, at most `max_bytes` within `timeout`, *before* the
/// admission permit is taken: a client that sends its headers and then
/// stalls holds a connection (capped by `--max-connections`) but no
/// in-flight slot, and is answered 408 `request_timeout` when its time is
/// up. A body over the limit is 413 `payload_too_large`.
pub(crate) async fn read_body(
    State(read): State<BodyRead>,
    request: Request,
    next: Next,
) -> Response {
    let (parts, body) = request.into_parts();
    let too_large = || {
        ApiError::new(ErrorCode::PayloadTooLarge, "the request body is too large").into_response()
    };
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok());
    if declared.is_some_and(|length| length > (read.max_bytes + DRAIN_BYTES) as u64) {
        return too_large();
    }
    let reading = Counted::new(&read.counts.reading_bodies);
    let outcome = tokio::time::timeout(read.timeout, read_bounded(body, read.max_bytes)).await;
    drop(reading);
    let bytes = match outcome {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(BodyError::TooLarge)) => return too_large(),
        Ok(Err(BodyError::Broken(err))) => {
            return ApiError::new(
                ErrorCode::BadRequest,
                format!("the request body could not be read: {err}"),
            )
            .into_response();
        }
        Err(_) => {
            tracing::warn!(
                timeout_ms = read.timeout.as_millis() as u64,
                "a request body did not arrive in time"
            );
            let mut response = ApiError::new(
                ErrorCode::RequestTimeout,
                format!(
                    "the request body did not arrive within {} ms",
                    read.timeout.as_millis()
                ),
            )
            .into_response();
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
            return response;
        }
    };
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}
