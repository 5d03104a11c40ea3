//! A2A (Agent2Agent protocol 1.0): the wire types both directions share —
//! outside agents asking ours over `/a2a/{number}`, and our workers asking
//! outside agents — and the pure rules between A2A tasks and Relayger's
//! question delivery.
//!
//! The JSON is protobuf's JSON mapping of the `lf.a2a.v1` messages, as the
//! official SDKs (`a2a-sdk` on PyPI, `@a2a-js/sdk` on npm) write it:
//! camelCase fields, enums by name (`TASK_STATE_COMPLETED`, `ROLE_USER`), a
//! oneof as its one present field (`{"task": …}`, `{"statusUpdate": …}`),
//! fields at their default value left out. Unlike Relayger's own request
//! bodies these types do not refuse unknown fields: A2A is an outside
//! protocol whose minor versions add fields, and the SDKs read leniently too.
//! Anything Relayger must refuse (a part that is not text, a missing
//! message) is judged by the code that reads the value, not by serde.
//!
//! - [`types`] — messages, parts, tasks, their states and the stream events;
//! - [`card`] — the Agent Card and what it holds;
//! - [`requests`] — the params and results of the JSON-RPC methods;
//! - [`jsonrpc`] — the JSON-RPC 2.0 envelopes, the method names and A2A's
//!   error taxonomy;
//! - [`rules`] — delivery state → task state, and a remote task's end → what
//!   a handler returns;
//! - [`serve`] — Relayger's server side: an agent's card, what a sent message
//!   may be, a question and its delivery as a task, the methods' bounds.

pub mod card;
#[cfg(test)]
mod fixture_tests;
pub mod jsonrpc;
pub mod requests;
pub mod rules;
pub mod serve;
#[cfg(test)]
mod serve_tests;
pub mod types;

pub use card::{
    AgentCapabilities, AgentCard, AgentExtension, AgentInterface, AgentProvider, AgentSkill,
    HttpAuthSecurityScheme, SecurityRequirement, SecurityScheme, StringList,
};
pub use jsonrpc::{
    A2aError, A2aMethod, ERROR_DOMAIN, ERROR_INFO_TYPE, JSONRPC_VERSION, JsonRpcCall, JsonRpcError,
    JsonRpcResponse,
};
pub use requests::{
    CancelTaskRequest, GetTaskRequest, ListTasksRequest, ListTasksResponse,
    SendMessageConfiguration, SendMessageRequest, SendMessageResponse, SubscribeToTaskRequest,
};
pub use rules::{RemoteEnd, message_end, message_text, remote_end, task_state};
pub use types::{
    Artifact, Message, Part, ProtoTimestamp, Role, StreamResponse, Task, TaskArtifactUpdateEvent,
    TaskState, TaskStatus, TaskStatusUpdateEvent,
};

/// The protocol version Relayger speaks, in the card's interface and the
/// `A2A-Version` header.
pub const PROTOCOL_VERSION: &str = "1.0";
/// The header a client names the protocol version it speaks in.
pub const VERSION_HEADER: &str = "A2A-Version";
/// The protocol binding of Relayger's one interface.
pub const PROTOCOL_BINDING_JSONRPC: &str = "JSONRPC";
/// Where an agent's card is, below its A2A base URL.
pub const AGENT_CARD_PATH: &str = ".well-known/agent-card.json";
/// The one media type Relayger reads and writes.
pub const TEXT_MEDIA_TYPE: &str = "text/plain";
