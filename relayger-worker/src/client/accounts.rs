//! Health, registration, identities and tokens.

use relayger_core::ids::IdentityNumber;
use relayger_core::wire::{
    CreateAgentRequest, CreateTokenRequest, CreatedToken, HealthResponse, Identity,
    RegisterRequest, RegisterResponse, TokenInfo, TokenList,
};
use reqwest::Method;
use uuid::Uuid;

use super::pages::all_pages;
use super::{Client, ClientError, decode, error_from};

impl Client {
    /// `GET /healthz`: the server's version and whether its database answers.
    /// A degraded server answers 503 with the same body, returned here too.
    pub async fn health(&self) -> Result<HealthResponse, ClientError> {
        let response = self.http.get(self.url("/healthz")).send().await?;
        let status = response.status();
        let bytes = response.bytes().await?;
        match serde_json::from_slice(&bytes) {
            Ok(health) => Ok(health),
            Err(_) => Err(error_from(status.as_u16(), &bytes)),
        }
    }

    /// `POST /v1/register`: a new identity and its first token. Sent without
    /// a token.
    /// The answer carries a token, so the same transport rule applies.
    pub async fn register(&self, body: &RegisterRequest) -> Result<RegisterResponse, ClientError> {
        self.insecure_refusal()?;
        let request = self.http.post(self.url("/v1/register")).json(body);
        decode(request.send().await?).await
    }

    /// `POST /v1/agents`: the calling person creates an agent it owns.
    pub async fn create_agent(
        &self,
        body: &CreateAgentRequest,
    ) -> Result<RegisterResponse, ClientError> {
        self.post("/v1/agents", body).await
    }

    /// `GET /v1/me`: the identity the token belongs to.
    pub async fn me(&self) -> Result<Identity, ClientError> {
        self.get("/v1/me").await
    }

    /// `GET /v1/identities/{number}`: another identity's public fields,
    /// including its public key.
    pub async fn identity(&self, number: &IdentityNumber) -> Result<Identity, ClientError> {
        self.get(&format!("/v1/identities/{number}")).await
    }

    /// `POST /v1/tokens`: a new token for the same identity; its secret is
    /// returned only here.
    pub async fn create_token(
        &self,
        body: &CreateTokenRequest,
    ) -> Result<CreatedToken, ClientError> {
        self.post("/v1/tokens", body).await
    }

    /// `GET /v1/tokens`: all the identity's tokens, without secrets,
    /// newest first (every page, following `next`).
    pub async fn tokens(&self) -> Result<TokenList, ClientError> {
        all_pages(|after| self.tokens_page(after, None)).await
    }

    /// One page of `GET /v1/tokens`: tokens older than `after` (a previous
    /// page's `next`), at most `limit` (default 100, at most 500).
    pub async fn tokens_page(
        &self,
        after: Option<Uuid>,
        limit: Option<u32>,
    ) -> Result<TokenList, ClientError> {
        self.get_page("/v1/tokens", &[], after, limit).await
    }

    /// `DELETE /v1/tokens/{id}`: revokes a token from its next request on.
    pub async fn revoke_token(&self, id: Uuid) -> Result<TokenInfo, ClientError> {
        self.send_json(Method::DELETE, &format!("/v1/tokens/{id}"), None::<&()>)
            .await
    }
}
