//! `GET /healthz`.

use serde::{Deserialize, Serialize};

/// `GET /healthz`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct HealthResponse {
    /// `ok` when the database answers, `degraded` otherwise.
    pub status: String,
    /// The server's version (the crate version).
    pub version: String,
    pub database: DatabaseHealth,
    /// How busy the request connections are; absent from older servers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connections: Option<ConnectionHealth>,
    /// Client connections and requests whose bodies are still arriving;
    /// absent from older servers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clients: Option<ClientHealth>,
}

/// What clients hold open. Slow clients show up here, not in the in-flight
/// count: a body is read before its request takes a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ClientHealth {
    /// Open client connections (at most `--max-connections`).
    pub connections: u32,
    /// Requests whose bodies are still arriving.
    pub reading_bodies: u32,
}

/// The request connection pool's load. When `inUse` equals `max` and
/// requests are `waiting`, the server is shedding or about to shed load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ConnectionHealth {
    pub max: u32,
    pub in_use: u32,
    pub waiting: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct DatabaseHealth {
    /// `ok` or `unavailable`.
    pub status: String,
    /// The number of applied schema migrations, when the database answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub migrations: Option<u32>,
}
