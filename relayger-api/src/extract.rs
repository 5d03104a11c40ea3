//! Extractors that validate at the boundary and answer bad input with the
//! error envelope: JSON bodies, paths, queries, and the bearer token.

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{ConnectInfo, FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use relayger_core::ErrorCode;
use relayger_core::wire::Scope;
use relayger_store::{AuthenticatedToken, secret_hash};
use serde::de::DeserializeOwned;
use std::net::SocketAddr;
use std::time::Instant;

use subtle::ConstantTimeEq;

use crate::{ApiError, AppState};

/// A JSON body; malformed JSON, wrong types and unknown fields are 400, an
/// oversized body 413, a wrong content type 415-as-400.
#[derive(Debug)]
pub(crate) struct ApiJson<T>(pub(crate) T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(value)) => Ok(ApiJson(value)),
            Err(rejection) => Err(json_rejection(rejection)),
        }
    }
}

fn json_rejection(rejection: JsonRejection) -> ApiError {
    match rejection {
        JsonRejection::JsonDataError(e) => ApiError::new(ErrorCode::InvalidJson, e.body_text()),
        JsonRejection::JsonSyntaxError(e) => ApiError::new(ErrorCode::InvalidJson, e.body_text()),
        JsonRejection::MissingJsonContentType(_) => ApiError::new(
            ErrorCode::InvalidJson,
            "send the body as JSON with `Content-Type: application/json`",
        ),
        JsonRejection::BytesRejection(e) if e.status().as_u16() == 413 => {
            ApiError::new(ErrorCode::PayloadTooLarge, "the request body is too large")
        }
        other => ApiError::new(ErrorCode::BadRequest, other.body_text()),
    }
}

/// Path parameters; a malformed id or number is 400.
#[derive(Debug)]
pub(crate) struct ApiPath<T>(pub(crate) T);

impl<S, T> FromRequestParts<S> for ApiPath<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(value)) => Ok(ApiPath(value)),
            Err(rejection) => Err(path_rejection(rejection)),
        }
    }
}

fn path_rejection(rejection: PathRejection) -> ApiError {
    ApiError::new(ErrorCode::InvalidArgument, rejection.body_text())
}

/// Query parameters; unknown or malformed ones are 400.
#[derive(Debug)]
pub(crate) struct ApiQuery<T>(pub(crate) T);

impl<S, T> FromRequestParts<S> for ApiQuery<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(value)) => Ok(ApiQuery(value)),
            Err(rejection) => Err(query_rejection(rejection)),
        }
    }
}

fn query_rejection(rejection: QueryRejection) -> ApiError {
    ApiError::new(ErrorCode::InvalidArgument, rejection.body_text())
}

/// The authenticated token of a request. Missing, malformed, unknown or
/// revoked tokens are all 401 with the same message: nothing is learned
/// about which tokens exist.
#[derive(Debug, Clone)]
pub(crate) struct Auth(pub(crate) AuthenticatedToken);

const UNAUTHORIZED: &str = "a valid token is required (Authorization: Bearer TOKEN)";

impl FromRequestParts<AppState> for Auth {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let unauthorized = || ApiError::new(ErrorCode::Unauthorized, UNAUTHORIZED);
        let peer = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|ConnectInfo(addr)| addr.ip());
        let presented = parts
            .headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "))
            .ok_or_else(unauthorized)?;
        // A bearer header was sent: from here on a refusal is an unknown
        // token, which counts against the address (the rate limit keyed it by
        // the token's hash, fresh for every made-up token).
        let limits = &state.rate_limits;
        let secret = presented.trim();
        if secret.is_empty() || secret.len() > 256 {
            limits.check_unknown_tokens(peer)?;
            limits.count_unknown_token(peer);
            return Err(unauthorized());
        }
        let presented = secret_hash(secret);
        let cache = state.hub.tokens();
        let (stored, token) = match cache.get(&presented, Instant::now()) {
            Ok(hit) => hit,
            Err(ticket) => {
                limits.check_unknown_tokens(peer)?;
                let Some((stored, token)) = state.store.authenticate(&presented).await? else {
                    limits.count_unknown_token(peer);
                    return Err(unauthorized());
                };
                cache.store(ticket, &presented, &stored, &token, Instant::now());
                (stored, token)
            }
        };
        // The lookup matched on the hash; compare again in constant time so
        // the decision itself never depends on early-exit byte comparisons.
        if !bool::from(stored.ct_eq(&presented)) {
            return Err(unauthorized());
        }
        crate::access_log::note_token(&parts.extensions, token.token_id);
        Ok(Auth(token))
    }
}

impl Auth {
    /// 403 unless the token carries `scope`.
    pub(crate) fn require(&self, scope: Scope) -> Result<&Self, ApiError> {
        if self.0.has(scope) {
            Ok(self)
        } else {
            Err(ApiError::new(
                ErrorCode::Forbidden,
                format!("this token lacks the `{}` scope", scope.as_str()),
            ))
        }
    }

    /// 403 `token_restricted` for a room-restricted token: it acts only
    /// inside its rooms, never on the identity as a whole.
    pub(crate) fn require_unrestricted(&self) -> Result<&Self, ApiError> {
        if self.0.rooms.is_some() {
            Err(ApiError::new(
                ErrorCode::TokenRestricted,
                "this token is restricted to some rooms; this identity-wide action needs an unrestricted token",
            ))
        } else {
            Ok(self)
        }
    }

    /// Contacts work needs the `contacts` scope and an unrestricted token.
    pub(crate) fn require_contacts(&self) -> Result<&Self, ApiError> {
        self.require(Scope::Contacts)?.require_unrestricted()
    }
}

/// A JSON body that may be absent (an empty body means `T::default()`).
#[derive(Debug)]
pub(crate) struct OptionalJson<T>(pub(crate) T);

impl<S, T> FromRequest<S> for OptionalJson<T>
where
    T: DeserializeOwned + Default,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = axum::body::Bytes::from_request(req, state)
            .await
            .map_err(|rejection| {
                if rejection.status().as_u16() == 413 {
                    ApiError::new(ErrorCode::PayloadTooLarge, "the request body is too large")
                } else {
                    ApiError::new(ErrorCode::BadRequest, rejection.body_text())
                }
            })?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(OptionalJson(T::default()));
        }
        serde_json::from_slice(&bytes)
            .map(OptionalJson)
            .map_err(|e| ApiError::new(ErrorCode::InvalidJson, format!("invalid JSON body: {e}")))
    }
}
