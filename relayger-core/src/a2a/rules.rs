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

/// The longest remote reason a failed attempt carries, in characters.
pub const MAX_REMOTE_REASON_CHARS: usize = 500;

/// What a handler asking an outside agent makes of the agent's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RemoteEnd {
    /// The agent answered: the reply's text.
    Answered(String),
    /// The attempt failed: the remote state and what the agent said of it,
    /// bounded ([`MAX_REMOTE_REASON_CHARS`]).
    Failed(String),
    /// The task was canceled (by the agent, or after we asked it to).
    Canceled,
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

/// A task's answer text: its artifacts' text parts, or else its status
/// message's.
fn answer_text(task: &Task) -> Option<String> {
    let texts: Vec<&str> = task
        .artifacts
        .iter()
        .flat_map(|artifact| artifact.parts.iter())
        .filter_map(|part| part.as_text())
        .collect();
    if !texts.is_empty() {
        return Some(texts.join("\n"));
    }
    task.status.message.as_ref().and_then(message_text)
}

fn bounded(text: String) -> String {
    match text.char_indices().nth(MAX_REMOTE_REASON_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

/// A remote task's end as a handler's result; `None` while it may still
/// change (submitted, working). A completed task without text, and one
/// that waits for input or authentication a worker cannot give, are failed
/// attempts.
pub fn remote_end(task: &Task) -> Option<RemoteEnd> {
    let state = task.status.state;
    let said = task.status.message.as_ref().and_then(message_text);
    let failed = |label: &str| {
        RemoteEnd::Failed(bounded(match &said {
            Some(text) => format!("remote task {label}: {text}"),
            None => format!("remote task {label}"),
        }))
    };
    match state {
        TaskState::Unspecified | TaskState::Submitted | TaskState::Working => None,
        TaskState::Completed => Some(match answer_text(task) {
            Some(text) => RemoteEnd::Answered(text),
            None => RemoteEnd::Failed("remote task completed without a text answer".to_owned()),
        }),
        TaskState::Failed => Some(failed("failed")),
        TaskState::Rejected => Some(failed("rejected")),
        TaskState::Canceled => Some(RemoteEnd::Canceled),
        TaskState::InputRequired => Some(failed("requires input")),
        TaskState::AuthRequired => Some(failed("requires authentication")),
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

    #[test]
    fn a_remote_task_ends_as_a_handler_result() {
        let answered = |text: &str| Some(RemoteEnd::Answered(text.to_owned()));
        let failed = |text: &str| Some(RemoteEnd::Failed(text.to_owned()));
        let table = [
            (task(TaskState::Submitted, None, &[]), None),
            (task(TaskState::Working, Some("thinking"), &[]), None),
            (task(TaskState::Unspecified, None, &[]), None),
            (task(TaskState::Completed, Some("HI"), &[]), answered("HI")),
            (
                task(TaskState::Completed, Some("done"), &["A", "B"]),
                answered("A\nB"),
            ),
            (
                task(TaskState::Completed, None, &[]),
                failed("remote task completed without a text answer"),
            ),
            (
                task(TaskState::Failed, Some("boom"), &[]),
                failed("remote task failed: boom"),
            ),
            (
                task(TaskState::Failed, None, &[]),
                failed("remote task failed"),
            ),
            (
                task(TaskState::Rejected, Some("sender_not_allowed"), &[]),
                failed("remote task rejected: sender_not_allowed"),
            ),
            (
                task(TaskState::Canceled, Some("x"), &[]),
                Some(RemoteEnd::Canceled),
            ),
            (
                task(TaskState::InputRequired, Some("which one?"), &[]),
                failed("remote task requires input: which one?"),
            ),
            (
                task(TaskState::AuthRequired, None, &[]),
                failed("remote task requires authentication"),
            ),
        ];
        for (task, expected) in table {
            assert_eq!(remote_end(&task), expected, "{:?}", task.status.state);
        }
    }

    #[test]
    fn remote_reasons_are_bounded_and_only_text_parts_count() {
        let long = "é".repeat(MAX_REMOTE_REASON_CHARS * 2);
        let Some(RemoteEnd::Failed(reason)) =
            remote_end(&task(TaskState::Failed, Some(&long), &[]))
        else {
            panic!("failed");
        };
        assert_eq!(reason.chars().count(), MAX_REMOTE_REASON_CHARS + 1);
        assert!(reason.ends_with('…'));

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
