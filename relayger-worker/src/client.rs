use relayger_core::ErrorEnvelope;
use relayger_core::wire::HealthResponse;
use thiserror::Error;

/// What a call to the server can fail with.
#[derive(Debug, Error)]
pub enum ClientError {
    /// The server answered with the error envelope.
    #[error("{}: {}", .0.error.code, .0.error.message)]
    Api(ErrorEnvelope),
    /// The server could not be reached or answered something unreadable.
    #[error("cannot reach the server: {0}")]
    Transport(#[from] reqwest::Error),
}

/// A connection to one Relayger server.
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    base_url: String,
}

impl Client {
    /// A client for the server at `base_url` (e.g. `http://127.0.0.1:7070`).
    pub fn new(base_url: impl Into<String>) -> Client {
        Client {
            http: reqwest::Client::new(),
            base_url: base_url.into().trim_end_matches('/').to_owned(),
        }
    }

    /// The server's base URL.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// `GET /healthz`: the server's version and whether its database answers.
    /// A degraded server answers 503 with the same body, returned here too.
    pub async fn health(&self) -> Result<HealthResponse, ClientError> {
        let response = self
            .http
            .get(format!("{}/healthz", self.base_url))
            .send()
            .await?;
        Ok(response.json().await?)
    }
}
