//! The params and results of the JSON-RPC methods.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::types::{Message, ProtoTimestamp, Task, TaskState, is_false};

/// `SendMessage` and `SendStreamingMessage` params.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendMessageRequest {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tenant: String,
    /// Required; `None` is invalid params.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configuration: Option<SendMessageConfiguration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

/// How a send should behave.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendMessageConfiguration {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accepted_output_modes: Vec<String>,
    /// Push notifications; Relayger does not offer them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_push_notification_config: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_length: Option<i32>,
    /// Answer at once with the task as submitted instead of waiting for
    /// its end.
    #[serde(default, skip_serializing_if = "is_false")]
    pub return_immediately: bool,
}

/// `SendMessage`'s result: a task, or a message when the agent answered
/// without one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SendMessageResponse {
    Task(Task),
    Message(Message),
}

/// `GetTask` params.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetTaskRequest {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tenant: String,
    #[serde(default)]
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_length: Option<i32>,
}

/// `ListTasks` params.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTasksRequest {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tenant: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub context_id: String,
    /// `TASK_STATE_UNSPECIFIED` (or absent): any state.
    #[serde(default, skip_serializing_if = "is_unspecified")]
    pub status: TaskState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_size: Option<i32>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub page_token: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_length: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_timestamp_after: Option<ProtoTimestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_artifacts: Option<bool>,
}

/// `ListTasks` result.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTasksResponse {
    #[serde(default)]
    pub tasks: Vec<Task>,
    /// Empty on the last page.
    #[serde(default)]
    pub next_page_token: String,
    #[serde(default)]
    pub page_size: i32,
    #[serde(default)]
    pub total_size: i32,
}

/// `CancelTask` params.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CancelTaskRequest {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tenant: String,
    #[serde(default)]
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

/// `SubscribeToTask` params.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscribeToTaskRequest {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tenant: String,
    #[serde(default)]
    pub id: String,
}

fn is_unspecified(state: &TaskState) -> bool {
    *state == TaskState::Unspecified
}
