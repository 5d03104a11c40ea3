//! Identities, registration, tokens and contacts.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::Timestamp;
use crate::ids::IdentityNumber;

/// A person or an agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum IdentityKind {
    Person,
    Agent,
}

impl IdentityKind {
    pub fn as_str(self) -> &'static str {
        match self {
            IdentityKind::Person => "person",
            IdentityKind::Agent => "agent",
        }
    }

    pub fn parse(text: &str) -> Option<IdentityKind> {
        match text {
            "person" => Some(IdentityKind::Person),
            "agent" => Some(IdentityKind::Agent),
            _ => None,
        }
    }
}

/// An identity as others may see it. `ownerNumber` is set for agents created
/// by a person; `publicKey` is the base64 X25519 key sealed messages use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Identity {
    pub id: Uuid,
    pub number: IdentityNumber,
    pub kind: IdentityKind,
    pub display_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_number: Option<IdentityNumber>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_key: Option<String>,
    pub created_at: Timestamp,
}

/// The short form of an identity inside a message envelope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct IdentityRef {
    pub id: Uuid,
    pub number: IdentityNumber,
    pub kind: IdentityKind,
}

/// `POST /v1/register`. `invite` is required when registration is closed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RegisterRequest {
    pub name: String,
    pub kind: IdentityKind,
    /// Base64 (standard alphabet, padded) of the 32-byte X25519 public key.
    pub public_key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invite: Option<String>,
}

/// `POST /v1/agents`: a person creates an agent it owns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateAgentRequest {
    pub name: String,
    pub public_key: String,
}

/// The new identity and its first token (the secret is shown only here).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct RegisterResponse {
    pub identity: Identity,
    pub token: CreatedToken,
}

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    Read,
    Write,
    Contacts,
}

impl Scope {
    pub const ALL: [Scope; 3] = [Scope::Read, Scope::Write, Scope::Contacts];

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Write => "write",
            Scope::Contacts => "contacts",
        }
    }

    pub fn parse(text: &str) -> Option<Scope> {
        Scope::ALL.into_iter().find(|s| s.as_str() == text)
    }
}

/// `POST /v1/tokens`: scopes must be a subset of the calling token's, and a
/// room-restricted caller can only mint tokens restricted to its rooms.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateTokenRequest {
    pub scopes: Vec<Scope>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub room_ids: Option<Vec<Uuid>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

/// A token just created; `secret` is never shown again (only its hash is kept).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct CreatedToken {
    pub id: Uuid,
    pub secret: String,
    pub scopes: Vec<Scope>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub room_ids: Option<Vec<Uuid>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    pub created_at: Timestamp,
}

/// A token without its secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct TokenInfo {
    pub id: Uuid,
    pub scopes: Vec<Scope>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub room_ids: Option<Vec<Uuid>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    pub created_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<Timestamp>,
    /// Whether this is the token making the request.
    pub current: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct TokenList {
    pub tokens: Vec<TokenInfo>,
    /// When more tokens follow: the `after` that continues
    /// (`GET /v1/tokens?limit=N&after=TOKEN`, newest first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<Uuid>,
}

/// An accepted contact and the direct room the two share.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Contact {
    pub id: Uuid,
    pub number: IdentityNumber,
    pub kind: IdentityKind,
    pub display_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_key: Option<String>,
    pub room_id: Uuid,
    pub since: Timestamp,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ContactList {
    pub contacts: Vec<Contact>,
    /// When more contacts follow: the `after` that continues
    /// (`GET /v1/contacts?limit=N&after=ROOM`, in the order of the direct
    /// rooms' ids, which is the order the pairs first became contacts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<Uuid>,
}

/// A body naming one identity by number.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContactNumber {
    pub number: IdentityNumber,
}

/// Accept/decline body: `as` lets an owner answer for one of its agents.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AnswerRequest {
    #[serde(default, rename = "as", skip_serializing_if = "Option::is_none")]
    pub as_agent: Option<IdentityNumber>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum RequestDirection {
    Incoming,
    Outgoing,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ContactRequestState {
    Pending,
    Accepted,
    Declined,
    Withdrawn,
}

impl ContactRequestState {
    pub fn as_str(self) -> &'static str {
        match self {
            ContactRequestState::Pending => "pending",
            ContactRequestState::Accepted => "accepted",
            ContactRequestState::Declined => "declined",
            ContactRequestState::Withdrawn => "withdrawn",
        }
    }

    pub fn parse(text: &str) -> Option<ContactRequestState> {
        [
            ContactRequestState::Pending,
            ContactRequestState::Accepted,
            ContactRequestState::Declined,
            ContactRequestState::Withdrawn,
        ]
        .into_iter()
        .find(|s| s.as_str() == text)
    }
}

/// A contact request seen from one side: `number` is the other party.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ContactRequestView {
    pub id: Uuid,
    pub direction: RequestDirection,
    pub number: IdentityNumber,
    pub kind: IdentityKind,
    pub display_name: String,
    pub state: ContactRequestState,
    pub created_at: Timestamp,
}

/// `GET /v1/contacts/requests`: pending requests both ways, oldest first,
/// one page (`?limit=N&after=REQUEST`) of both directions together. `count`
/// is the number of all incoming ones, not only this page's (also sent as
/// `Relayger-Contact-Requests`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ContactRequests {
    pub count: u32,
    pub incoming: Vec<ContactRequestView>,
    pub outgoing: Vec<ContactRequestView>,
    /// When more requests follow: the `after` that continues.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<Uuid>,
}

/// An acknowledgement for actions with nothing else to return.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Done {
    pub ok: bool,
}
