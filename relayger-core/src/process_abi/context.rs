//! `context` in `worker.json`: what the worker reads for a process handler
//! before it starts, with its own token, so the handler gets the thread and
//! the runtime's notes without ever holding a credential.
//!
//! ```json
//! "context": {"thread": {"limit": 5, "maxBytes": 4096}, "notes": {"limit": 2}}
//! ```
//!
//! The limits are those of the routes the worker calls (`thread_budget`,
//! `notes`), checked here so a wrong number stops the worker at start
//! instead of failing every job at the server.

use serde::Serialize;
use serde_json::{Map, Value};

use super::{ProcessConfigError, describe, read_size};
use crate::notes::MAX_NOTES_PAGE;
use crate::sealed::SealedContent;
use crate::thread_budget::{MAX_THREAD_LIMIT, MAX_THREAD_MAX_BYTES, MIN_THREAD_MAX_BYTES};
use crate::wire::{MessageEnvelope, Note};

const CONTEXT: &str = "context";
const THREAD: &str = "thread";
const NOTES: &str = "notes";
const LIMIT: &str = "limit";
const MAX_BYTES: &str = "maxBytes";

/// Which context the worker reads for each job. Both absent (the default)
/// reads nothing and leaves `context` out of the request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ContextConfig {
    /// The thread of the job's message (root and reply chain).
    pub thread: Option<ThreadContextConfig>,
    /// The runtime's notes on the job's room.
    pub notes: Option<NotesContextConfig>,
}

/// `context.thread`: one page of the thread, as `GET …/thread` returns it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ThreadContextConfig {
    /// At most this many messages (1–100); absent leaves it to the byte budget.
    pub limit: Option<u32>,
    /// The page's JSON byte budget (512–65536); absent is the server's 8192.
    pub max_bytes: Option<u32>,
}

/// `context.notes`: the runtime's notes on the room.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NotesContextConfig {
    /// At most this many notes (1–20); absent is 20.
    pub limit: Option<u32>,
}

impl ContextConfig {
    /// Whether any context is read.
    pub fn is_empty(&self) -> bool {
        self.thread.is_none() && self.notes.is_none()
    }

    /// Reads `context` strictly; each error names the nested field
    /// (`context.thread.limit`).
    pub(super) fn parse(value: &Value) -> Result<ContextConfig, ProcessConfigError> {
        let mut config = ContextConfig::default();
        for (name, value) in object(CONTEXT, value)? {
            match name.as_str() {
                THREAD => config.thread = Some(parse_thread(value)?),
                NOTES => config.notes = Some(parse_notes(value)?),
                unknown => return Err(unknown_field(CONTEXT, unknown, "thread, notes")),
            }
        }
        Ok(config)
    }
}

fn parse_thread(value: &Value) -> Result<ThreadContextConfig, ProcessConfigError> {
    let field = format!("{CONTEXT}.{THREAD}");
    let mut config = ThreadContextConfig::default();
    for (name, value) in object(&field, value)? {
        let nested = format!("{field}.{name}");
        match name.as_str() {
            LIMIT => config.limit = Some(read_count(&nested, value, (1, MAX_THREAD_LIMIT))?),
            MAX_BYTES => {
                config.max_bytes = Some(read_count(
                    &nested,
                    value,
                    (MIN_THREAD_MAX_BYTES, MAX_THREAD_MAX_BYTES),
                )?);
            }
            unknown => return Err(unknown_field(&field, unknown, "limit, maxBytes")),
        }
    }
    Ok(config)
}

fn parse_notes(value: &Value) -> Result<NotesContextConfig, ProcessConfigError> {
    let field = format!("{CONTEXT}.{NOTES}");
    let mut config = NotesContextConfig::default();
    for (name, value) in object(&field, value)? {
        let nested = format!("{field}.{name}");
        match name.as_str() {
            LIMIT => {
                let max = usize::try_from(MAX_NOTES_PAGE).unwrap_or(usize::MAX);
                config.limit = Some(read_count(&nested, value, (1, max))?);
            }
            unknown => return Err(unknown_field(&field, unknown, "limit")),
        }
    }
    Ok(config)
}

/// The members of a nested object. Duplicate keys were already refused by
/// the strict parse of the whole file.
fn object<'v>(field: &str, value: &'v Value) -> Result<&'v Map<String, Value>, ProcessConfigError> {
    value.as_object().ok_or_else(|| {
        ProcessConfigError::field(
            field,
            format!("must be an object, found {}", describe(value)),
        )
    })
}

/// A count within `range`; every range here fits `u32`, the type the
/// routes take.
fn read_count(
    field: &str,
    value: &Value,
    range: (usize, usize),
) -> Result<u32, ProcessConfigError> {
    read_size(field, value, range).map(|count| u32::try_from(count).unwrap_or(u32::MAX))
}

fn unknown_field(parent: &str, name: &str, fields: &str) -> ProcessConfigError {
    ProcessConfigError::field(
        &format!("{parent}.{name}"),
        format!("unknown field; the fields are {fields}"),
    )
}

/// `context` of the request line: what the worker read, in the shape of
/// the routes it called.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestContext {
    /// Present when `context.thread` was asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread: Option<ThreadContext>,
    /// Present when `context.notes` was asked for (possibly empty).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notes: Option<Vec<Note>>,
}

/// One page of the thread: `{messages, next}` as the thread route returns
/// it, each sealed message with what the worker's key made of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadContext {
    /// Oldest first, the job's message among them.
    pub messages: Vec<ContextMessage>,
    /// The room seq to page on from, `null` at the end of the thread.
    pub next: Option<i64>,
}

/// A thread message: the envelope, and for a sealed one either `opened`
/// (its content, opened with the agent's key) or `openError` (why not).
/// relayger-worker's client returns every message it reads in this shape
/// (`OpenedMessage`), so the CLI's JSON and the process ABI agree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextMessage {
    /// The message as the server sent it (`text` is `null` when sealed).
    #[serde(flatten)]
    pub envelope: MessageEnvelope,
    /// The opened content of a sealed message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub opened: Option<SealedContent>,
    /// A snake_case reason a sealed message stays closed, e.g.
    /// `not_a_recipient`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_error: Option<String>,
}
