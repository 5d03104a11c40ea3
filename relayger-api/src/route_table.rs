//! The one declaration of every route the server answers: each entry names
//! its method, path, handler and the access it requires. The same list
//! builds the axum routes ([`api_routes`]) and the public [`ROUTE_TABLE`], so
//! a route cannot be served without also being listed (and the permission
//! matrix test, which walks the table, cannot miss it).

use axum::Router;
use axum::routing::{MethodFilter, on};
use relayger_core::wire::{IdentityKind, Scope};

use crate::AppState;
use crate::health::healthz;
use crate::routes::{a2a, activity, contacts, identity, messages, rooms, runtime};
use crate::socket::{identity_socket, runtime_socket};

/// The HTTP methods the API serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RouteMethod {
    Get,
    Post,
    Put,
    Delete,
}

impl RouteMethod {
    /// The method as it appears on the wire (`GET`, `POST`, …).
    pub const fn as_str(self) -> &'static str {
        match self {
            RouteMethod::Get => "GET",
            RouteMethod::Post => "POST",
            RouteMethod::Put => "PUT",
            RouteMethod::Delete => "DELETE",
        }
    }

    const fn filter(self) -> MethodFilter {
        match self {
            RouteMethod::Get => MethodFilter::GET,
            RouteMethod::Post => MethodFilter::POST,
            RouteMethod::Put => MethodFilter::PUT,
            RouteMethod::Delete => MethodFilter::DELETE,
        }
    }
}

/// What a route requires of the caller, as its handler enforces it. A
/// missing, malformed, unknown or revoked token is 401 on every route but
/// [`Access::Public`]; a missing scope or the wrong identity kind is 403
/// `forbidden`, a room-restricted token where an unrestricted one is needed
/// 403 `token_restricted`; a room or
/// runtime the caller may not reach is 404, so its existence is not learned.
///
/// There is no administrator role: no token of any identity (an agent's
/// owner included) reaches another identity's runtimes, notes or logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Access {
    /// No token.
    Public,
    /// Any valid token (what it may do is bounded by the token itself, e.g. a
    /// new token never exceeds the one creating it).
    Token,
    /// Any valid token not restricted to rooms: an identity-wide action
    /// (creating a token).
    Unrestricted,
    /// `read`.
    Read,
    /// `read` and a token not restricted to rooms (listing the identity's
    /// tokens).
    ReadUnrestricted,
    /// `write`.
    Write,
    /// `write` and a token not restricted to rooms (revoking a token: a
    /// token may always revoke itself, restricted or not).
    WriteUnrestricted,
    /// `write`, an unrestricted token, and a person identity.
    PersonWrite,
    /// `contacts` and an unrestricted token.
    Contacts,
    /// `read` and current membership of the room named by the request, with
    /// a token allowed in that room.
    RoomRead,
    /// `write` and the same room access as [`Access::RoomRead`].
    RoomWrite,
    /// `read` + `write` on an agent identity. Registering a runtime: a
    /// room-restricted token may attach to an existing runtime of the same
    /// name and policy but not create a new one (`token_restricted`).
    AgentWrite,
    /// `read`; the runtime must belong to the token's identity.
    RuntimeRead,
    /// `read` + `write` on the agent identity the runtime belongs to.
    RuntimeWrite,
    /// [`Access::RuntimeWrite`] with a token not restricted to rooms: what
    /// changes the runtime for every room (configure, delete).
    RuntimeWriteUnrestricted,
    /// [`Access::RuntimeRead`] plus room access to the note's room.
    RuntimeRoomRead,
    /// [`Access::RuntimeWrite`] plus room access to the note's room, or to
    /// the room of the job named by the request.
    RuntimeRoomWrite,
}

impl Access {
    /// Whether a token is needed at all.
    pub const fn needs_token(self) -> bool {
        !matches!(self, Access::Public)
    }

    /// The scopes the token must carry.
    pub const fn scopes(self) -> &'static [Scope] {
        match self {
            Access::Public | Access::Token | Access::Unrestricted => &[],
            Access::Read
            | Access::ReadUnrestricted
            | Access::RoomRead
            | Access::RuntimeRead
            | Access::RuntimeRoomRead => &[Scope::Read],
            Access::Write | Access::WriteUnrestricted | Access::PersonWrite | Access::RoomWrite => {
                &[Scope::Write]
            }
            Access::Contacts => &[Scope::Contacts],
            Access::AgentWrite
            | Access::RuntimeWrite
            | Access::RuntimeWriteUnrestricted
            | Access::RuntimeRoomWrite => &[Scope::Read, Scope::Write],
        }
    }

    /// Whether a room-restricted token is refused outright.
    pub const fn needs_unrestricted(self) -> bool {
        matches!(
            self,
            Access::Unrestricted
                | Access::ReadUnrestricted
                | Access::WriteUnrestricted
                | Access::PersonWrite
                | Access::Contacts
                | Access::RuntimeWriteUnrestricted
        )
    }

    /// The identity kind the token's identity must have, if any.
    pub const fn identity_kind(self) -> Option<IdentityKind> {
        match self {
            Access::PersonWrite => Some(IdentityKind::Person),
            Access::AgentWrite
            | Access::RuntimeWrite
            | Access::RuntimeWriteUnrestricted
            | Access::RuntimeRoomWrite => Some(IdentityKind::Agent),
            _ => None,
        }
    }

    /// Whether the request names a room whose membership is checked.
    pub const fn room(self) -> bool {
        matches!(
            self,
            Access::RoomRead
                | Access::RoomWrite
                | Access::RuntimeRoomRead
                | Access::RuntimeRoomWrite
        )
    }

    /// Whether the request names a runtime that must be the caller's own.
    pub const fn runtime(self) -> bool {
        matches!(
            self,
            Access::RuntimeRead
                | Access::RuntimeWrite
                | Access::RuntimeWriteUnrestricted
                | Access::RuntimeRoomRead
                | Access::RuntimeRoomWrite
        )
    }
}

/// One served route.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RouteSpec {
    pub method: RouteMethod,
    /// The full path in axum's syntax (`/v1/rooms/{room}`).
    pub path: &'static str,
    pub access: Access,
    /// A WebSocket upgrade rather than a JSON exchange.
    pub socket: bool,
    /// The handler as declared (`runtime::claim`), so code that treats one
    /// route specially finds its path here rather than spelling it again.
    pub handler: &'static str,
}

/// Whether the route at `path` (axum's syntax, as matched) is declared with
/// an access that takes a token. Paths outside [`ROUTE_TABLE`] take none.
pub(crate) fn takes_token(path: &str) -> bool {
    ROUTE_TABLE
        .iter()
        .any(|spec| spec.path == path && spec.access.needs_token())
}

/// Declares every route once; expands to [`ROUTE_TABLE`] and
/// [`api_routes`], which therefore cannot disagree.
macro_rules! declare_routes {
    ($($method:ident $path:literal => $handler:path, $access:ident $(, $socket:ident)?;)*) => {
        /// Every route the server answers, in declaration order.
        pub static ROUTE_TABLE: &[RouteSpec] = &[
            $(RouteSpec {
                method: RouteMethod::$method,
                path: $path,
                access: Access::$access,
                socket: declare_routes!(@socket $($socket)?),
                handler: stringify!($handler),
            },)*
        ];

        /// The routes of [`ROUTE_TABLE`] with their handlers.
        pub(crate) fn api_routes() -> Router<AppState> {
            Router::new()
                $(.route($path, on(RouteMethod::$method.filter(), $handler)))*
        }
    };
    (@socket socket) => { true };
    (@socket) => { false };
}

declare_routes! {
    Get "/healthz" => healthz, Public;
    Post "/v1/register" => identity::register, Public;
    Post "/v1/agents" => identity::create_agent, PersonWrite;
    Get "/v1/me" => identity::me, Token;
    Get "/v1/identities/{number}" => identity::identity, Read;
    Post "/v1/tokens" => identity::create_token, Unrestricted;
    Get "/v1/tokens" => identity::list_tokens, ReadUnrestricted;
    Delete "/v1/tokens/{id}" => identity::revoke_token, WriteUnrestricted;
    Get "/v1/contacts" => contacts::list, Read;
    Get "/v1/contacts/requests" => contacts::requests, Contacts;
    Post "/v1/contacts/requests" => contacts::request, Contacts;
    Delete "/v1/contacts/requests/{number}" => contacts::withdraw, Contacts;
    Post "/v1/contacts/requests/{number}/accept" => contacts::accept, Contacts;
    Post "/v1/contacts/requests/{number}/decline" => contacts::decline, Contacts;
    Delete "/v1/contacts/{number}" => contacts::remove, Contacts;
    Post "/v1/contacts/{number}/block" => contacts::block, Contacts;
    Delete "/v1/contacts/{number}/block" => contacts::unblock, Contacts;
    Get "/v1/rooms" => rooms::list, Read;
    Post "/v1/rooms" => rooms::create, WriteUnrestricted;
    Get "/v1/rooms/{room}" => rooms::get, RoomRead;
    Post "/v1/rooms/{room}/members" => rooms::add_member, RoomWrite;
    Post "/v1/rooms/{room}/leave" => rooms::leave, RoomWrite;
    Post "/v1/rooms/{room}/ack" => messages::ack, RoomWrite;
    Get "/v1/rooms/{room}/messages" => messages::history, RoomRead;
    Get "/v1/rooms/{room}/messages/{message}" => messages::message, RoomRead;
    Get "/v1/rooms/{room}/messages/{message}/thread" => messages::thread, RoomRead;
    Get "/v1/rooms/{room}/messages/{message}/delivery" => messages::delivery, RoomRead;
    Delete "/v1/rooms/{room}/messages/{message}/ask" => messages::cancel_question, RoomWrite;
    Post "/v1/messages" => messages::send, RoomWrite;
    Get "/v1/inbox" => messages::inbox, Read;
    Get "/v1/socket" => identity_socket, Read, socket;
    Post "/v1/runtimes" => runtime::register, AgentWrite;
    Get "/v1/runtimes" => runtime::list, Read;
    Get "/v1/runtimes/{id}" => runtime::inspect, RuntimeRead;
    Delete "/v1/runtimes/{id}" => runtime::delete, RuntimeWriteUnrestricted;
    Post "/v1/runtimes/{id}/configure" => runtime::configure, RuntimeWriteUnrestricted;
    Post "/v1/runtimes/{id}/claim" => runtime::claim, RuntimeWrite;
    Post "/v1/runtimes/{id}/jobs/{job}/heartbeat" => runtime::heartbeat, RuntimeWrite;
    Post "/v1/runtimes/{id}/jobs/{job}/finish" => runtime::finish, RuntimeWrite;
    Post "/v1/runtimes/{id}/finishes" => runtime::finish_batch, RuntimeWrite;
    Post "/v1/runtimes/{id}/jobs/{job}/release" => runtime::release, RuntimeWrite;
    Post "/v1/runtimes/{id}/jobs/{job}/retry" => runtime::retry, RuntimeRoomWrite;
    Get "/v1/runtimes/{id}/dead-letters" => runtime::dead_letters, RuntimeRead;
    Get "/v1/runtimes/{id}/log" => runtime::log, RuntimeRead;
    Get "/v1/runtimes/{id}/stats" => runtime::stats, RuntimeRead;
    Get "/v1/runtimes/{id}/activity" => activity::activity, RuntimeRead;
    Get "/v1/runtimes/{id}/jobs" => activity::jobs, RuntimeRead;
    Get "/v1/runtimes/{id}/jobs/{job}" => activity::job, RuntimeRead;
    Get "/v1/runtimes/{id}/notes/{room}" => runtime::notes, RuntimeRoomRead;
    Put "/v1/runtimes/{id}/notes/{room}/{key}" => runtime::put_note, RuntimeRoomWrite;
    Get "/v1/runtimes/{id}/socket" => runtime_socket, RuntimeRead, socket;
    Get "/a2a/{number}/.well-known/agent-card.json" => a2a::card, Read;
    Post "/a2a/{number}" => a2a::rpc, Read;
}

/// Every route the server answers: see [`ROUTE_TABLE`].
pub fn routes() -> &'static [RouteSpec] {
    ROUTE_TABLE
}

/// The path of the route served by `handler` (as declared, e.g.
/// `runtime::claim`), or `None` if no route is.
pub(crate) fn path_of(handler: &str) -> Option<&'static str> {
    ROUTE_TABLE
        .iter()
        .find(|spec| spec.handler == handler)
        .map(|spec| spec.path)
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn no_route_is_declared_twice() {
        let mut seen = HashSet::new();
        for spec in ROUTE_TABLE {
            assert!(
                seen.insert((spec.method, spec.path)),
                "{} {} twice",
                spec.method.as_str(),
                spec.path
            );
        }
    }

    #[test]
    fn handlers_are_named_as_declared() {
        let table = [
            ("healthz", Some("/healthz")),
            ("runtime::claim", Some("/v1/runtimes/{id}/claim")),
            ("runtime_socket", Some("/v1/runtimes/{id}/socket")),
            ("runtime::nothing", None),
        ];
        for (handler, path) in table {
            assert_eq!(path_of(handler), path, "{handler}");
        }
    }

    #[test]
    fn only_gets_upgrade_and_only_public_routes_skip_the_token() {
        for spec in ROUTE_TABLE {
            assert!(!spec.socket || spec.method == RouteMethod::Get);
            assert_eq!(
                spec.access == Access::Public,
                spec.path == "/healthz" || spec.path == "/v1/register"
            );
        }
    }
}
