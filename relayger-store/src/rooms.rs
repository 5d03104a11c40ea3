//! Rooms and membership. Access to a room is an active membership (and a
//! token allowed to see the room); blocking or removing a contact ends the
//! membership of both sides in their direct room.

use diesel::prelude::*;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use relayger_core::ids::IdentityNumber;
use relayger_core::wire::{MAX_ROOM_MEMBERS, Room, RoomKind, RoomMember, Timestamp};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::identities::{IdentityRow, identity_by_number};
use crate::pause::{PausePoint, pause};
use crate::schema::{contacts, identities, room_members, rooms};
use crate::{Caller, Store, StoreError};

#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = rooms)]
pub(crate) struct RoomRow {
    pub(crate) id: Uuid,
    pub(crate) kind: String,
    pub(crate) name: Option<String>,
    pub(crate) last_seq: i64,
    pub(crate) created_at: OffsetDateTime,
}

pub(crate) const NO_SUCH_ROOM: &str = "no such room, or you are not a member";

/// The room, if the caller's token may see it and the caller is a current
/// member. Anything else is "not found": no existence is leaked.
pub(crate) async fn require_member(
    conn: &mut AsyncPgConnection,
    caller: &Caller,
    room_id: Uuid,
) -> Result<RoomRow, StoreError> {
    if !caller.may_see_room(room_id) {
        return Err(StoreError::not_found(NO_SUCH_ROOM));
    }
    rooms::table
        .inner_join(room_members::table)
        .filter(rooms::id.eq(room_id))
        .filter(room_members::identity_id.eq(caller.identity_id))
        .filter(room_members::left_at.is_null())
        .select(RoomRow::as_select())
        .first(conn)
        .await
        .optional()?
        .ok_or_else(|| StoreError::not_found(NO_SUCH_ROOM))
}

/// Current members' ids.
pub(crate) async fn member_ids(
    conn: &mut AsyncPgConnection,
    room_id: Uuid,
) -> Result<Vec<Uuid>, StoreError> {
    Ok(room_members::table
        .filter(room_members::room_id.eq(room_id))
        .filter(room_members::left_at.is_null())
        .select(room_members::identity_id)
        .order(room_members::identity_id)
        .load(conn)
        .await?)
}

/// Two identities where one has blocked the other are never put in a room
/// together (the message does not say who blocked whom).
fn blocked_together() -> StoreError {
    StoreError::forbidden(
        "these identities cannot be in a room together: one has blocked the other",
    )
}

/// Whether `a` and `b` are active contacts.
pub(crate) async fn are_contacts(
    conn: &mut AsyncPgConnection,
    a: Uuid,
    b: Uuid,
) -> Result<bool, StoreError> {
    let (low, high) = if a < b { (a, b) } else { (b, a) };
    let count: i64 = contacts::table
        .filter(contacts::identity_a.eq(low))
        .filter(contacts::identity_b.eq(high))
        .filter(contacts::state.eq("active"))
        .count()
        .get_result(conn)
        .await?;
    Ok(count > 0)
}

/// Adds or re-adds a member. The member's runtimes learn of the room at
/// once: a room without a checkpoint is scanned from its first message.
///
/// Two locks keep the mark from being lost. The identity row `FOR SHARE`
/// waits for a registration of the member in flight (it holds that row), so
/// its new runtime is seen and marked, and a registration that starts later
/// waits for this join and sees the membership. The room row update (a
/// `NO KEY UPDATE` lock) waits for a claim scanning the room (it holds the row `FOR
/// SHARE` while it judges membership and drops the mark), so a scan that
/// found the member gone cannot delete the mark of this rejoin.
pub(crate) async fn join(
    conn: &mut AsyncPgConnection,
    room_id: Uuid,
    identity_id: Uuid,
) -> Result<(), StoreError> {
    identities::table
        .find(identity_id)
        .select(identities::id)
        .for_share()
        .first::<Uuid>(conn)
        .await?;
    // Bumping `members_version` takes the row lock and tells a one-statement
    // send that waited for it to retry on the locked path.
    diesel::update(rooms::table.find(room_id))
        .set(rooms::members_version.eq(rooms::members_version + 1))
        .execute(conn)
        .await?;
    crate::runtime::scan::mark_rooms_changed(conn, &[identity_id], &[room_id]).await?;
    diesel::insert_into(room_members::table)
        .values((
            room_members::room_id.eq(room_id),
            room_members::identity_id.eq(identity_id),
        ))
        .on_conflict((room_members::room_id, room_members::identity_id))
        .do_update()
        .set((
            room_members::left_at.eq(None::<OffsetDateTime>),
            room_members::joined_at.eq(diesel::dsl::now),
        ))
        .execute(conn)
        .await?;
    pause(PausePoint::JoinBeforeCommit, identity_id).await;
    Ok(())
}

/// Ends the memberships of these identities in a room.
pub(crate) async fn leave(
    conn: &mut AsyncPgConnection,
    room_id: Uuid,
    identity_ids: &[Uuid],
) -> Result<(), StoreError> {
    diesel::update(
        room_members::table
            .filter(room_members::room_id.eq(room_id))
            .filter(room_members::identity_id.eq_any(identity_ids))
            .filter(room_members::left_at.is_null()),
    )
    .set(room_members::left_at.eq(diesel::dsl::now))
    .execute(conn)
    .await?;
    Ok(())
}

/// The wire view of rooms with their current members: one query for the
/// members of all of them, whatever their number.
async fn room_views(
    conn: &mut AsyncPgConnection,
    rooms: Vec<RoomRow>,
) -> Result<Vec<Room>, StoreError> {
    let ids: Vec<Uuid> = rooms.iter().map(|room| room.id).collect();
    let members: Vec<(Uuid, IdentityRow)> = identities::table
        .inner_join(room_members::table)
        .filter(room_members::room_id.eq_any(&ids))
        .filter(room_members::left_at.is_null())
        .order((room_members::room_id, identities::number))
        .select((room_members::room_id, IdentityRow::as_select()))
        .load(conn)
        .await?;
    let mut by_room: std::collections::HashMap<Uuid, Vec<RoomMember>> =
        std::collections::HashMap::with_capacity(ids.len());
    for (room_id, m) in members {
        by_room.entry(room_id).or_default().push(RoomMember {
            id: m.id,
            number: m.number(),
            kind: m.kind(),
            display_name: m.display_name.clone(),
            public_key: m.public_key_base64(),
        });
    }
    Ok(rooms
        .into_iter()
        .map(|room| Room {
            id: room.id,
            kind: RoomKind::parse(&room.kind).unwrap_or(RoomKind::Group),
            members: by_room.remove(&room.id).unwrap_or_default(),
            name: room.name,
            last_seq: room.last_seq,
            created_at: Timestamp(room.created_at),
        })
        .collect())
}

async fn room_view(conn: &mut AsyncPgConnection, room: RoomRow) -> Result<Room, StoreError> {
    let mut views = room_views(conn, vec![room]).await?;
    Ok(views.pop().expect("one room in, one view out"))
}

/// Each of a restricted token's rooms: its id, committed seq, members'
/// version, and whether the caller is a member now
/// ([`Store::restricted_rooms_state`]).
pub type RoomsState = Vec<(Uuid, i64, i64, bool)>;

impl Store {
    /// One page of the rooms the caller belongs to (and its token may see),
    /// in room-id order (ids are time-ordered: creation order) after
    /// `after`, at most `page_size`; the `after` that continues, when more
    /// follow. Two queries whatever the page holds.
    pub async fn list_rooms(
        &self,
        caller: &Caller,
        after: Option<Uuid>,
        page_size: u32,
    ) -> Result<(Vec<Room>, Option<Uuid>), StoreError> {
        let mut conn = self.conn().await?;
        let mut query = rooms::table
            .inner_join(room_members::table)
            .filter(room_members::identity_id.eq(caller.identity_id))
            .filter(room_members::left_at.is_null())
            .into_boxed();
        if let Some(after) = after {
            query = query.filter(rooms::id.gt(after));
        }
        if let Some(allowed) = &caller.rooms {
            query = query.filter(rooms::id.eq_any(allowed.clone()));
        }
        let rows: Vec<RoomRow> = query
            .order(rooms::id)
            .limit(i64::from(page_size) + 1)
            .select(RoomRow::as_select())
            .load(&mut conn)
            .await?;
        let (rows, next) = relayger_core::paging::cut_page(rows, page_size, |row| row.id);
        Ok((room_views(&mut conn, rows).await?, next))
    }

    /// What a room-restricted token's socket compares between wakes: for
    /// each of the token's rooms, its committed seq, its members' version
    /// and whether the caller is in it now (none for an unrestricted
    /// token). Wakes are addressed to identities, not rooms: a wake after
    /// which none of this moved was about another room or a contact
    /// request, which the token must not hear of.
    pub async fn restricted_rooms_state(&self, caller: &Caller) -> Result<RoomsState, StoreError> {
        let Some(allowed) = &caller.rooms else {
            return Ok(Vec::new());
        };
        let mut conn = self.conn().await?;
        Ok(rooms::table
            .left_join(
                room_members::table.on(room_members::room_id
                    .eq(rooms::id)
                    .and(room_members::identity_id.eq(caller.identity_id))
                    .and(room_members::left_at.is_null())),
            )
            .filter(rooms::id.eq_any(allowed))
            .order(rooms::id)
            .select((
                rooms::id,
                rooms::last_seq,
                rooms::members_version,
                room_members::identity_id.nullable().is_not_null(),
            ))
            .load(&mut conn)
            .await?)
    }

    pub async fn room(&self, caller: &Caller, room_id: Uuid) -> Result<Room, StoreError> {
        let mut conn = self.conn().await?;
        let row = require_member(&mut conn, caller, room_id).await?;
        room_view(&mut conn, row).await
    }

    /// Creates a group room with the caller and these contacts of the caller.
    pub async fn create_room(
        &self,
        caller: &Caller,
        name: String,
        members: Vec<IdentityNumber>,
    ) -> Result<Room, StoreError> {
        let caller = caller.clone();
        self.write_and_wake(async |conn, wakes| {
            let room_id = Uuid::now_v7();
            let mut member_ids = vec![caller.identity_id];
            for number in &members {
                let member = identity_by_number(conn, number).await?;
                if member.id == caller.identity_id || member_ids.contains(&member.id) {
                    continue;
                }
                if !are_contacts(conn, caller.identity_id, member.id).await? {
                    return Err(StoreError::forbidden(format!(
                        "{number} is not your contact; only contacts can be added to a room"
                    )));
                }
                member_ids.push(member.id);
            }
            if crate::contacts::any_block_among(conn, &member_ids, &member_ids).await? {
                return Err(blocked_together());
            }
            let row: RoomRow = diesel::insert_into(rooms::table)
                .values((
                    rooms::id.eq(room_id),
                    rooms::kind.eq(RoomKind::Group.as_str()),
                    rooms::name.eq(&name),
                    rooms::created_by.eq(caller.identity_id),
                ))
                .returning(RoomRow::as_returning())
                .get_result(conn)
                .await?;
            for id in &member_ids {
                join(conn, room_id, *id).await?;
            }
            wakes.add(&member_ids[1..]);
            room_view(conn, row).await
        })
        .await
    }

    /// Adds a contact of the caller to a group room the caller is in.
    pub async fn add_room_member(
        &self,
        caller: &Caller,
        room_id: Uuid,
        number: IdentityNumber,
    ) -> Result<Room, StoreError> {
        let caller = caller.clone();
        self.write_and_wake(async |conn, wakes| {
            let room = require_member(conn, &caller, room_id).await?;
            if room.kind != RoomKind::Group.as_str() {
                return Err(StoreError::invalid(
                    "members can only be added to group rooms",
                ));
            }
            let member = identity_by_number(conn, &number).await?;
            if member.id != caller.identity_id
                && !are_contacts(conn, caller.identity_id, member.id).await?
            {
                return Err(StoreError::forbidden(format!(
                    "{number} is not your contact; only contacts can be added to a room"
                )));
            }
            let present = member_ids(conn, room_id).await?;
            if present.len() >= MAX_ROOM_MEMBERS && !present.contains(&member.id) {
                return Err(StoreError::conflict(format!(
                    "a room holds at most {MAX_ROOM_MEMBERS} members"
                )));
            }
            if crate::contacts::any_block_among(conn, &[member.id], &present).await? {
                return Err(blocked_together());
            }
            join(conn, room_id, member.id).await?;
            wakes.add(&[member.id]);
            room_view(conn, room).await
        })
        .await
    }

    /// Leaves a group room.
    pub async fn leave_room(&self, caller: &Caller, room_id: Uuid) -> Result<(), StoreError> {
        let mut conn = self.conn().await?;
        let room = require_member(&mut conn, caller, room_id).await?;
        if room.kind != RoomKind::Group.as_str() {
            return Err(StoreError::invalid(
                "a direct room ends with the contact: use `contacts remove` or `contacts block`",
            ));
        }
        leave(&mut conn, room_id, &[caller.identity_id]).await
    }
}
