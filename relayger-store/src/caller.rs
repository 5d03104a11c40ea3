//! Who is asking: the identity behind a token and the rooms it may touch.

use uuid::Uuid;

/// The authenticated side of a request, as far as queries care. Scopes are
/// checked by the API before the store is called; room restriction is applied
/// inside the queries so lists never include a room the token may not see.
#[derive(Debug, Clone)]
pub struct Caller {
    pub identity_id: Uuid,
    pub token_id: Uuid,
    /// `None`: every room the identity can reach.
    pub rooms: Option<Vec<Uuid>>,
}

impl Caller {
    /// Whether the token may touch `room` at all (membership is separate).
    pub fn may_see_room(&self, room: Uuid) -> bool {
        self.rooms
            .as_ref()
            .is_none_or(|rooms| rooms.contains(&room))
    }

    pub fn is_room_restricted(&self) -> bool {
        self.rooms.is_some()
    }
}
