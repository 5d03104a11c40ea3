//! The parts of A2A 1.0's JSON (protobuf's JSON mapping) the client reads.
//! Unknown fields are ignored and unknown enum values kept as such, so a
//! newer agent still works.

use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct AgentCard {
    pub supported_interfaces: Vec<AgentInterface>,
    pub capabilities: AgentCapabilities,
}

impl AgentCard {
    /// The URL of the first JSON-RPC interface.
    pub(super) fn jsonrpc_url(&self) -> Option<String> {
        self.supported_interfaces
            .iter()
            .find(|interface| interface.protocol_binding.eq_ignore_ascii_case("JSONRPC"))
            .map(|interface| interface.url.clone())
    }

    pub(super) fn streams(&self) -> bool {
        self.capabilities.streaming
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct AgentInterface {
    pub url: String,
    pub protocol_binding: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct AgentCapabilities {
    pub streaming: bool,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct Task {
    pub id: String,
    pub status: TaskStatus,
    pub artifacts: Vec<Artifact>,
}

impl Task {
    /// A task known only by its id (a stream that began with an update).
    pub(super) fn named(id: &str) -> Task {
        Task {
            id: id.to_owned(),
            ..Task::default()
        }
    }

    /// An artifact update: appended to the artifact with its id when
    /// `append`, else replacing it (or added).
    pub(super) fn add_artifact(&mut self, artifact: Artifact, append: bool) {
        match self
            .artifacts
            .iter_mut()
            .find(|known| known.artifact_id == artifact.artifact_id)
        {
            Some(known) if append => known.parts.extend(artifact.parts),
            Some(known) => *known = artifact,
            None => self.artifacts.push(artifact),
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct TaskStatus {
    pub state: TaskState,
    pub message: Option<Message>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub(super) enum TaskState {
    #[default]
    #[serde(rename = "TASK_STATE_UNSPECIFIED")]
    Unspecified,
    #[serde(rename = "TASK_STATE_SUBMITTED")]
    Submitted,
    #[serde(rename = "TASK_STATE_WORKING")]
    Working,
    #[serde(rename = "TASK_STATE_COMPLETED")]
    Completed,
    #[serde(rename = "TASK_STATE_FAILED")]
    Failed,
    #[serde(rename = "TASK_STATE_CANCELED")]
    Canceled,
    #[serde(rename = "TASK_STATE_INPUT_REQUIRED")]
    InputRequired,
    #[serde(rename = "TASK_STATE_REJECTED")]
    Rejected,
    #[serde(rename = "TASK_STATE_AUTH_REQUIRED")]
    AuthRequired,
    /// A state of a newer protocol: still running, as far as we know.
    #[serde(other)]
    Unknown,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct Message {
    pub parts: Vec<Part>,
    pub metadata: Option<Value>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct Part {
    pub text: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct Artifact {
    pub artifact_id: String,
    pub parts: Vec<Part>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct TaskStatusUpdateEvent {
    pub task_id: String,
    pub status: TaskStatus,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct TaskArtifactUpdateEvent {
    pub task_id: String,
    pub artifact: Artifact,
    pub append: bool,
}

/// `SendMessage`'s result: a task, or a message that is the whole answer.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) enum SendMessageResponse {
    Task(Task),
    Message(Message),
}

/// One streamed event.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) enum StreamResponse {
    Task(Task),
    Message(Message),
    StatusUpdate(TaskStatusUpdateEvent),
    ArtifactUpdate(TaskArtifactUpdateEvent),
}
