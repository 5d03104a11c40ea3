//! The rules of Relayger's A2A server: an agent's card, what a sent A2A
//! message may be, how a question and its delivery read as a task, and the
//! bounds of the methods' numbers.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::ids::IdentityNumber;
use crate::wire::{Delivery, DeliveryState, MAX_TEXT_BYTES, MessageEnvelope};

use super::card::{
    AgentCapabilities, AgentCard, AgentInterface, AgentSkill, HttpAuthSecurityScheme,
    SecurityRequirement, SecurityScheme, StringList,
};
use super::jsonrpc::{A2aError, JsonRpcError};
use super::rules::task_state;
use super::types::{Artifact, Message, Part, ProtoTimestamp, Role, Task, TaskState, TaskStatus};
use super::{PROTOCOL_BINDING_JSONRPC, PROTOCOL_VERSION, TEXT_MEDIA_TYPE};

/// The name of the card's one security scheme.
pub const SECURITY_SCHEME: &str = "relaygerToken";
/// At most this many parts in a message sent to an agent.
pub const MAX_PARTS: usize = 64;
/// `ListTasks` pages: the default and the largest size (as A2A specifies).
pub const DEFAULT_PAGE_SIZE: u32 = 50;
pub const MAX_PAGE_SIZE: u32 = 100;
/// The artifact name of a reply.
pub const REPLY_ARTIFACT: &str = "reply";
/// The task metadata key saying the question (or reply) is sealed.
pub const SEALED_KEY: &str = "sealed";

/// Whether a client's `A2A-Version` header names a version this server
/// speaks: 1.x (minor versions are compatible). A request without the
/// header is taken as 1.0: this server has no older protocol to fall back to.
pub fn version_supported(header: &str) -> bool {
    let header = header.trim();
    header.split('.').next() == Some("1") && header.split('.').all(|p| p.parse::<u32>().is_ok())
}

/// The server's public base URL when `--public-url` is not set: the scheme
/// it serves and the host the client named (`Host`, or HTTP/2's
/// `:authority`). `None` for a host that is not a plain host name or
/// address with an optional port.
pub fn public_url_from_host(tls: bool, host: &str) -> Option<String> {
    let plain = |c: char| c.is_ascii_alphanumeric() || ".-:[]_".contains(c);
    if host.is_empty() || host.len() > 255 || !host.chars().all(plain) {
        return None;
    }
    let scheme = if tls { "https" } else { "http" };
    Some(format!("{scheme}://{host}"))
}

/// A `--public-url` as given: an `http` or `https` URL without query or
/// fragment; its trailing slash dropped.
pub fn public_url(given: &str) -> Result<String, String> {
    let rest = given
        .strip_prefix("https://")
        .or_else(|| given.strip_prefix("http://"))
        .ok_or_else(|| format!("`{given}` is not an http:// or https:// URL"))?;
    if rest.is_empty() || rest.starts_with('/') || rest.contains(['?', '#', ' ']) {
        return Err(format!(
            "`{given}` is not a base URL (a host, an optional port and path; no query)"
        ));
    }
    Ok(given.trim_end_matches('/').to_owned())
}

/// The states a stream reports when a task it last reported in `last`
/// (`None`: nothing yet beyond the initial task) is now in `now`: none when
/// nothing changed; a task that ended after a lease was granted
/// (`attempts > 0`) without WORKING having been reported reports WORKING
/// first, since it did pass through it between two reads.
pub fn stream_steps(last: TaskState, now: TaskState, attempts: u32) -> Vec<TaskState> {
    if now == last {
        return Vec::new();
    }
    let skipped_working = now.is_terminal()
        && attempts > 0
        && matches!(last, TaskState::Submitted | TaskState::Unspecified);
    if skipped_working {
        vec![TaskState::Working, now]
    } else {
        vec![now]
    }
}

/// The A2A base URL of agent `number` on a server reached at `public_url`
/// (`https://relay.example` → `https://relay.example/a2a/100000001`).
pub fn agent_url(public_url: &str, number: &IdentityNumber) -> String {
    format!("{}/a2a/{number}", public_url.trim_end_matches('/'))
}

/// The card of the agent `number` named `display_name`, served at `url`.
pub fn agent_card(display_name: &str, url: &str, version: &str) -> AgentCard {
    let security_schemes = BTreeMap::from([(
        SECURITY_SCHEME.to_owned(),
        SecurityScheme::HttpAuthSecurityScheme(HttpAuthSecurityScheme {
            description: "A Relayger token of an identity that is a contact of this agent"
                .to_owned(),
            scheme: "Bearer".to_owned(),
            bearer_format: String::new(),
        }),
    )]);
    AgentCard {
        name: display_name.to_owned(),
        description: format!(
            "{display_name}, an agent on Relayger. Each message is a question to it in your \
             direct room, answered by its persistent listener. Text only; sealed (end-to-end \
             encrypted) messages are not offered over A2A."
        ),
        supported_interfaces: vec![AgentInterface {
            url: url.to_owned(),
            protocol_binding: PROTOCOL_BINDING_JSONRPC.to_owned(),
            tenant: String::new(),
            protocol_version: PROTOCOL_VERSION.to_owned(),
        }],
        provider: None,
        version: version.to_owned(),
        documentation_url: None,
        capabilities: AgentCapabilities {
            streaming: Some(true),
            push_notifications: Some(false),
            extensions: Vec::new(),
            extended_agent_card: Some(false),
        },
        security_schemes,
        security_requirements: vec![SecurityRequirement {
            schemes: BTreeMap::from([(SECURITY_SCHEME.to_owned(), StringList::default())]),
        }],
        default_input_modes: vec![TEXT_MEDIA_TYPE.to_owned()],
        default_output_modes: vec![TEXT_MEDIA_TYPE.to_owned()],
        skills: vec![AgentSkill {
            id: "ask".to_owned(),
            name: "Ask".to_owned(),
            description: format!("Ask {display_name} a question and get its reply."),
            tags: vec!["relayger".to_owned(), "question".to_owned()],
            examples: Vec::new(),
            input_modes: Vec::new(),
            output_modes: Vec::new(),
            security_requirements: Vec::new(),
        }],
        signatures: Vec::new(),
        icon_url: None,
    }
}

fn invalid_params(message: impl Into<String>) -> JsonRpcError {
    A2aError::InvalidParams.with_message(message)
}

/// The question text of a message sent to an agent: its text parts joined
/// by newlines. Any other part is `ContentTypeNotSupported`; no text, too
/// many parts or too much text is `InvalidParams`.
pub fn question_text(message: &Message) -> Result<String, JsonRpcError> {
    if message.parts.len() > MAX_PARTS {
        return Err(invalid_params(format!(
            "the message has {} parts; at most {MAX_PARTS} are allowed",
            message.parts.len()
        )));
    }
    let mut texts = Vec::with_capacity(message.parts.len());
    for part in &message.parts {
        match part.as_text() {
            Some(text) => texts.push(text),
            None => {
                return Err(A2aError::ContentTypeNotSupported
                    .with_message("only text parts are accepted: a Relayger question is text"));
            }
        }
    }
    let text = texts.join("\n");
    if text.len() > MAX_TEXT_BYTES {
        return Err(invalid_params(format!(
            "the text is {} bytes; at most {MAX_TEXT_BYTES} are allowed",
            text.len()
        )));
    }
    if text.trim().is_empty() {
        return Err(invalid_params("the message has no text"));
    }
    Ok(text)
}

/// A `historyLength` as given: `None` for no limit; negative is invalid.
pub fn history_length(given: Option<i32>) -> Result<Option<usize>, JsonRpcError> {
    match given {
        None => Ok(None),
        Some(n) => usize::try_from(n)
            .map(Some)
            .map_err(|_| invalid_params("historyLength must not be negative")),
    }
}

/// A `ListTasks` `pageSize`: 1 to [`MAX_PAGE_SIZE`], [`DEFAULT_PAGE_SIZE`]
/// when absent.
pub fn page_size(given: Option<i32>) -> Result<u32, JsonRpcError> {
    match given {
        None => Ok(DEFAULT_PAGE_SIZE),
        Some(n) => u32::try_from(n)
            .ok()
            .filter(|n| (1..=MAX_PAGE_SIZE).contains(n))
            .ok_or_else(|| invalid_params(format!("pageSize is 1 to {MAX_PAGE_SIZE}"))),
    }
}

/// A `ListTasks` `pageToken`: empty for the first page, else the room seq
/// the previous page ended before.
pub fn page_token(given: &str) -> Result<Option<i64>, JsonRpcError> {
    if given.is_empty() {
        return Ok(None);
    }
    given
        .parse::<i64>()
        .ok()
        .filter(|seq| *seq > 0)
        .map(Some)
        .ok_or_else(|| invalid_params("pageToken is not one this server gave"))
}

/// A Relayger message as an A2A message of task `task_id`. A sealed
/// message's text is not offered: no parts, and `metadata.sealed`.
fn a2a_message(envelope: &MessageEnvelope, task_id: &str, role: Role) -> Message {
    let (parts, metadata) = match &envelope.text {
        Some(text) => (vec![Part::text(text.clone())], None),
        None => (Vec::new(), Some(sealed_metadata())),
    };
    Message {
        message_id: envelope.message_id.to_string(),
        context_id: envelope.conversation_id.to_string(),
        task_id: task_id.to_owned(),
        role,
        parts,
        metadata,
        extensions: Vec::new(),
        reference_task_ids: envelope
            .reply_to
            .filter(|_| role == Role::User)
            .map(|id| vec![id.to_string()])
            .unwrap_or_default(),
    }
}

fn sealed_metadata() -> Map<String, Value> {
    Map::from_iter([(SEALED_KEY.to_owned(), Value::Bool(true))])
}

/// What a task shows beyond its state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskShape {
    /// At most this many of the latest history messages (`None`: all).
    pub history: Option<usize>,
    pub artifacts: bool,
}

impl TaskShape {
    pub const FULL: TaskShape = TaskShape {
        history: None,
        artifacts: true,
    };
}

/// A question as a task: its id is the question's, its context the room;
/// the state is the delivery's ([`task_state`]); a completed task carries
/// the reply as the status message (role agent) and as an artifact; a
/// rejected or failed one the reason code (never a handler's text) as the
/// status message; the history is the question and its reply.
pub fn task_of(
    question: &MessageEnvelope,
    delivery: &Delivery,
    reply: Option<&MessageEnvelope>,
    shape: TaskShape,
) -> Task {
    let task_id = question.message_id.to_string();
    let context_id = question.conversation_id.to_string();
    let state = task_state(delivery.state);
    let reply = reply.filter(|_| state == TaskState::Completed);
    let reply_message = reply.map(|reply| a2a_message(reply, &task_id, Role::Agent));
    let reason = match delivery.state {
        DeliveryState::Failed | DeliveryState::Rejected => delivery
            .recipients
            .iter()
            .find(|recipient| recipient.state == delivery.state)
            .and_then(|recipient| recipient.reason.clone()),
        _ => None,
    };
    let status_message = match (&reply_message, reason) {
        (Some(message), _) => Some(message.clone()),
        (None, Some(code)) => Some(Message {
            message_id: format!("{task_id}:{}", delivery.state.as_str()),
            context_id: context_id.clone(),
            task_id: task_id.clone(),
            role: Role::Agent,
            parts: vec![Part::text(code)],
            ..Message::default()
        }),
        (None, None) => None,
    };
    let artifacts = match (&reply_message, shape.artifacts) {
        (Some(message), true) => vec![Artifact {
            artifact_id: message.message_id.clone(),
            name: REPLY_ARTIFACT.to_owned(),
            parts: message.parts.clone(),
            metadata: message.metadata.clone(),
            ..Artifact::default()
        }],
        _ => Vec::new(),
    };
    let mut history = vec![a2a_message(question, &task_id, Role::User)];
    history.extend(reply_message);
    if let Some(keep) = shape.history {
        history.drain(..history.len().saturating_sub(keep));
    }
    Task {
        id: task_id,
        context_id,
        status: TaskStatus {
            state,
            message: status_message,
            timestamp: Some(ProtoTimestamp(delivery.updated_at)),
        },
        artifacts,
        history,
        metadata: question.text.is_none().then(sealed_metadata),
    }
}
