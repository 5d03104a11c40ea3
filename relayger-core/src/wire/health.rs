//! `GET /healthz`.

use serde::{Deserialize, Serialize};

/// `GET /healthz`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HealthResponse {
    /// `ok` when the database answers, `degraded` otherwise.
    pub status: String,
    /// The server's version (the crate version).
    pub version: String,
    pub database: DatabaseHealth,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DatabaseHealth {
    /// `ok` or `unavailable`.
    pub status: String,
    /// The number of applied schema migrations, when the database answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub migrations: Option<u32>,
}
