//! Rooms and membership.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use relayger_core::paging::{self, PageLimits};
use relayger_core::wire::{ContactNumber, CreateRoomRequest, Done, Room, RoomList, Scope};
use serde::Deserialize;
use uuid::Uuid;

use super::identity::display_name;
use crate::extract::{ApiJson, ApiPath, ApiQuery, Auth};
use crate::{ApiError, AppState};

const MAX_INITIAL_MEMBERS: usize = 100;

/// `?limit&after` of the list routes (`relayger_core::paging`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PageQuery {
    limit: Option<u32>,
    after: Option<Uuid>,
}

impl PageQuery {
    /// The page size within these limits, or a 400.
    pub(crate) fn page_size(&self, limits: PageLimits) -> Result<u32, ApiError> {
        limits
            .page_size(self.limit)
            .map_err(|message| ApiError::new(relayger_core::ErrorCode::InvalidArgument, message))
    }

    pub(crate) fn after(&self) -> Option<Uuid> {
        self.after
    }
}

pub(crate) async fn list(
    State(state): State<AppState>,
    auth: Auth,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> Result<Json<RoomList>, ApiError> {
    auth.require(Scope::Read)?;
    let page_size = query.page_size(paging::ROOMS)?;
    let (rooms, next) = state
        .store
        .list_rooms(&auth.0.caller(), query.after, page_size)
        .await?;
    Ok(Json(RoomList { rooms, next }))
}

pub(crate) async fn get(
    State(state): State<AppState>,
    auth: Auth,
    ApiPath(room_id): ApiPath<Uuid>,
) -> Result<Json<Room>, ApiError> {
    auth.require(Scope::Read)?;
    Ok(Json(state.store.room(&auth.0.caller(), room_id).await?))
}

pub(crate) async fn create(
    State(state): State<AppState>,
    auth: Auth,
    ApiJson(body): ApiJson<CreateRoomRequest>,
) -> Result<(StatusCode, Json<Room>), ApiError> {
    auth.require(Scope::Write)?.require_unrestricted()?;
    if body.members.len() > MAX_INITIAL_MEMBERS {
        return Err(ApiError::new(
            relayger_core::ErrorCode::InvalidArgument,
            format!("a room starts with at most {MAX_INITIAL_MEMBERS} members"),
        ));
    }
    let room = state
        .store
        .create_room(&auth.0.caller(), display_name(&body.name)?, body.members)
        .await?;
    Ok((StatusCode::CREATED, Json(room)))
}

pub(crate) async fn add_member(
    State(state): State<AppState>,
    auth: Auth,
    ApiPath(room_id): ApiPath<Uuid>,
    ApiJson(body): ApiJson<ContactNumber>,
) -> Result<Json<Room>, ApiError> {
    auth.require(Scope::Write)?;
    Ok(Json(
        state
            .store
            .add_room_member(&auth.0.caller(), room_id, body.number)
            .await?,
    ))
}

pub(crate) async fn leave(
    State(state): State<AppState>,
    auth: Auth,
    ApiPath(room_id): ApiPath<Uuid>,
) -> Result<Json<Done>, ApiError> {
    auth.require(Scope::Write)?;
    state.store.leave_room(&auth.0.caller(), room_id).await?;
    Ok(Json(Done { ok: true }))
}
