//! Rooms and their members.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{IdentityKind, Timestamp};
use crate::ids::IdentityNumber;

/// The most current members a room may have (the creator included); a
/// sealed message carries one ciphertext for each.
pub const MAX_ROOM_MEMBERS: usize = 128;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum RoomKind {
    /// The room two contacts share; created on accept.
    Direct,
    /// A named room; members must be contacts of whoever adds them.
    Group,
}

impl RoomKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RoomKind::Direct => "direct",
            RoomKind::Group => "group",
        }
    }

    pub fn parse(text: &str) -> Option<RoomKind> {
        match text {
            "direct" => Some(RoomKind::Direct),
            "group" => Some(RoomKind::Group),
            _ => None,
        }
    }
}

/// A current member, with the public key senders seal to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct RoomMember {
    pub id: Uuid,
    pub number: IdentityNumber,
    pub kind: IdentityKind,
    pub display_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_key: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Room {
    pub id: Uuid,
    pub kind: RoomKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub members: Vec<RoomMember>,
    /// The last committed seq (0 for an empty room).
    pub last_seq: i64,
    pub created_at: Timestamp,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct RoomList {
    pub rooms: Vec<Room>,
    /// When more rooms follow: the `after` that continues
    /// (`GET /v1/rooms?limit=N&after=ROOM`, room-id order, which is
    /// creation order).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<Uuid>,
}

/// `POST /v1/rooms`: a group room with the caller and these contacts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateRoomRequest {
    pub name: String,
    #[serde(default)]
    pub members: Vec<IdentityNumber>,
}
