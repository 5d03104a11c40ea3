//! Relayger's HTTP JSON API and WebSocket endpoints.
//!
//! This crate owns HTTP: routing, authentication, request validation at the
//! boundary, and the single mapping from errors to
//! `{"error":{"code","message"}}`. It holds no SQL (that is `relayger-store`)
//! and no domain rules (that is `relayger-core`).

mod error;
mod extract;
mod health;
mod hub;
mod overload;
mod route_table;
mod router;
mod routes;
mod socket;
mod token_cache;

pub use error::ApiError;
pub use route_table::{Access, ROUTE_TABLE, RouteMethod, RouteSpec, routes};
pub use router::{ApiConfig, AppState, DEFAULT_MAX_IN_FLIGHT, Registration, router, serve};
