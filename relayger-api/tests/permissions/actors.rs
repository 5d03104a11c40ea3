//! Who calls, what the route table says should happen to them, and the
//! checks on what comes back.

use relayger_api::{Access, RouteMethod};
use relayger_core::wire::{IdentityKind, Scope};
use reqwest::Method;
use serde_json::Value;

use super::cases::Case;
use super::world::{SECRETS, World};
use crate::common::TestServer;

/// An identity of the world, calling with its full token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Who {
    Agent,
    /// The person that created the agent.
    Owner,
    OtherAgent,
    /// A person with no relation to the agent (a non-member of its rooms).
    Stranger,
}

impl Who {
    fn kind(self) -> IdentityKind {
        match self {
            Who::Agent | Who::OtherAgent => IdentityKind::Agent,
            Who::Owner | Who::Stranger => IdentityKind::Person,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Actor {
    NoToken,
    /// `Authorization: Bearer` followed by blanks.
    BlankToken,
    /// Longer than any token the server issues.
    OversizedToken,
    UnknownToken,
    /// The principal's token, revoked (the agent's held a claimed job).
    Revoked,
    /// The principal's token with every scope but this one.
    Lacking(Scope),
    /// The principal's token with every scope, restricted to another room.
    Restricted,
    Identity(Who),
}

pub(crate) const ACTORS: [Actor; 13] = [
    Actor::NoToken,
    Actor::BlankToken,
    Actor::OversizedToken,
    Actor::UnknownToken,
    Actor::Revoked,
    Actor::Lacking(Scope::Read),
    Actor::Lacking(Scope::Write),
    Actor::Lacking(Scope::Contacts),
    Actor::Restricted,
    Actor::Identity(Who::Agent),
    Actor::Identity(Who::Owner),
    Actor::Identity(Who::OtherAgent),
    Actor::Identity(Who::Stranger),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expect {
    Denied {
        status: u16,
        code: &'static str,
    },
    /// Allowed to try (it acts on its own things): only "no secret leaks".
    Probe,
    /// The route's own principal, or a token the route does not care about.
    Skip,
}

const fn denied(status: u16, code: &'static str) -> Expect {
    Expect::Denied { status, code }
}

const UNAUTHORIZED: Expect = denied(401, "unauthorized");
const FORBIDDEN: Expect = denied(403, "forbidden");
const TOKEN_RESTRICTED: Expect = denied(403, "token_restricted");
const NOT_FOUND: Expect = denied(404, "not_found");

/// Whose tokens the route is meant for.
pub(crate) fn principal(access: Access) -> Who {
    match access.identity_kind() {
        Some(IdentityKind::Person) => Who::Owner,
        _ => Who::Agent,
    }
}

/// The expected outcome, derived from the declared access alone (plus the
/// case's `owned` flag for ids the access kind does not name).
pub(crate) fn expect(actor: Actor, access: Access, case: &Case) -> Expect {
    if !access.needs_token() {
        return Expect::Probe;
    }
    match actor {
        Actor::NoToken
        | Actor::BlankToken
        | Actor::OversizedToken
        | Actor::UnknownToken
        | Actor::Revoked => UNAUTHORIZED,
        Actor::Lacking(scope) if access.scopes().contains(&scope) => FORBIDDEN,
        Actor::Lacking(_) => Expect::Skip,
        Actor::Restricted if access.needs_unrestricted() => TOKEN_RESTRICTED,
        Actor::Restricted if access.room() => NOT_FOUND,
        Actor::Restricted => Expect::Probe,
        Actor::Identity(who) if who == principal(access) => Expect::Skip,
        Actor::Identity(who) => outsider(who.kind(), access, case),
    }
}

/// Another identity than the route's principal, of `kind`: the wrong kind is
/// refused before anything is looked up; a room, runtime or other thing of
/// the agent's is "not found"; anything else is its own business.
pub(crate) fn outsider(kind: IdentityKind, access: Access, case: &Case) -> Expect {
    match access.identity_kind() {
        Some(required) if required != kind => FORBIDDEN,
        _ if access.runtime() || access.room() || case.owned => NOT_FOUND,
        _ => Expect::Probe,
    }
}

/// The bearer token an actor sends (`None`: no header at all).
pub(crate) fn token(actor: Actor, access: Access, w: &World) -> Option<String> {
    let tokens = match principal(access) {
        Who::Owner => &w.owner_tokens,
        _ => &w.agent_tokens,
    };
    Some(match actor {
        Actor::NoToken => return None,
        Actor::BlankToken => "   ".to_owned(),
        Actor::OversizedToken => format!("rlg_{}", "x".repeat(300)),
        Actor::UnknownToken => format!("rlg_{}", uuid::Uuid::new_v4().simple()),
        Actor::Revoked => tokens.revoked.clone(),
        Actor::Lacking(Scope::Read) => tokens.lacking_read.clone(),
        Actor::Lacking(Scope::Write) => tokens.lacking_write.clone(),
        Actor::Lacking(Scope::Contacts) => tokens.lacking_contacts.clone(),
        Actor::Restricted => tokens.restricted.clone(),
        Actor::Identity(Who::Agent) => w.agent.token.clone(),
        Actor::Identity(Who::Owner) => w.owner.token.clone(),
        Actor::Identity(Who::OtherAgent) => w.other_agent.token.clone(),
        Actor::Identity(Who::Stranger) => w.stranger.token.clone(),
    })
}

/// What came back: an HTTP answer, or a WebSocket upgrade (101).
pub(crate) struct Outcome {
    pub(crate) status: u16,
    pub(crate) body: String,
}

fn method(method: RouteMethod) -> Method {
    Method::from_bytes(method.as_str().as_bytes()).expect("method")
}

/// Sends the case's request (or tries the upgrade) with `token`. An
/// accepted socket is closed again at once.
pub(crate) async fn send(
    server: &TestServer,
    case: &Case,
    socket: bool,
    token: Option<&str>,
) -> Outcome {
    if socket {
        return match server.ws_connect(&case.path, token).await {
            Ok(mut stream) => {
                let _ = stream.close(None).await;
                Outcome {
                    status: 101,
                    body: String::new(),
                }
            }
            Err(refused) => Outcome {
                status: refused.status,
                body: refused.body,
            },
        };
    }
    let reply = server
        .request(method(case.method), &case.path, token, case.body.clone())
        .await;
    Outcome {
        status: reply.status.as_u16(),
        body: reply.body.to_string(),
    }
}

#[track_caller]
pub(crate) fn assert_no_secrets(outcome: &Outcome, what: &str) {
    for secret in SECRETS {
        assert!(
            !outcome.body.contains(secret),
            "{what}: leaked {secret:?} in {}",
            outcome.body
        );
    }
}

/// Exactly `{"error":{"code","message"}}`, with `code` when given.
#[track_caller]
pub(crate) fn assert_envelope(outcome: &Outcome, code: Option<&str>, what: &str) {
    let body: Value = serde_json::from_str(&outcome.body)
        .unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {}", outcome.body));
    let object = body.as_object().expect("an object");
    assert_eq!(
        object.keys().collect::<Vec<_>>(),
        ["error"],
        "{what}: only the envelope: {body}"
    );
    let mut keys: Vec<&String> = body["error"].as_object().expect("error").keys().collect();
    keys.sort();
    assert_eq!(keys, ["code", "message"], "{what}: {body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{what}: {body}"
    );
    if let Some(code) = code {
        assert_eq!(body["error"]["code"], code, "{what}: {body}");
    }
}

#[track_caller]
pub(crate) fn assert_denied(outcome: &Outcome, status: u16, code: &str, what: &str) {
    assert_eq!(outcome.status, status, "{what}: {}", outcome.body);
    assert_envelope(outcome, Some(code), what);
    assert_no_secrets(outcome, what);
}

/// A probe may succeed or fail, but never shows a secret, and a failure is
/// only the envelope.
#[track_caller]
pub(crate) fn assert_probe(outcome: &Outcome, what: &str) {
    assert_no_secrets(outcome, what);
    if outcome.status >= 400 {
        assert_envelope(outcome, None, what);
    }
}
