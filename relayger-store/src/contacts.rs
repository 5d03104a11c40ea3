//! Contacts: requests (accept, decline, withdraw), blocks, removal, and the
//! direct room an accepted pair shares.

use diesel::prelude::*;
use diesel::sql_types::{Array, BigInt, Nullable, Uuid as SqlUuid};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use relayger_core::ids::IdentityNumber;
use relayger_core::wire::{
    Contact, ContactRequestState, ContactRequestView, ContactRequests, RequestDirection, RoomKind,
    Timestamp,
};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::identities::{IdentityRow, identity_by_number};
use crate::prepared::CachedExt;
use crate::rooms::{join, leave};
use crate::schema::{blocks, contact_requests, contacts, identities, rooms};
use crate::wake::Wakes;
use crate::{Store, StoreError};

fn ordered(a: Uuid, b: Uuid) -> (Uuid, Uuid) {
    if a < b { (a, b) } else { (b, a) }
}

/// Serialises every change to one pair's contact state (request, accept,
/// block, remove) for the rest of the transaction, so a block and a first
/// accept racing each other cannot end with an active contact after the
/// block: whichever runs second sees what the first did.
async fn lock_pair(conn: &mut AsyncPgConnection, a: Uuid, b: Uuid) -> Result<(), StoreError> {
    let (low, high) = ordered(a, b);
    diesel::sql_query("SELECT pg_advisory_xact_lock(hashtextextended($1::text || $2::text, 7))")
        .bind::<diesel::sql_types::Uuid, _>(low)
        .bind::<diesel::sql_types::Uuid, _>(high)
        .execute(conn)
        .await?;
    Ok(())
}

/// Whether one of `ids` and one of `others` have blocked one another,
/// either way.
pub(crate) async fn any_block_among(
    conn: &mut AsyncPgConnection,
    ids: &[Uuid],
    others: &[Uuid],
) -> Result<bool, StoreError> {
    let count: i64 = blocks::table
        .filter(
            blocks::blocker_id
                .eq_any(ids)
                .and(blocks::blocked_id.eq_any(others))
                .or(blocks::blocker_id
                    .eq_any(others)
                    .and(blocks::blocked_id.eq_any(ids))),
        )
        .count()
        .get_result(conn)
        .await?;
    Ok(count > 0)
}

async fn is_blocked_either_way(
    conn: &mut AsyncPgConnection,
    a: Uuid,
    b: Uuid,
) -> Result<bool, StoreError> {
    any_block_among(conn, &[a], &[b]).await
}

type ContactRow = (Uuid, Uuid, Uuid, String, OffsetDateTime);

async fn contact_row(
    conn: &mut AsyncPgConnection,
    a: Uuid,
    b: Uuid,
) -> Result<Option<ContactRow>, StoreError> {
    let (low, high) = ordered(a, b);
    Ok(contacts::table
        .filter(contacts::identity_a.eq(low))
        .filter(contacts::identity_b.eq(high))
        .select((
            contacts::identity_a,
            contacts::identity_b,
            contacts::room_id,
            contacts::state,
            contacts::updated_at,
        ))
        .for_update()
        .first(conn)
        .await
        .optional()?)
}

/// A page of one identity's active contacts (`$1`), in direct-room order
/// after `$2` (none: from the start), only in the rooms `$3` (none: all),
/// at most `$4`. Each side of the pair is its own index range in room
/// order, so the page reads what it returns however many contacts there are.
const CONTACT_PAGE: &str = "\
SELECT c.room_id, c.updated_at AS since, i.*
FROM (
    (SELECT identity_b AS other, room_id, updated_at FROM contacts
     WHERE identity_a = $1 AND state = 'active'
       AND ($2::uuid IS NULL OR room_id > $2) AND ($3::uuid[] IS NULL OR room_id = ANY ($3))
     ORDER BY room_id LIMIT $4)
    UNION ALL
    (SELECT identity_a AS other, room_id, updated_at FROM contacts
     WHERE identity_b = $1 AND state = 'active'
       AND ($2::uuid IS NULL OR room_id > $2) AND ($3::uuid[] IS NULL OR room_id = ANY ($3))
     ORDER BY room_id LIMIT $4)
) c
JOIN identities i ON i.id = c.other
ORDER BY c.room_id
LIMIT $4";

/// A row of [`CONTACT_PAGE`].
#[derive(QueryableByName)]
struct ContactPageRow {
    #[diesel(sql_type = SqlUuid)]
    room_id: Uuid,
    #[diesel(sql_type = diesel::sql_types::Timestamptz)]
    since: OffsetDateTime,
    #[diesel(embed)]
    other: IdentityRow,
}

fn contact_view(other: &IdentityRow, room_id: Uuid, since: OffsetDateTime) -> Contact {
    Contact {
        id: other.id,
        number: other.number(),
        kind: other.kind(),
        display_name: other.display_name.clone(),
        public_key: other.public_key_base64(),
        room_id,
        since: Timestamp(since),
    }
}

fn request_view(
    id: Uuid,
    direction: RequestDirection,
    other: &IdentityRow,
    state: ContactRequestState,
    created_at: OffsetDateTime,
) -> ContactRequestView {
    ContactRequestView {
        id,
        direction,
        number: other.number(),
        kind: other.kind(),
        display_name: other.display_name.clone(),
        state,
        created_at: Timestamp(created_at),
    }
}

/// Moves the contact of the ordered pair `(low, high)` to `state`.
async fn set_contact_state(
    conn: &mut AsyncPgConnection,
    (low, high): (Uuid, Uuid),
    state: &str,
) -> Result<(), StoreError> {
    diesel::update(contacts::table.find((low, high)))
        .set((
            contacts::state.eq(state),
            contacts::updated_at.eq(diesel::dsl::now),
        ))
        .execute(conn)
        .await?;
    Ok(())
}

/// Ends an active contact: both leave the direct room.
async fn end_contact(
    conn: &mut AsyncPgConnection,
    wakes: &mut Wakes,
    a: Uuid,
    b: Uuid,
) -> Result<bool, StoreError> {
    let Some((low, high, room_id, state, _)) = contact_row(conn, a, b).await? else {
        return Ok(false);
    };
    if state != "active" {
        return Ok(false);
    }
    set_contact_state(conn, (low, high), "removed").await?;
    leave(conn, room_id, &[a, b]).await?;
    wakes.add(&[a, b]);
    Ok(true)
}

/// The pending request from `from` to `to`, locked.
async fn pending_request(
    conn: &mut AsyncPgConnection,
    from: Uuid,
    to: Uuid,
) -> Result<Option<(Uuid, OffsetDateTime)>, StoreError> {
    Ok(contact_requests::table
        .filter(contact_requests::requester_id.eq(from))
        .filter(contact_requests::target_id.eq(to))
        .filter(contact_requests::state.eq(ContactRequestState::Pending.as_str()))
        .select((contact_requests::id, contact_requests::created_at))
        .for_update()
        .first(conn)
        .await
        .optional()?)
}

async fn set_request_state(
    conn: &mut AsyncPgConnection,
    id: Uuid,
    state: ContactRequestState,
) -> Result<(), StoreError> {
    diesel::update(contact_requests::table.find(id))
        .set((
            contact_requests::state.eq(state.as_str()),
            contact_requests::decided_at.eq(diesel::dsl::now),
        ))
        .execute(conn)
        .await?;
    Ok(())
}

impl Store {
    /// One page of the active contacts of `caller`, restricted to rooms the
    /// token may see, in direct-room order after `after`: at most
    /// `page_size`, and the `after` that continues when more follow. One
    /// statement ([`CONTACT_PAGE`]), which reads the page and one more.
    pub async fn list_contacts(
        &self,
        caller: &crate::Caller,
        after: Option<Uuid>,
        page_size: u32,
    ) -> Result<(Vec<Contact>, Option<Uuid>), StoreError> {
        let mut conn = self.conn().await?;
        let rows: Vec<ContactPageRow> = diesel::sql_query(CONTACT_PAGE)
            .bind::<SqlUuid, _>(caller.identity_id)
            .bind::<Nullable<SqlUuid>, _>(after)
            .bind::<Nullable<Array<SqlUuid>>, _>(caller.rooms.as_deref())
            .bind::<BigInt, _>(i64::from(page_size) + 1)
            .cached()
            .load(&mut conn)
            .await?;
        let (rows, next) = relayger_core::paging::cut_page(rows, page_size, |row| row.room_id);
        let contacts = rows
            .iter()
            .map(|row| contact_view(&row.other, row.room_id, row.since))
            .collect();
        Ok((contacts, next))
    }

    /// One page of the pending requests to and from `me`, oldest first
    /// (request ids are time-ordered) after `after`, at most `page_size`
    /// of both directions together; `count` is all incoming ones.
    pub async fn contact_requests(
        &self,
        me: Uuid,
        after: Option<Uuid>,
        page_size: u32,
    ) -> Result<ContactRequests, StoreError> {
        let count = self.contact_request_count(me).await?;
        let mut conn = self.conn().await?;
        // One query for both directions: join each request with the other party.
        let mut query = contact_requests::table
            .inner_join(
                identities::table.on(identities::id
                    .eq(contact_requests::requester_id)
                    .and(contact_requests::target_id.eq(me))
                    .or(identities::id
                        .eq(contact_requests::target_id)
                        .and(contact_requests::requester_id.eq(me)))),
            )
            .filter(contact_requests::state.eq(ContactRequestState::Pending.as_str()))
            .into_boxed();
        if let Some(after) = after {
            query = query.filter(contact_requests::id.gt(after));
        }
        let rows: Vec<(Uuid, OffsetDateTime, Uuid, IdentityRow)> = query
            .order(contact_requests::id)
            .limit(i64::from(page_size) + 1)
            .select((
                contact_requests::id,
                contact_requests::created_at,
                contact_requests::requester_id,
                IdentityRow::as_select(),
            ))
            .load(&mut conn)
            .await?;
        let (rows, next) = relayger_core::paging::cut_page(rows, page_size, |row| row.0);
        let (mut incoming, mut outgoing) = (Vec::new(), Vec::new());
        for (id, at, requester, other) in &rows {
            if *requester == me {
                outgoing.push(request_view(
                    *id,
                    RequestDirection::Outgoing,
                    other,
                    ContactRequestState::Pending,
                    *at,
                ));
            } else {
                incoming.push(request_view(
                    *id,
                    RequestDirection::Incoming,
                    other,
                    ContactRequestState::Pending,
                    *at,
                ));
            }
        }
        Ok(ContactRequests {
            count,
            incoming,
            outgoing,
            next,
        })
    }

    /// The number of pending incoming requests (cheap; a claim reads it in
    /// its own transaction, see [`Store::claim`]).
    pub async fn contact_request_count(&self, me: Uuid) -> Result<u32, StoreError> {
        let conn = self.conn().await?;
        Ok(pending_request_count(&conn, me).await?)
    }

    /// `me` asks `number` to become a contact. Re-sending a pending request
    /// returns it unchanged.
    pub async fn request_contact(
        &self,
        me: Uuid,
        number: IdentityNumber,
    ) -> Result<(ContactRequestView, bool), StoreError> {
        self.write_and_wake(async |conn, wakes| {
            let target = identity_by_number(conn, &number).await?;
            if target.id == me {
                return Err(StoreError::invalid(
                    "you cannot send a contact request to yourself",
                ));
            }
            lock_pair(conn, me, target.id).await?;
            if is_blocked_either_way(conn, me, target.id).await? {
                return Err(StoreError::forbidden(format!(
                    "{number} does not accept contact requests from you"
                )));
            }
            if let Some((_, _, _, state, _)) = contact_row(conn, me, target.id).await?
                && state == "active"
            {
                return Err(StoreError::conflict(format!(
                    "{number} is already your contact"
                )));
            }
            if pending_request(conn, target.id, me).await?.is_some() {
                return Err(StoreError::conflict(format!(
                    "{number} already asked you; answer with `contacts accept {number}`"
                )));
            }
            if let Some((id, at)) = pending_request(conn, me, target.id).await? {
                return Ok((
                    request_view(
                        id,
                        RequestDirection::Outgoing,
                        &target,
                        ContactRequestState::Pending,
                        at,
                    ),
                    false,
                ));
            }
            let id = Uuid::now_v7();
            let created_at: OffsetDateTime = diesel::insert_into(contact_requests::table)
                .values((
                    contact_requests::id.eq(id),
                    contact_requests::requester_id.eq(me),
                    contact_requests::target_id.eq(target.id),
                    contact_requests::state.eq(ContactRequestState::Pending.as_str()),
                ))
                .returning(contact_requests::created_at)
                .get_result(conn)
                .await?;
            // A waiting worker wakes on a new friend request.
            wakes.add(&[target.id]);
            Ok((
                request_view(
                    id,
                    RequestDirection::Outgoing,
                    &target,
                    ContactRequestState::Pending,
                    created_at,
                ),
                true,
            ))
        })
        .await
    }

    /// `me` accepts the pending request from `number`: creates or reopens
    /// the pair's direct room.
    pub async fn accept_contact(
        &self,
        me: Uuid,
        number: IdentityNumber,
    ) -> Result<Contact, StoreError> {
        self.write_and_wake(async |conn, wakes| {
            let requester = identity_by_number(conn, &number).await?;
            lock_pair(conn, me, requester.id).await?;
            let Some((request_id, _)) = pending_request(conn, requester.id, me).await? else {
                return Err(StoreError::not_found(format!(
                    "no pending contact request from {number}"
                )));
            };
            if is_blocked_either_way(conn, me, requester.id).await? {
                return Err(StoreError::forbidden(format!("{number} is blocked")));
            }
            crate::pause::pause(crate::pause::PausePoint::AcceptAfterBlockCheck, me).await;
            set_request_state(conn, request_id, ContactRequestState::Accepted).await?;
            let (low, high) = ordered(me, requester.id);
            let room_id = match contact_row(conn, me, requester.id).await? {
                Some((_, _, room_id, _, _)) => {
                    set_contact_state(conn, (low, high), "active").await?;
                    room_id
                }
                None => {
                    let room_id = Uuid::now_v7();
                    diesel::insert_into(rooms::table)
                        .values((
                            rooms::id.eq(room_id),
                            rooms::kind.eq(RoomKind::Direct.as_str()),
                            rooms::created_by.eq(me),
                        ))
                        .execute(conn)
                        .await?;
                    diesel::insert_into(contacts::table)
                        .values((
                            contacts::identity_a.eq(low),
                            contacts::identity_b.eq(high),
                            contacts::room_id.eq(room_id),
                            contacts::state.eq("active"),
                        ))
                        .execute(conn)
                        .await?;
                    room_id
                }
            };
            join(conn, room_id, me).await?;
            join(conn, room_id, requester.id).await?;
            wakes.add(&[me, requester.id]);
            let since: OffsetDateTime = contacts::table
                .find((low, high))
                .select(contacts::updated_at)
                .first(conn)
                .await?;
            Ok(contact_view(&requester, room_id, since))
        })
        .await
    }

    /// `me` declines the pending request from `number`.
    pub async fn decline_contact(
        &self,
        me: Uuid,
        number: IdentityNumber,
    ) -> Result<ContactRequestView, StoreError> {
        self.close_request(me, number, RequestDirection::Incoming)
            .await
    }

    /// `me` withdraws its pending request to `number`.
    pub async fn withdraw_contact(
        &self,
        me: Uuid,
        number: IdentityNumber,
    ) -> Result<ContactRequestView, StoreError> {
        self.close_request(me, number, RequestDirection::Outgoing)
            .await
    }

    /// Closes the pending request between `me` and `number`: one `me`
    /// received is declined, one it sent is withdrawn.
    async fn close_request(
        &self,
        me: Uuid,
        number: IdentityNumber,
        direction: RequestDirection,
    ) -> Result<ContactRequestView, StoreError> {
        let state = match direction {
            RequestDirection::Incoming => ContactRequestState::Declined,
            RequestDirection::Outgoing => ContactRequestState::Withdrawn,
        };
        self.write_and_wake(async |conn, wakes| {
            let other = identity_by_number(conn, &number).await?;
            let (from, to) = match direction {
                RequestDirection::Incoming => (other.id, me),
                RequestDirection::Outgoing => (me, other.id),
            };
            let Some((id, created_at)) = pending_request(conn, from, to).await? else {
                let what = match direction {
                    RequestDirection::Incoming => {
                        format!("no pending contact request from {number}")
                    }
                    RequestDirection::Outgoing => {
                        format!("no pending contact request to {number}")
                    }
                };
                return Err(StoreError::not_found(what));
            };
            set_request_state(conn, id, state).await?;
            wakes.add(&[other.id]);
            Ok(request_view(id, direction, &other, state, created_at))
        })
        .await
    }

    /// `me` blocks `number`: ends the contact (both leave the direct room)
    /// and closes pending requests both ways.
    pub async fn block_contact(&self, me: Uuid, number: IdentityNumber) -> Result<(), StoreError> {
        self.write_and_wake(async |conn, wakes| {
            let other = identity_by_number(conn, &number).await?;
            if other.id == me {
                return Err(StoreError::invalid("you cannot block yourself"));
            }
            lock_pair(conn, me, other.id).await?;
            diesel::insert_into(blocks::table)
                .values((blocks::blocker_id.eq(me), blocks::blocked_id.eq(other.id)))
                .on_conflict_do_nothing()
                .execute(conn)
                .await?;
            end_contact(conn, wakes, me, other.id).await?;
            if let Some((id, _)) = pending_request(conn, other.id, me).await? {
                set_request_state(conn, id, ContactRequestState::Declined).await?;
            }
            if let Some((id, _)) = pending_request(conn, me, other.id).await? {
                set_request_state(conn, id, ContactRequestState::Withdrawn).await?;
            }
            Ok(())
        })
        .await
    }

    pub async fn unblock_contact(
        &self,
        me: Uuid,
        number: IdentityNumber,
    ) -> Result<(), StoreError> {
        let mut conn = self.conn().await?;
        let other = identity_by_number(&mut conn, &number).await?;
        let removed = diesel::delete(blocks::table.find((me, other.id)))
            .execute(&mut conn)
            .await?;
        if removed == 0 {
            return Err(StoreError::not_found(format!("{number} is not blocked")));
        }
        Ok(())
    }

    /// Ends an active contact; both lose access to the direct room.
    pub async fn remove_contact(&self, me: Uuid, number: IdentityNumber) -> Result<(), StoreError> {
        self.write_and_wake(async |conn, wakes| {
            let other = identity_by_number(conn, &number).await?;
            if !end_contact(conn, wakes, me, other.id).await? {
                return Err(StoreError::not_found(format!(
                    "{number} is not your contact"
                )));
            }
            Ok(())
        })
        .await
    }

    /// The agent `number` if `owner` owns it.
    pub async fn owned_agent(
        &self,
        owner: Uuid,
        number: &IdentityNumber,
    ) -> Result<IdentityRow, StoreError> {
        let mut conn = self.conn().await?;
        let agent = identity_by_number(&mut conn, number).await?;
        if agent.owner_id != Some(owner) {
            return Err(StoreError::forbidden(format!(
                "{number} is not an agent you own"
            )));
        }
        Ok(agent)
    }
}

/// The pending requests to `$1`, counted from the pending requests' index:
/// the state is written in the statement, so a generic plan (a claim's)
/// can prove the index's predicate.
pub(crate) const PENDING_REQUEST_COUNT: &str =
    "SELECT count(*) AS n FROM contact_requests WHERE target_id = $1 AND state = 'pending'";

#[derive(QueryableByName)]
struct RequestCount {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

/// The number of pending requests to `me` ([`PENDING_REQUEST_COUNT`]).
/// Takes a shared connection, so it can be pipelined with other statements
/// (the claim sends it in its first flight).
pub(crate) fn pending_request_count(
    mut conn: &AsyncPgConnection,
    me: Uuid,
) -> impl std::future::Future<Output = QueryResult<u32>> + Send + '_ {
    let count = diesel::sql_query(PENDING_REQUEST_COUNT)
        .bind::<SqlUuid, _>(me)
        .cached()
        .get_result::<RequestCount>(&mut conn);
    async move { Ok(u32::try_from(count.await?.n).unwrap_or(u32::MAX)) }
}
