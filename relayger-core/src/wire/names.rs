//! The names the server, the Rust clients and the JavaScript SDK all spell
//! the same way: headers, socket subprotocols, query parameters, and the
//! snake_case names of worker events and socket frames. The fixtures in
//! `relayger-core/fixtures/names.json` pin them for both languages.

/// Response header on an idle claim (and the contact-request listing): the
/// number of pending incoming contact requests. HTTP header names are case
/// insensitive; this is the lower-case spelling both clients look up.
pub const CONTACT_REQUESTS_HEADER: &str = "relayger-contact-requests";

/// The WebSocket subprotocol a browser offers (and the server answers).
pub const SOCKET_PROTOCOL: &str = "relayger.v1";

/// Prefix of the subprotocol that carries a token (`relayger.token.TOKEN`)
/// where `Authorization` cannot be set.
pub const TOKEN_PROTOCOL_PREFIX: &str = "relayger.token.";

/// Query parameter of `GET /v1/socket`: `true` also signals changes of the
/// identity's runtimes.
pub const RUNTIME_CHANGES_PARAM: &str = "runtimeChanges";

/// Every [`WorkerEvent`](super::WorkerEvent) name, in declaration order.
pub const WORKER_EVENT_NAMES: [&str; 16] = [
    "started",
    "claimed",
    "replied",
    "skipped",
    "handled",
    "failed",
    "dead_letter",
    "released",
    "canceled",
    "contact_requests",
    "contact_accepted",
    "contact_error",
    "socket_connected",
    "socket_disconnected",
    "unavailable",
    "stopped",
];

/// Every [`SocketSignal`](super::SocketSignal) frame's `event`.
pub const SOCKET_FRAME_NAMES: [&str; 3] = ["inbox_changed", "runtime_changed", "delivery_changed"];
