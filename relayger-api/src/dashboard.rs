//! The web dashboard: static assets embedded in the binary, served at `/`
//! (no CDN, nothing fetched at run time), and the one thing a browser needs
//! that the API otherwise lacks: a way to present its token on a WebSocket.
//!
//! Browsers cannot set `Authorization` on a WebSocket, and a token in the URL
//! would end up in logs and history. The page therefore offers two
//! subprotocols: [`SOCKET_PROTOCOL`] and `relayger.token.TOKEN`. For such an
//! upgrade, [`socket_token_from_subprotocol`] moves the token into the
//! `Authorization` header (only when none was sent), drops the token entry
//! from the offered list, and answers with [`SOCKET_PROTOCOL`] — the token is
//! never echoed back. The socket routes then authenticate exactly as they do
//! for the worker. The token itself stays in the tab's `sessionStorage`.

use axum::Router;
use axum::extract::Request;
use axum::http::header::{
    AUTHORIZATION, CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, HeaderName,
    REFERRER_POLICY, SEC_WEBSOCKET_PROTOCOL, UPGRADE, X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::AppState;

/// The subprotocol the dashboard's socket speaks (the same frames as the
/// worker's socket).
pub use relayger_core::wire::names::SOCKET_PROTOCOL;
/// The prefix of the subprotocol entry that carries the token.
pub use relayger_core::wire::names::TOKEN_PROTOCOL_PREFIX;

/// Scripts and styles only from this server, no inline script, no framing,
/// fetches and sockets only to this origin.
pub const CONTENT_SECURITY_POLICY_VALUE: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

const INDEX_HTML: &str = include_str!("../dashboard/index.html");
const APP_JS: &str = include_str!("../dashboard/app.js");
const API_JS: &str = include_str!("../dashboard/api.js");
const DOM_JS: &str = include_str!("../dashboard/dom.js");
const CHART_JS: &str = include_str!("../dashboard/chart.js");
const RUNTIME_JS: &str = include_str!("../dashboard/runtime.js");
const STYLE_CSS: &str = include_str!("../dashboard/style.css");

/// `GET /` and the assets it loads.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/",
            get(|| async { asset("text/html; charset=utf-8", INDEX_HTML) }),
        )
        .route(
            "/dashboard/app.js",
            get(|| async { asset("text/javascript; charset=utf-8", APP_JS) }),
        )
        .route(
            "/dashboard/api.js",
            get(|| async { asset("text/javascript; charset=utf-8", API_JS) }),
        )
        .route(
            "/dashboard/dom.js",
            get(|| async { asset("text/javascript; charset=utf-8", DOM_JS) }),
        )
        .route(
            "/dashboard/chart.js",
            get(|| async { asset("text/javascript; charset=utf-8", CHART_JS) }),
        )
        .route(
            "/dashboard/runtime.js",
            get(|| async { asset("text/javascript; charset=utf-8", RUNTIME_JS) }),
        )
        .route(
            "/dashboard/style.css",
            get(|| async { asset("text/css; charset=utf-8", STYLE_CSS) }),
        )
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    let headers: [(HeaderName, &'static str); 6] = [
        (CONTENT_TYPE, content_type),
        (CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY_VALUE),
        (X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (X_FRAME_OPTIONS, "DENY"),
        (REFERRER_POLICY, "no-referrer"),
        (CACHE_CONTROL, "no-cache"),
    ];
    (StatusCode::OK, headers, body).into_response()
}

/// The subprotocols a request offers, in order.
fn offered_protocols(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all(SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(|entry| entry.trim().to_owned())
        .filter(|entry| !entry.is_empty())
        .collect()
}

/// Middleware: a WebSocket upgrade offering [`SOCKET_PROTOCOL`] and a
/// `relayger.token.TOKEN` entry is authenticated with that token (see the
/// module docs). Anything else, a plain request with the same header
/// included, passes untouched.
pub(crate) async fn socket_token_from_subprotocol(mut request: Request, next: Next) -> Response {
    let upgrade = request
        .headers()
        .get(UPGRADE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.eq_ignore_ascii_case("websocket"));
    let offered = offered_protocols(request.headers());
    if !upgrade || !offered.iter().any(|entry| entry == SOCKET_PROTOCOL) {
        return next.run(request).await;
    }
    let token = offered
        .iter()
        .find_map(|entry| entry.strip_prefix(TOKEN_PROTOCOL_PREFIX));
    let headers = request.headers_mut();
    if let Some(token) = token
        && !headers.contains_key(AUTHORIZATION)
        && let Ok(value) = HeaderValue::from_str(&format!("Bearer {token}"))
    {
        headers.insert(AUTHORIZATION, value);
    }
    // The token never travels further than this point as a subprotocol.
    headers.insert(
        SEC_WEBSOCKET_PROTOCOL,
        HeaderValue::from_static(SOCKET_PROTOCOL),
    );
    let mut response = next.run(request).await;
    if response.status() == StatusCode::SWITCHING_PROTOCOLS {
        response.headers_mut().insert(
            SEC_WEBSOCKET_PROTOCOL,
            HeaderValue::from_static(SOCKET_PROTOCOL),
        );
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offered_protocols_are_split_across_lines_and_commas() {
        let mut headers = HeaderMap::new();
        headers.append(
            SEC_WEBSOCKET_PROTOCOL,
            HeaderValue::from_static("relayger.v1, relayger.token.rlg_a"),
        );
        headers.append(SEC_WEBSOCKET_PROTOCOL, HeaderValue::from_static(" other "));
        assert_eq!(
            offered_protocols(&headers),
            ["relayger.v1", "relayger.token.rlg_a", "other"]
        );
    }

    #[test]
    fn the_page_loads_no_inline_script_and_nothing_from_elsewhere() {
        assert!(!INDEX_HTML.contains("<script>"));
        assert!(!INDEX_HTML.contains("http://") && !INDEX_HTML.contains("https://"));
        for source in [APP_JS, API_JS, DOM_JS, CHART_JS, RUNTIME_JS] {
            assert!(!source.contains("http://") && !source.contains("https://"));
            assert!(!source.contains("localStorage"));
        }
    }

    /// The value of `const NAME = '...';` in a dashboard script.
    fn js_const<'a>(source: &'a str, name: &str) -> &'a str {
        let start = format!("const {name} = '");
        let rest = source
            .split_once(start.as_str())
            .unwrap_or_else(|| panic!("no `{start}` in the dashboard"))
            .1;
        rest.split_once("';")
            .unwrap_or_else(|| panic!("{name} is not a quoted constant"))
            .0
    }

    /// The dashboard is plain JavaScript the browser loads on its own (it
    /// cannot import the SDK's `wire.js`), so the names it spells are
    /// compared here with the shared fixture both languages pin.
    #[test]
    fn the_dashboard_spells_the_shared_names() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../relayger-core/fixtures/names.json"
        );
        let text = std::fs::read_to_string(path).expect("names.json");
        let names: serde_json::Value = serde_json::from_str(&text).expect("names.json is JSON");
        let name = |key: &str| {
            names[key]
                .as_str()
                .unwrap_or_else(|| panic!("names.json: {key}"))
        };
        assert_eq!(js_const(API_JS, "SOCKET_PROTOCOL"), name("socketProtocol"));
        assert_eq!(
            js_const(API_JS, "TOKEN_PROTOCOL_PREFIX"),
            name("tokenProtocolPrefix")
        );
        let runtime_changes = format!("?{}=true", name("runtimeChangesParam"));
        assert!(
            APP_JS.contains(&runtime_changes),
            "the dashboard's socket asks for {runtime_changes}"
        );
        // And what the server checks is the same spelling.
        assert_eq!(
            name("socketProtocol"),
            relayger_core::wire::names::SOCKET_PROTOCOL
        );
        assert_eq!(
            name("tokenProtocolPrefix"),
            relayger_core::wire::names::TOKEN_PROTOCOL_PREFIX
        );
    }
}
