//! Registration, agents, identities and tokens.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use relayger_core::ErrorCode;
use relayger_core::ids::IdentityNumber;
use relayger_core::naming;
use relayger_core::sealed::{KeyError, parse_public_key};
use relayger_core::wire::{
    CreateAgentRequest, CreateTokenRequest, CreatedToken, Identity, IdentityKind, RegisterRequest,
    RegisterResponse, Scope, TokenInfo, TokenList,
};
use relayger_store::NewIdentity;
use uuid::Uuid;

use super::rooms::PageQuery;
use crate::extract::{ApiJson, ApiPath, ApiQuery, Auth};
use crate::{ApiError, AppState, Registration};

/// A display name, trimmed (the rule is the core's).
pub(crate) fn display_name(name: &str) -> Result<String, ApiError> {
    Ok(naming::display_name(name)?.to_owned())
}

/// A base64 X25519 public key: exactly 32 bytes, and not a low-order
/// point (an all-zero key, say, would make every sealed send to a room
/// holding the identity fail).
pub(crate) fn public_key(text: &str) -> Result<[u8; 32], ApiError> {
    parse_public_key(text).map_err(|err| match err {
        KeyError::WeakPublicKey => ApiError::new(
            ErrorCode::InvalidArgument,
            "publicKey is a low-order X25519 point, which nothing can be sealed to; generate a real key pair",
        ),
        _ => ApiError::new(
            ErrorCode::InvalidArgument,
            "publicKey must be the base64 of a 32-byte X25519 public key",
        ),
    })
}

pub(crate) async fn register(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<RegisterRequest>,
) -> Result<(StatusCode, Json<RegisterResponse>), ApiError> {
    let new = NewIdentity {
        display_name: display_name(&body.name)?,
        kind: body.kind,
        public_key: public_key(&body.public_key)?,
        owner_id: None,
    };
    let require_invite = state.config.registration == Registration::Closed;
    let (identity, token) = state
        .store
        .register(new, body.invite.as_deref(), require_invite)
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(RegisterResponse { identity, token }),
    ))
}

pub(crate) async fn create_agent(
    State(state): State<AppState>,
    auth: Auth,
    ApiJson(body): ApiJson<CreateAgentRequest>,
) -> Result<(StatusCode, Json<RegisterResponse>), ApiError> {
    auth.require(Scope::Write)?.require_unrestricted()?;
    if auth.0.identity.kind() != IdentityKind::Person {
        return Err(ApiError::new(
            ErrorCode::Forbidden,
            "only a person can create agents",
        ));
    }
    let (identity, token) = state
        .store
        .create_agent(
            &auth.0.identity,
            display_name(&body.name)?,
            public_key(&body.public_key)?,
            state.config.max_agents_per_person,
        )
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(RegisterResponse { identity, token }),
    ))
}

pub(crate) async fn me(
    State(state): State<AppState>,
    auth: Auth,
) -> Result<Json<Identity>, ApiError> {
    Ok(Json(state.store.identity_view(&auth.0.identity).await?))
}

pub(crate) async fn identity(
    State(state): State<AppState>,
    auth: Auth,
    ApiPath(number): ApiPath<IdentityNumber>,
) -> Result<Json<Identity>, ApiError> {
    auth.require(Scope::Read)?;
    state
        .rate_limits
        .check_lookup(auth.0.identity.accountable_person())?;
    Ok(Json(state.store.public_identity(&number).await?))
}

/// A new token may never exceed the token that creates it: its scopes are
/// a subset, and only an unrestricted token creates tokens at all.
pub(crate) async fn create_token(
    State(state): State<AppState>,
    auth: Auth,
    ApiJson(body): ApiJson<CreateTokenRequest>,
) -> Result<(StatusCode, Json<CreatedToken>), ApiError> {
    auth.require_unrestricted()?;
    let mut scopes = body.scopes.clone();
    scopes.sort();
    scopes.dedup();
    if scopes.is_empty() {
        return Err(ApiError::new(
            ErrorCode::InvalidArgument,
            "scopes must name at least one of read, write, contacts",
        ));
    }
    if let Some(missing) = scopes.iter().find(|s| !auth.0.has(**s)) {
        return Err(ApiError::new(
            ErrorCode::Forbidden,
            format!(
                "a token cannot grant `{}`, which it does not have itself",
                missing.as_str()
            ),
        ));
    }
    // The creating token is unrestricted (checked above), so any of the
    // identity's rooms may be named.
    let rooms = match &body.room_ids {
        Some(rooms) => {
            naming::token_room_count(rooms.len())?;
            let mut rooms = rooms.clone();
            rooms.sort();
            rooms.dedup();
            Some(rooms)
        }
        None => None,
    };
    if let Some(rooms) = &rooms {
        // Only rooms the identity is in: a restriction to a foreign room
        // would be a token for nothing.
        let caller = auth.0.caller();
        for room in rooms {
            state.store.room(&caller, *room).await?;
        }
    }
    let label = naming::token_label(body.label.as_deref())?;
    let created = state
        .store
        .create_token(auth.0.identity.id, &scopes, rooms.as_deref(), label)
        .await?;
    Ok((StatusCode::CREATED, Json(created)))
}

pub(crate) async fn list_tokens(
    State(state): State<AppState>,
    auth: Auth,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> Result<Json<TokenList>, ApiError> {
    auth.require(Scope::Read)?.require_unrestricted()?;
    let page_size = query.page_size(relayger_core::paging::TOKENS)?;
    let (tokens, next) = state
        .store
        .list_tokens(&auth.0.caller(), query.after(), page_size)
        .await?;
    Ok(Json(TokenList { tokens, next }))
}

pub(crate) async fn revoke_token(
    State(state): State<AppState>,
    auth: Auth,
    ApiPath(token_id): ApiPath<Uuid>,
) -> Result<Json<TokenInfo>, ApiError> {
    // A token may always revoke itself; revoking others needs write and an
    // unrestricted token.
    if token_id != auth.0.token_id {
        auth.require(Scope::Write)?.require_unrestricted()?;
    }
    let info = state.store.revoke_token(&auth.0.caller(), token_id).await?;
    // Refused here from the next request on; open sockets of that token
    // close here now and on every other instance through the NOTIFY.
    state.hub.token_revoked(token_id);
    if let Err(err) = state.store.notify_revoked(token_id).await {
        tracing::warn!(%err, "could not announce a token revocation");
    }
    Ok(Json(info))
}
