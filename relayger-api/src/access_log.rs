//! The access log and request ids: one `info` line per request with its
//! method, route template (never the concrete path, which may carry ids),
//! status, latency and the id of the token that authenticated it — never a
//! secret. The same middleware feeds the request metrics (see
//! [`crate::metrics`]).

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::http::{HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use uuid::Uuid;

/// The request id header, read from the client when it sends a usable one
/// and always set on the response.
pub const REQUEST_ID_HEADER: HeaderName = HeaderName::from_static("x-request-id");

/// The longest client-supplied request id kept; longer ones are replaced.
const MAX_REQUEST_ID_LEN: usize = 128;

/// The label for requests that matched no route (their path is not logged
/// as a template: it is whatever the client sent).
pub(crate) const UNMATCHED_ROUTE: &str = "unmatched";

/// Where the bearer-token extractor leaves the id of the token it accepted,
/// for the access log line written after the handler returns.
#[derive(Debug, Clone, Default)]
pub(crate) struct TokenSlot(Arc<OnceLock<Uuid>>);

/// Records the token that authenticated the request, if the request passed
/// through [`access_log`].
pub(crate) fn note_token(extensions: &axum::http::Extensions, token_id: Uuid) {
    if let Some(slot) = extensions.get::<TokenSlot>() {
        let _ = slot.0.set(token_id);
    }
}

/// A client's request id is kept when it is 1..=128 characters of
/// `[A-Za-z0-9._:-]`; anything else (empty, too long, spaces, control
/// characters that could forge log lines) is replaced by a fresh UUIDv7.
fn request_id(supplied: Option<&HeaderValue>) -> HeaderValue {
    supplied
        .filter(|value| {
            let bytes = value.as_bytes();
            !bytes.is_empty()
                && bytes.len() <= MAX_REQUEST_ID_LEN
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
        })
        .cloned()
        .unwrap_or_else(|| {
            HeaderValue::from_str(&Uuid::now_v7().to_string())
                .unwrap_or_else(|_| HeaderValue::from_static("invalid"))
        })
}

/// Logs the request, records its metrics and echoes the request id.
pub(crate) async fn access_log(mut request: Request, next: Next) -> Response {
    let started = Instant::now();
    let id = request_id(request.headers().get(&REQUEST_ID_HEADER));
    let method = request.method().clone();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|path| path.as_str().to_owned());
    let slot = TokenSlot::default();
    request.extensions_mut().insert(slot.clone());
    request.headers_mut().insert(REQUEST_ID_HEADER, id.clone());

    let mut response = next.run(request).await;

    let latency = started.elapsed();
    let status = response.status().as_u16();
    let route = route.as_deref().unwrap_or(UNMATCHED_ROUTE);
    let token_id = slot.0.get().map(Uuid::to_string);
    tracing::info!(
        target: "relayger::access",
        method = method.as_str(),
        route,
        status,
        latency_ms = whole_microseconds_as_ms(latency),
        token_id = token_id.as_deref().unwrap_or("-"),
        request_id = id.to_str().unwrap_or("-"),
        "request"
    );
    crate::metrics::record_request(method.as_str(), route, status, latency);
    response.headers_mut().insert(REQUEST_ID_HEADER, id);
    response
}

/// `duration` in milliseconds, to the microsecond (`0.582`, not
/// `0.5815250000000001`): a log reader needs no more, and the shortest
/// decimal of a whole number of microseconds over 1000 has at most three
/// decimals.
fn whole_microseconds_as_ms(duration: std::time::Duration) -> f64 {
    // A u128 of microseconds fits an f64 exactly for any latency a request
    // can have (below 2^53 µs, some 285 years).
    duration.as_micros() as f64 / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latencies_are_logged_to_the_microsecond() {
        use std::time::Duration;
        let table = [
            (Duration::from_nanos(581_525), "0.581"),
            (Duration::from_nanos(999), "0"),
            (Duration::from_micros(1), "0.001"),
            (Duration::from_millis(12), "12"),
            (Duration::from_nanos(1_234_567_890), "1234.567"),
        ];
        for (duration, text) in table {
            assert_eq!(
                whole_microseconds_as_ms(duration).to_string(),
                text,
                "{duration:?}"
            );
        }
    }

    #[test]
    fn request_ids_are_kept_only_when_short_and_plain() {
        let cases: &[(&str, bool)] = &[
            ("abc-123", true),
            ("trace:1.2_3", true),
            (&"a".repeat(128), true),
            (&"a".repeat(129), false),
            ("has space", false),
            ("semi;colon", false),
            ("", false),
        ];
        for (supplied, kept) in cases {
            let value = HeaderValue::from_str(supplied).expect("header value");
            let got = request_id(Some(&value));
            assert_eq!(got == value, *kept, "{supplied:?} -> {got:?}");
            assert!(!got.is_empty());
        }
        let fresh = request_id(None);
        assert!(Uuid::parse_str(fresh.to_str().expect("ascii")).is_ok());
    }
}
