//! Relayger's HTTP JSON API and WebSocket endpoints.
//!
//! This crate owns HTTP: routing, authentication, request validation at the
//! boundary, and the single mapping from errors to
//! `{"error":{"code","message"}}`. It holds no SQL (that is `relayger-store`)
//! and no domain rules (that is `relayger-core`).

mod access_log;
mod dashboard;
mod error;
mod extract;
mod health;
mod hub;
mod idle;
mod listener;
pub mod metrics;
pub mod openapi;
mod overload;
mod route_table;
mod router;
mod routes;
mod socket;
mod tls;
mod token_cache;

pub use access_log::REQUEST_ID_HEADER;
pub use dashboard::{CONTENT_SECURITY_POLICY_VALUE, SOCKET_PROTOCOL, TOKEN_PROTOCOL_PREFIX};
pub use error::ApiError;
pub use overload::RateLimit;
pub use route_table::{Access, ROUTE_TABLE, RouteMethod, RouteSpec, routes};
pub use router::{
    ApiConfig, AppState, DEFAULT_A2A_BLOCKING_WAIT, DEFAULT_ADDRESS_RATE,
    DEFAULT_BODY_READ_TIMEOUT, DEFAULT_HEADER_READ_TIMEOUT, DEFAULT_LOOKUP_RATE,
    DEFAULT_MAX_AGENTS_PER_PERSON, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_CONNECTIONS_PER_ADDRESS,
    DEFAULT_MAX_IN_FLIGHT, DEFAULT_MAX_SOCKETS_PER_TOKEN, DEFAULT_SOCKET_CHECK_INTERVAL,
    DEFAULT_TOKEN_RATE, Registration, router, serve,
};
pub use tls::TlsConfig;
