//! How a remote task's end becomes the handler's result: COMPLETED → the
//! reply (the text parts of the status message, else of the artifacts);
//! FAILED / REJECTED → a failed attempt `a2a_failed` / `a2a_rejected`
//! with the remote reason code where one is given and a short bounded
//! message; CANCELED, INPUT_REQUIRED, AUTH_REQUIRED → a failed attempt
//! naming the state. `usage` stays unknown: the remote agent's model calls
//! are not ours to see.
//!
//! Core's [`relayger_core::a2a::remote_end`] keeps up to 500 characters of
//! the remote text and no code; a worker's failure reason is a code that
//! operators and dashboards match on, so this keeps the code first and at
//! most a short line of the remote's words.

use relayger_core::a2a::{Message, Task, TaskState, message_text};
use relayger_core::wire::MAX_TEXT_BYTES;

use crate::{HandlerError, HandlerOutput};

/// The longest piece of a remote status message kept in a failure reason.
const MAX_REMOTE_MESSAGE_CHARS: usize = 80;
/// The longest remote reason code kept.
const MAX_REMOTE_CODE_BYTES: usize = 64;

/// How the remote task ended, as far as the handler cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum RemoteEnd {
    /// Its answer's text, if it had any.
    Answered(Option<String>),
    /// Any other end: the failure reason.
    Unanswered(String),
}

/// The end of `task`, or `None` while it still runs (SUBMITTED, WORKING).
pub(super) fn end_of_task(task: &Task) -> Option<RemoteEnd> {
    let status = &task.status;
    let kind = match status.state {
        TaskState::Completed => {
            let from_artifacts = || {
                let texts: Vec<&str> = task
                    .artifacts
                    .iter()
                    .flat_map(|artifact| &artifact.parts)
                    .filter_map(|part| part.as_text())
                    .collect();
                (!texts.is_empty()).then(|| texts.join("\n"))
            };
            let text = status
                .message
                .as_ref()
                .and_then(message_text)
                .or_else(from_artifacts);
            return Some(RemoteEnd::Answered(text));
        }
        TaskState::Failed => "a2a_failed",
        TaskState::Rejected => "a2a_rejected",
        TaskState::Canceled => "a2a_canceled",
        TaskState::InputRequired => "a2a_input_required",
        TaskState::AuthRequired => "a2a_auth_required",
        TaskState::Submitted | TaskState::Working | TaskState::Unspecified => return None,
    };
    Some(RemoteEnd::Unanswered(reason(kind, status.message.as_ref())))
}

/// A message instead of a task: the whole answer.
pub(super) fn end_of_message(message: &Message) -> RemoteEnd {
    RemoteEnd::Answered(message_text(message))
}

/// The handler's result for `end`. An answer without text is a failed
/// attempt (`a2a_no_text`); one longer than a message may be is skipped
/// (`reply_too_large`), like the builtins'.
pub(super) fn result(end: RemoteEnd) -> Result<HandlerOutput, HandlerError> {
    match end {
        RemoteEnd::Answered(Some(text)) if text.len() > MAX_TEXT_BYTES => {
            Ok(HandlerOutput::skip("reply_too_large"))
        }
        RemoteEnd::Answered(Some(text)) if !text.trim().is_empty() => {
            Ok(HandlerOutput::reply(text))
        }
        RemoteEnd::Answered(_) => Err(HandlerError::new("a2a_no_text")),
        RemoteEnd::Unanswered(reason) => Err(HandlerError::new(reason)),
    }
}

/// `KIND`, `KIND: CODE`, `KIND (MESSAGE)` or `KIND: CODE (MESSAGE)`: the
/// code from the status message's metadata (`reason` or `code`, a
/// snake_case word), the message its text cut to one short line.
fn reason(kind: &str, message: Option<&Message>) -> String {
    let Some(message) = message else {
        return kind.to_owned();
    };
    let code = message
        .metadata
        .as_ref()
        .and_then(|metadata| metadata.get("reason").or_else(|| metadata.get("code")))
        .and_then(serde_json::Value::as_str)
        .filter(|code| is_code(code));
    let text = message_text(message)
        .map(|text| short_line(&text))
        .unwrap_or_default();
    let mut reason = kind.to_owned();
    if let Some(code) = code {
        reason.push_str(": ");
        reason.push_str(code);
    }
    if !text.is_empty() {
        reason.push_str(&format!(" ({text})"));
    }
    reason
}

fn is_code(code: &str) -> bool {
    !code.is_empty()
        && code.len() <= MAX_REMOTE_CODE_BYTES
        && code
            .bytes()
            .all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'_')
}

/// One line of printable text, at most [`MAX_REMOTE_MESSAGE_CHARS`]
/// characters (`…` where it was cut).
fn short_line(text: &str) -> String {
    let flat: String = text
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .filter(|c| !c.is_control())
        .collect();
    if flat.chars().count() <= MAX_REMOTE_MESSAGE_CHARS {
        flat
    } else {
        let mut cut: String = flat.chars().take(MAX_REMOTE_MESSAGE_CHARS - 1).collect();
        cut.push('…');
        cut
    }
}
