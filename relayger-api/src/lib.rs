//! Relayger's HTTP JSON API and WebSocket endpoints.
//!
//! This crate owns HTTP: routing, authentication, request validation at the
//! boundary, and the single mapping from errors to
//! `{"error":{"code","message"}}`. It holds no SQL (that is `relayger-store`)
//! and no domain rules (that is `relayger-core`).

mod error;
mod health;
mod router;

pub use error::ApiError;
pub use router::{ApiConfig, AppState, router, serve};
