//! Identities, their tokens, and registration invites.

use base64::Engine as _;
use diesel::prelude::*;
use diesel::sql_types::BigInt;
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use relayger_core::ids::IdentityNumber;
use relayger_core::wire::{CreatedToken, Identity, IdentityKind, Scope, Timestamp, TokenInfo};
use ring::digest::{SHA256, digest};
use ring::rand::{SecureRandom, SystemRandom};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::schema::{identities, invites, tokens};
use crate::{Caller, Store, StoreError};

/// Prefix of every token secret, so a leaked one is recognisable in logs and
/// secret scanners.
const TOKEN_PREFIX: &str = "rlg_";
const INVITE_PREFIX: &str = "inv_";

/// An identity row.
#[derive(Debug, Clone, Queryable, QueryableByName, Selectable)]
#[diesel(table_name = identities)]
pub struct IdentityRow {
    pub id: Uuid,
    pub number: String,
    pub kind: String,
    pub display_name: String,
    pub owner_id: Option<Uuid>,
    pub public_key: Option<Vec<u8>>,
    pub created_at: OffsetDateTime,
}

impl IdentityRow {
    /// The person accountable for this identity: its owner for an agent,
    /// itself for a person. Per-person allowances are keyed by it, so
    /// creating agents does not multiply them.
    pub fn accountable_person(&self) -> Uuid {
        self.owner_id.unwrap_or(self.id)
    }

    pub fn kind(&self) -> IdentityKind {
        IdentityKind::parse(&self.kind).unwrap_or(IdentityKind::Person)
    }

    pub fn number(&self) -> IdentityNumber {
        IdentityNumber::parse(&self.number).expect("identities.number is checked by the schema")
    }

    pub fn public_key_base64(&self) -> Option<String> {
        self.public_key
            .as_ref()
            .map(|key| base64::engine::general_purpose::STANDARD.encode(key))
    }

    fn to_wire(&self, owner_number: Option<IdentityNumber>) -> Identity {
        Identity {
            id: self.id,
            number: self.number(),
            kind: self.kind(),
            display_name: self.display_name.clone(),
            owner_number,
            public_key: self.public_key_base64(),
            created_at: Timestamp(self.created_at),
        }
    }
}

/// The token a request presented, with its identity.
#[derive(Debug, Clone)]
pub struct AuthenticatedToken {
    pub token_id: Uuid,
    pub scopes: Vec<Scope>,
    pub rooms: Option<Vec<Uuid>>,
    pub identity: IdentityRow,
}

impl AuthenticatedToken {
    pub fn has(&self, scope: Scope) -> bool {
        self.scopes.contains(&scope)
    }

    pub fn caller(&self) -> Caller {
        Caller {
            identity_id: self.identity.id,
            token_id: self.token_id,
            rooms: self.rooms.clone(),
        }
    }
}

/// What registration creates.
#[derive(Debug, Clone)]
pub struct NewIdentity {
    pub display_name: String,
    pub kind: IdentityKind,
    pub public_key: [u8; 32],
    pub owner_id: Option<Uuid>,
}

#[derive(QueryableByName)]
struct NextNumber {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

/// SHA-256 of a secret: the only form in which tokens and invites are stored.
pub fn secret_hash(secret: &str) -> Vec<u8> {
    digest(&SHA256, secret.as_bytes()).as_ref().to_vec()
}

fn random_secret(prefix: &str) -> Result<String, StoreError> {
    let mut bytes = [0u8; 32];
    SystemRandom::new().fill(&mut bytes).map_err(|_| {
        StoreError::rejected(relayger_core::ErrorCode::Internal, "random source failed")
    })?;
    Ok(format!(
        "{prefix}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    ))
}

fn scope_names(scopes: &[Scope]) -> Vec<String> {
    let mut names: Vec<String> = scopes.iter().map(|s| s.as_str().to_owned()).collect();
    names.sort();
    names.dedup();
    names
}

fn parse_scopes(names: &[String]) -> Vec<Scope> {
    let mut scopes: Vec<Scope> = names.iter().filter_map(|n| Scope::parse(n)).collect();
    scopes.sort();
    scopes
}

/// Inserts an identity and its first token (read, write, contacts) in the
/// caller's transaction.
async fn insert_identity(
    conn: &mut AsyncPgConnection,
    new: &NewIdentity,
) -> Result<(IdentityRow, CreatedToken), StoreError> {
    let next: NextNumber = diesel::sql_query("SELECT nextval('identity_number_seq') AS n")
        .get_result(conn)
        .await?;
    let number = IdentityNumber::from_sequence(crate::error::stored(
        "an identity number sequence value",
        next.n,
    )?)
    .map_err(|e| StoreError::rejected(relayger_core::ErrorCode::Internal, e.to_string()))?;
    let row: IdentityRow = diesel::insert_into(identities::table)
        .values((
            identities::id.eq(Uuid::now_v7()),
            identities::number.eq(number.as_str()),
            identities::kind.eq(new.kind.as_str()),
            identities::display_name.eq(&new.display_name),
            identities::owner_id.eq(new.owner_id),
            identities::public_key.eq(new.public_key.to_vec()),
        ))
        .returning(IdentityRow::as_returning())
        .get_result(conn)
        .await?;
    let token = insert_token(conn, row.id, &Scope::ALL, None, Some("registration")).await?;
    Ok((row, token))
}

async fn insert_token(
    conn: &mut AsyncPgConnection,
    identity_id: Uuid,
    scopes: &[Scope],
    rooms: Option<&[Uuid]>,
    label: Option<&str>,
) -> Result<CreatedToken, StoreError> {
    let secret = random_secret(TOKEN_PREFIX)?;
    let id = Uuid::now_v7();
    let created_at: OffsetDateTime = diesel::insert_into(tokens::table)
        .values((
            tokens::id.eq(id),
            tokens::identity_id.eq(identity_id),
            tokens::secret_hash.eq(secret_hash(&secret)),
            tokens::scopes.eq(scope_names(scopes)),
            tokens::room_ids.eq(rooms.map(<[Uuid]>::to_vec)),
            tokens::label.eq(label),
        ))
        .returning(tokens::created_at)
        .get_result(conn)
        .await?;
    Ok(CreatedToken {
        id,
        secret,
        scopes: parse_scopes(&scope_names(scopes)),
        room_ids: rooms.map(<[Uuid]>::to_vec),
        label: label.map(str::to_owned),
        created_at: Timestamp(created_at),
    })
}

impl Store {
    /// Registers an identity. With `invite`, the invite is consumed in the
    /// same transaction (and must be unused); `require_invite` refuses
    /// registration without one.
    pub async fn register(
        &self,
        new: NewIdentity,
        invite: Option<&str>,
        require_invite: bool,
    ) -> Result<(Identity, CreatedToken), StoreError> {
        let mut conn = self.conn().await?;
        let invite_hash = invite.map(secret_hash);
        conn.transaction(async |conn| -> Result<_, StoreError> {
            if require_invite && invite_hash.is_none() {
                return Err(StoreError::rejected(
                    relayger_core::ErrorCode::RegistrationClosed,
                    "registration on this server needs an invite code (--invite CODE)",
                ));
            }
            let invite_id = match &invite_hash {
                Some(hash) => Some(
                    invites::table
                        .filter(invites::code_hash.eq(hash))
                        .filter(invites::used_at.is_null())
                        .select(invites::id)
                        .for_update()
                        .first::<Uuid>(conn)
                        .await
                        .optional()?
                        .ok_or_else(|| {
                            StoreError::rejected(
                                relayger_core::ErrorCode::RegistrationClosed,
                                "the invite code is unknown or already used",
                            )
                        })?,
                ),
                None => None,
            };
            let (row, token) = insert_identity(conn, &new).await?;
            if let Some(invite_id) = invite_id {
                diesel::update(invites::table.find(invite_id))
                    .set((
                        invites::used_at.eq(diesel::dsl::now),
                        invites::used_by.eq(row.id),
                    ))
                    .execute(conn)
                    .await?;
            }
            Ok((row.to_wire(None), token))
        })
        .await
    }

    /// A person creates an agent it owns, unless it already owns
    /// `max_agents` (409 `conflict`). The owner's row is locked first, so
    /// concurrent creations cannot pass the cap together.
    pub async fn create_agent(
        &self,
        owner: &IdentityRow,
        display_name: String,
        public_key: [u8; 32],
        max_agents: u32,
    ) -> Result<(Identity, CreatedToken), StoreError> {
        if owner.kind() != IdentityKind::Person {
            return Err(StoreError::forbidden("only a person can create agents"));
        }
        let mut conn = self.conn().await?;
        let owner_number = owner.number();
        let owner_id = owner.id;
        conn.transaction(async |conn| -> Result<_, StoreError> {
            identities::table
                .find(owner_id)
                .select(identities::id)
                .for_update()
                .get_result::<Uuid>(conn)
                .await?;
            let owned: i64 = identities::table
                .filter(identities::owner_id.eq(owner_id))
                .count()
                .get_result(conn)
                .await?;
            if owned >= i64::from(max_agents) {
                return Err(StoreError::conflict(format!(
                    "a person may own at most {max_agents} agents on this server"
                )));
            }
            let new = NewIdentity {
                display_name,
                kind: IdentityKind::Agent,
                public_key,
                owner_id: Some(owner_id),
            };
            let (row, token) = insert_identity(conn, &new).await?;
            Ok((row.to_wire(Some(owner_number)), token))
        })
        .await
    }

    /// Looks a token up by the hash of its secret. Revoked tokens are not
    /// found. The caller compares the hash again in constant time.
    pub async fn authenticate(
        &self,
        hash: &[u8],
    ) -> Result<Option<(Vec<u8>, AuthenticatedToken)>, StoreError> {
        let mut conn = self.conn().await?;
        let found = tokens::table
            .inner_join(identities::table)
            .filter(tokens::secret_hash.eq(hash))
            .filter(tokens::revoked_at.is_null())
            .select((
                tokens::id,
                tokens::secret_hash,
                tokens::scopes,
                tokens::room_ids,
                IdentityRow::as_select(),
            ))
            .first::<(Uuid, Vec<u8>, Vec<String>, Option<Vec<Uuid>>, IdentityRow)>(&mut conn)
            .await
            .optional()?;
        Ok(
            found.map(|(token_id, stored_hash, scopes, rooms, identity)| {
                (
                    stored_hash,
                    AuthenticatedToken {
                        token_id,
                        scopes: parse_scopes(&scopes),
                        rooms,
                        identity,
                    },
                )
            }),
        )
    }

    /// Whether a token is still valid (for long-lived sockets).
    pub async fn token_is_active(&self, token_id: Uuid) -> Result<bool, StoreError> {
        let mut conn = self.conn().await?;
        let count: i64 = tokens::table
            .filter(tokens::id.eq(token_id))
            .filter(tokens::revoked_at.is_null())
            .count()
            .get_result(&mut conn)
            .await?;
        Ok(count > 0)
    }

    /// The identity as its owner sees it (with the owner's number for agents).
    pub async fn identity_view(&self, identity: &IdentityRow) -> Result<Identity, StoreError> {
        let mut conn = self.conn().await?;
        let owner_number = match identity.owner_id {
            Some(owner) => Some(
                identities::table
                    .find(owner)
                    .select(IdentityRow::as_select())
                    .first(&mut conn)
                    .await?
                    .number(),
            ),
            None => None,
        };
        Ok(identity.to_wire(owner_number))
    }

    /// Public information about an identity, by number.
    pub async fn identity_by_number(
        &self,
        number: &IdentityNumber,
    ) -> Result<IdentityRow, StoreError> {
        let mut conn = self.conn().await?;
        identity_by_number(&mut conn, number).await
    }

    pub async fn public_identity(&self, number: &IdentityNumber) -> Result<Identity, StoreError> {
        let row = self.identity_by_number(number).await?;
        let mut view = row.to_wire(None);
        view.owner_number = None;
        Ok(view)
    }

    /// Creates a token for the caller's identity.
    pub async fn create_token(
        &self,
        identity_id: Uuid,
        scopes: &[Scope],
        rooms: Option<&[Uuid]>,
        label: Option<&str>,
    ) -> Result<CreatedToken, StoreError> {
        let mut conn = self.conn().await?;
        insert_token(&mut conn, identity_id, scopes, rooms, label).await
    }

    /// One page of the caller's tokens, newest first (token ids are
    /// time-ordered) before `after`, at most `page_size`, without secrets;
    /// the `after` that continues, when more follow.
    pub async fn list_tokens(
        &self,
        caller: &Caller,
        after: Option<Uuid>,
        page_size: u32,
    ) -> Result<(Vec<TokenInfo>, Option<Uuid>), StoreError> {
        let mut conn = self.conn().await?;
        let mut query = tokens::table
            .filter(tokens::identity_id.eq(caller.identity_id))
            .into_boxed();
        if let Some(after) = after {
            query = query.filter(tokens::id.lt(after));
        }
        let rows: Vec<TokenRow> = query
            .order(tokens::id.desc())
            .limit(i64::from(page_size) + 1)
            .select(TokenRow::as_select())
            .load(&mut conn)
            .await?;
        let (rows, next) = relayger_core::paging::cut_page(rows, page_size, |row| row.id);
        Ok((
            rows.into_iter()
                .map(|row| token_info(row, caller))
                .collect(),
            next,
        ))
    }

    /// Revokes one of the caller's tokens; effective on the next request.
    /// Revoking it again keeps the first revocation time.
    pub async fn revoke_token(
        &self,
        caller: &Caller,
        token_id: Uuid,
    ) -> Result<TokenInfo, StoreError> {
        let mut conn = self.conn().await?;
        let row: Option<TokenRow> = diesel::update(
            tokens::table
                .filter(tokens::id.eq(token_id))
                .filter(tokens::identity_id.eq(caller.identity_id)),
        )
        .set(tokens::revoked_at.eq(diesel::dsl::sql::<
            diesel::sql_types::Nullable<diesel::sql_types::Timestamptz>,
        >("COALESCE(tokens.revoked_at, now())")))
        .returning(TokenRow::as_returning())
        .get_result(&mut conn)
        .await
        .optional()?;
        row.map(|row| token_info(row, caller))
            .ok_or_else(|| StoreError::not_found("no such token"))
    }

    /// Creates a single-use registration invite; returns the code (shown once).
    pub async fn create_invite(&self) -> Result<String, StoreError> {
        let code = random_secret(INVITE_PREFIX)?;
        let mut conn = self.conn().await?;
        diesel::insert_into(invites::table)
            .values((
                invites::id.eq(Uuid::now_v7()),
                invites::code_hash.eq(secret_hash(&code)),
            ))
            .execute(&mut conn)
            .await?;
        Ok(code)
    }
}

/// A token as the token routes show it (never its hash).
#[derive(Queryable, Selectable)]
#[diesel(table_name = tokens)]
struct TokenRow {
    id: Uuid,
    scopes: Vec<String>,
    room_ids: Option<Vec<Uuid>>,
    label: Option<String>,
    created_at: OffsetDateTime,
    revoked_at: Option<OffsetDateTime>,
}

fn token_info(row: TokenRow, caller: &Caller) -> TokenInfo {
    TokenInfo {
        id: row.id,
        scopes: parse_scopes(&row.scopes),
        room_ids: row.room_ids,
        label: row.label,
        created_at: Timestamp(row.created_at),
        revoked_at: row.revoked_at.map(Timestamp),
        current: row.id == caller.token_id,
    }
}

pub(crate) async fn identity_by_number(
    conn: &mut AsyncPgConnection,
    number: &IdentityNumber,
) -> Result<IdentityRow, StoreError> {
    identities::table
        .filter(identities::number.eq(number.as_str()))
        .select(IdentityRow::as_select())
        .first(conn)
        .await
        .optional()?
        .ok_or_else(|| StoreError::not_found(format!("no identity with number {number}")))
}
