//! Contacts and contact requests.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use relayger_core::ErrorCode;
use relayger_core::ids::IdentityNumber;
use relayger_core::paging;
use relayger_core::wire::{
    AnswerRequest, Contact, ContactList, ContactNumber, ContactRequestView, ContactRequests, Done,
    Scope,
};
use serde::Deserialize;
use uuid::Uuid;

use relayger_store::StoreError;

use super::rooms::PageQuery;
use crate::extract::{ApiJson, ApiPath, ApiQuery, Auth, OptionalJson};
use crate::{ApiError, AppState};

// The header an idle claim and the request list carry.
pub(crate) use relayger_core::wire::names::CONTACT_REQUESTS_HEADER;

/// Whom the caller acts for: itself, or (`as`) an agent it owns.
async fn acting_identity(
    state: &AppState,
    auth: &Auth,
    as_agent: Option<&IdentityNumber>,
) -> Result<Uuid, ApiError> {
    match as_agent {
        None => Ok(auth.0.identity.id),
        Some(number) => Ok(state
            .store
            .owned_agent(auth.0.identity.id, number)
            .await?
            .id),
    }
}

pub(crate) async fn list(
    State(state): State<AppState>,
    auth: Auth,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> Result<Json<ContactList>, ApiError> {
    auth.require(Scope::Read)?;
    let page_size = query.page_size(paging::CONTACTS)?;
    let (contacts, next) = state
        .store
        .list_contacts(&auth.0.caller(), query.after(), page_size)
        .await?;
    Ok(Json(ContactList { contacts, next }))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RequestsQuery {
    #[serde(rename = "as")]
    as_agent: Option<IdentityNumber>,
    limit: Option<u32>,
    after: Option<Uuid>,
}

pub(crate) async fn requests(
    State(state): State<AppState>,
    auth: Auth,
    ApiQuery(query): ApiQuery<RequestsQuery>,
) -> Result<(HeaderMap, Json<ContactRequests>), ApiError> {
    auth.require_contacts()?;
    let page_size = paging::CONTACT_REQUESTS
        .page_size(query.limit)
        .map_err(|message| ApiError::new(ErrorCode::InvalidArgument, message))?;
    let who = acting_identity(&state, &auth, query.as_agent.as_ref()).await?;
    let requests = state
        .store
        .contact_requests(who, query.after, page_size)
        .await?;
    let mut headers = HeaderMap::new();
    headers.insert(CONTACT_REQUESTS_HEADER, HeaderValue::from(requests.count));
    Ok((headers, Json(requests)))
}

pub(crate) async fn request(
    State(state): State<AppState>,
    auth: Auth,
    ApiJson(body): ApiJson<ContactNumber>,
) -> Result<(StatusCode, Json<ContactRequestView>), ApiError> {
    auth.require_contacts()?;
    let (view, created) = state
        .store
        .request_contact(auth.0.identity.id, body.number)
        .await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(view)))
}

pub(crate) async fn accept(
    State(state): State<AppState>,
    auth: Auth,
    ApiPath(number): ApiPath<IdentityNumber>,
    OptionalJson(answer): OptionalJson<AnswerRequest>,
) -> Result<Json<Contact>, ApiError> {
    auth.require_contacts()?;
    let who = acting_identity(&state, &auth, answer.as_agent.as_ref()).await?;
    Ok(Json(state.store.accept_contact(who, number).await?))
}

pub(crate) async fn decline(
    State(state): State<AppState>,
    auth: Auth,
    ApiPath(number): ApiPath<IdentityNumber>,
    OptionalJson(answer): OptionalJson<AnswerRequest>,
) -> Result<Json<ContactRequestView>, ApiError> {
    auth.require_contacts()?;
    let who = acting_identity(&state, &auth, answer.as_agent.as_ref()).await?;
    Ok(Json(state.store.decline_contact(who, number).await?))
}

pub(crate) async fn withdraw(
    State(state): State<AppState>,
    auth: Auth,
    ApiPath(number): ApiPath<IdentityNumber>,
) -> Result<Json<ContactRequestView>, ApiError> {
    auth.require_contacts()?;
    Ok(Json(
        state
            .store
            .withdraw_contact(auth.0.identity.id, number)
            .await?,
    ))
}

pub(crate) async fn block(
    State(state): State<AppState>,
    auth: Auth,
    ApiPath(number): ApiPath<IdentityNumber>,
) -> Result<Json<Done>, ApiError> {
    change_own_contact(auth, |me| state.store.block_contact(me, number)).await
}

pub(crate) async fn unblock(
    State(state): State<AppState>,
    auth: Auth,
    ApiPath(number): ApiPath<IdentityNumber>,
) -> Result<Json<Done>, ApiError> {
    change_own_contact(auth, |me| state.store.unblock_contact(me, number)).await
}

pub(crate) async fn remove(
    State(state): State<AppState>,
    auth: Auth,
    ApiPath(number): ApiPath<IdentityNumber>,
) -> Result<Json<Done>, ApiError> {
    change_own_contact(auth, |me| state.store.remove_contact(me, number)).await
}

/// A change the caller makes to its own side of a contact (block, unblock,
/// remove), answered with `{"ok": true}`.
async fn change_own_contact<F>(
    auth: Auth,
    change: impl FnOnce(Uuid) -> F,
) -> Result<Json<Done>, ApiError>
where
    F: Future<Output = Result<(), StoreError>>,
{
    auth.require_contacts()?;
    change(auth.0.identity.id).await?;
    Ok(Json(Done { ok: true }))
}
