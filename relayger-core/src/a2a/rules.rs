//! The rules between A2A tasks and Relayger's question delivery: what state
//! a question's task is in (the server side), and what a handler makes of
//! an outside agent's task once it ends (the client side).

use crate::wire::DeliveryState;

use super::types::{Message, Task, TaskState};

/// The task state of a question whose delivery is `delivery`: one to one.
pub fn task_state(delivery: DeliveryState) -> TaskState {
    match delivery {
        DeliveryState::Queued => TaskState::Submitted,
        DeliveryState::Working => TaskState::Working,
        DeliveryState::Answered => TaskState::Completed,
        DeliveryState::Failed => TaskState::Failed,
        DeliveryState::Rejected => TaskState::Rejected,
        DeliveryState::Canceled => TaskState::Canceled,
    }
}

/// The longest piece of a remote status message kept in a failure reason,
/// in characters.
pub const MAX_REMOTE_MESSAGE_CHARS: usize = 80;
/// The longest remote reason code kept, in bytes.
pub const MAX_REMOTE_CODE_BYTES: usize = 64;

/// How an outside agent's task ended, as a handler asking it cares: an
/// answer (its text, if it had any), or any other end as a failure reason
/// that is a code first (`a2a_failed`, `a2a_rejected`, `a2a_canceled`,
/// `a2a_input_required`, `a2a_auth_required`), then the remote's own
/// snake_case code (`reason` or `code` in the status message's metadata)
/// and at most one short line of its words: operators and dashboards match
/// on the code, and the remote's free text stays bounded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RemoteEnd {
    /// The text of the status message, else of the artifacts.
    Answered(Option<String>),
    /// The failure reason.
    Unanswered(String),
}

/// The text of a message: its text parts, in order, joined by newlines;
/// `None` when it has none.
pub fn message_text(message: &Message) -> Option<String> {
    let texts: Vec<&str> = message
        .parts
        .iter()
        .filter_map(|part| part.as_text())
        .collect();
    (!texts.is_empty()).then(|| texts.join("\n"))
}

/// The end of an outside agent's `task`, or `None` while it still runs
/// (SUBMITTED, WORKING).
pub fn remote_end(task: &Task) -> Option<RemoteEnd> {
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
    Some(RemoteEnd::Unanswered(failure_reason(
        kind,
        status.message.as_ref(),
    )))
}

/// An agent that answered with a message instead of a task: the whole
/// answer.
pub fn message_end(message: &Message) -> RemoteEnd {
    RemoteEnd::Answered(message_text(message))
}

/// `KIND`, `KIND: CODE`, `KIND (MESSAGE)` or `KIND: CODE (MESSAGE)`.
fn failure_reason(kind: &str, message: Option<&Message>) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::a2a::types::{Artifact, Part, Role, TaskStatus};

    #[test]
    fn delivery_states_map_one_to_one() {
        let table = [
            (DeliveryState::Queued, TaskState::Submitted),
            (DeliveryState::Working, TaskState::Working),
            (DeliveryState::Answered, TaskState::Completed),
            (DeliveryState::Failed, TaskState::Failed),
            (DeliveryState::Rejected, TaskState::Rejected),
            (DeliveryState::Canceled, TaskState::Canceled),
        ];
        let mut seen = std::collections::HashSet::new();
        for (delivery, task) in table {
            assert_eq!(task_state(delivery), task, "{delivery:?}");
            assert!(seen.insert(task), "{task:?} twice");
            // A final delivery is a terminal task and the other way round.
            assert_eq!(
                task.is_terminal(),
                delivery == DeliveryState::Answered || delivery.is_unanswered_end(),
                "{delivery:?}"
            );
        }
    }

    #[test]
    fn terminal_and_interrupted_states() {
        for state in TaskState::ALL {
            let terminal = matches!(
                state,
                TaskState::Completed
                    | TaskState::Failed
                    | TaskState::Canceled
                    | TaskState::Rejected
            );
            assert_eq!(state.is_terminal(), terminal, "{state:?}");
            assert_eq!(
                state.is_interrupted(),
                matches!(state, TaskState::InputRequired | TaskState::AuthRequired),
                "{state:?}"
            );
            let json = serde_json::to_value(state).expect("json");
            assert_eq!(json, state.as_str());
        }
    }

    fn message(parts: Vec<Part>) -> Message {
        Message {
            message_id: "m".into(),
            role: Role::Agent,
            parts,
            ..Message::default()
        }
    }

    fn task(state: TaskState, said: Option<&str>, artifacts: &[&str]) -> Task {
        Task {
            id: "t".into(),
            context_id: "c".into(),
            status: TaskStatus {
                state,
                message: said.map(|text| message(vec![Part::text(text)])),
                timestamp: None,
            },
            artifacts: artifacts
                .iter()
                .map(|text| Artifact {
                    artifact_id: "a".into(),
                    parts: vec![Part::text(*text)],
                    ..Artifact::default()
                })
                .collect(),
            ..Task::default()
        }
    }

    fn coded(text: &str, metadata: serde_json::Value) -> Message {
        Message {
            metadata: metadata.as_object().cloned(),
            ..message(vec![Part::text(text)])
        }
    }

    #[test]
    fn a_remote_task_ends_as_a_code_first_reason_or_its_answer() {
        let answered = |text: &str| Some(RemoteEnd::Answered(Some(text.to_owned())));
        let failed = |text: &str| Some(RemoteEnd::Unanswered(text.to_owned()));
        let long = "word ".repeat(100);
        let with = |state, message: Message| Task {
            status: TaskStatus {
                state,
                message: Some(message),
                timestamp: None,
            },
            ..task(state, None, &[])
        };
        let table = [
            (task(TaskState::Submitted, None, &[]), None),
            (task(TaskState::Working, Some("thinking"), &[]), None),
            (task(TaskState::Unspecified, None, &[]), None),
            // The status message's text first, else the artifacts'.
            (
                task(TaskState::Completed, Some("HI"), &["A"]),
                answered("HI"),
            ),
            (
                task(TaskState::Completed, None, &["A", "B"]),
                answered("A\nB"),
            ),
            (
                task(TaskState::Completed, None, &[]),
                Some(RemoteEnd::Answered(None)),
            ),
            (task(TaskState::Failed, None, &[]), failed("a2a_failed")),
            (
                with(
                    TaskState::Failed,
                    coded("quota", serde_json::json!({"code": "quota_exceeded"})),
                ),
                failed("a2a_failed: quota_exceeded (quota)"),
            ),
            // A code that is not a snake_case word is not kept; the message
            // is one short line.
            (
                with(
                    TaskState::Rejected,
                    coded(&long, serde_json::json!({"reason": "Not A Code\n"})),
                ),
                failed(&format!("a2a_rejected ({}…)", &long[..79])),
            ),
            (
                with(
                    TaskState::Rejected,
                    coded("", serde_json::json!({"reason": "not_allowed"})),
                ),
                failed("a2a_rejected: not_allowed"),
            ),
            (
                task(TaskState::Canceled, Some("bye"), &[]),
                failed("a2a_canceled (bye)"),
            ),
            (
                task(TaskState::InputRequired, Some("which one?\nA or B"), &[]),
                failed("a2a_input_required (which one? A or B)"),
            ),
            (
                task(TaskState::AuthRequired, None, &[]),
                failed("a2a_auth_required"),
            ),
        ];
        for (task, expected) in table {
            assert_eq!(remote_end(&task), expected, "{task:?}");
        }
    }

    #[test]
    fn only_text_parts_count() {
        let file = Part {
            raw: Some("AAE=".into()),
            media_type: "application/octet-stream".into(),
            ..Part::default()
        };
        let data = Part {
            data: Some(serde_json::json!({"a": 1})),
            ..Part::default()
        };
        assert_eq!(message_text(&message(vec![file.clone(), data])), None);
        assert_eq!(
            message_text(&message(vec![file, Part::text("a"), Part::text("b")])),
            Some("a\nb".to_owned())
        );
    }
}
