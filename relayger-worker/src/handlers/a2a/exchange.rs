//! One question's exchange with the remote agent: card, send, follow the
//! task to its end (stream, or poll with backoff), and the cancel of a
//! task left running.

use std::time::Duration;

use relayger_core::a2a::{
    A2aMethod, AgentCard, CancelTaskRequest, GetTaskRequest, Message, PROTOCOL_BINDING_JSONRPC,
    Part, Role, SendMessageConfiguration, SendMessageRequest, SendMessageResponse, StreamResponse,
    Task, TaskArtifactUpdateEvent,
};

use super::end::{RemoteEnd, end_of_message, end_of_task};
use super::rpc::{Remote, RemoteError};

/// The first and the longest wait between two `GetTask`s.
const POLL_FIRST: Duration = Duration::from_millis(200);
const POLL_MAX: Duration = Duration::from_secs(5);

/// The question's exchange; after [`Exchange::run`] was dropped unfinished
/// it still knows the remote task to cancel.
pub(super) struct Exchange<'a> {
    remote: &'a Remote,
    card_url: &'a str,
    /// The JSON-RPC endpoint, once the card was read.
    rpc_url: Option<String>,
    /// The remote task while it runs (cleared once it ended).
    running: Option<String>,
}

impl<'a> Exchange<'a> {
    pub(super) fn new(remote: &'a Remote, card_url: &'a str) -> Exchange<'a> {
        Exchange {
            remote,
            card_url,
            rpc_url: None,
            running: None,
        }
    }

    /// Asks `text` and follows the task to its end.
    pub(super) async fn run(&mut self, text: &str) -> Result<RemoteEnd, RemoteError> {
        let card: AgentCard = self.remote.card(self.card_url).await?;
        let rpc_url = card
            .interface(PROTOCOL_BINDING_JSONRPC)
            .map(|interface| interface.url.clone())
            .ok_or(RemoteError::Card("no_jsonrpc_interface"))?;
        self.rpc_url = Some(rpc_url.clone());
        // The text and nothing else of ours: no ids, no sender, no room.
        let message = Message {
            message_id: uuid::Uuid::new_v4().to_string(),
            role: Role::User,
            parts: vec![Part::text(text)],
            ..Message::default()
        };
        if card.capabilities.streaming == Some(true) {
            let params = SendMessageRequest {
                message: Some(message),
                ..SendMessageRequest::default()
            };
            return self.streamed(&rpc_url, &params).await;
        }
        let params = SendMessageRequest {
            message: Some(message),
            configuration: Some(SendMessageConfiguration {
                return_immediately: true,
                ..SendMessageConfiguration::default()
            }),
            ..SendMessageRequest::default()
        };
        let sent: SendMessageResponse = self
            .remote
            .call(&rpc_url, A2aMethod::SendMessage, &params)
            .await?;
        match sent {
            SendMessageResponse::Message(message) => Ok(end_of_message(&message)),
            SendMessageResponse::Task(task) => self.follow(&rpc_url, task).await,
        }
    }

    /// `SendStreamingMessage`: the events until the task ends. A stream
    /// that closes before it did (a dropped connection) is followed by
    /// polling.
    async fn streamed(
        &mut self,
        rpc_url: &str,
        params: &SendMessageRequest,
    ) -> Result<RemoteEnd, RemoteError> {
        let mut stream = self
            .remote
            .stream(rpc_url, A2aMethod::SendStreamingMessage, params)
            .await?;
        let mut seen = StreamState::default();
        while let Some(event) = stream.next::<StreamResponse>().await {
            let event = match event {
                Ok(event) => event,
                // The task may still end: poll it if it is known.
                Err(RemoteError::Unavailable) if seen.task.is_some() => break,
                Err(err) => return Err(err),
            };
            let end = seen.apply(event);
            self.running = seen.task.as_ref().map(|task| task.id.clone());
            if let Some(end) = end {
                self.running = None;
                return Ok(end);
            }
        }
        match seen.task {
            Some(task) => self.follow(rpc_url, task).await,
            None => Err(RemoteError::Invalid("empty_stream")),
        }
    }

    /// `GetTask` with backoff until `task` ends.
    async fn follow(&mut self, rpc_url: &str, mut task: Task) -> Result<RemoteEnd, RemoteError> {
        let mut wait = POLL_FIRST;
        loop {
            if let Some(end) = end_of_task(&task) {
                self.running = None;
                return Ok(end);
            }
            self.running = Some(task.id.clone());
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(POLL_MAX);
            let params = GetTaskRequest {
                id: task.id.clone(),
                ..GetTaskRequest::default()
            };
            task = self
                .remote
                .call(rpc_url, A2aMethod::GetTask, &params)
                .await?;
        }
    }

    /// Best effort: a `CancelTask` for the remote task if one still runs,
    /// given at most `within`.
    pub(super) async fn cancel_remote(&mut self, within: Duration) {
        let (Some(rpc_url), Some(task_id)) = (&self.rpc_url, self.running.take()) else {
            return;
        };
        let params = CancelTaskRequest {
            id: task_id,
            ..CancelTaskRequest::default()
        };
        let cancel = self
            .remote
            .call::<serde_json::Value>(rpc_url, A2aMethod::CancelTask, &params);
        let _ = tokio::time::timeout(within, cancel).await;
    }
}

/// What a stream told of the task so far.
#[derive(Debug, Default)]
pub(super) struct StreamState {
    pub(super) task: Option<Task>,
}

impl StreamState {
    /// Takes in one event; the end when it ended the exchange (a message,
    /// or a task at its end).
    pub(super) fn apply(&mut self, event: StreamResponse) -> Option<RemoteEnd> {
        let task = match event {
            StreamResponse::Message(message) => return Some(end_of_message(&message)),
            StreamResponse::Task(task) => self.task.insert(task),
            StreamResponse::StatusUpdate(update) => {
                let task = self.task.get_or_insert_with(|| named(&update.task_id));
                task.status = update.status;
                task
            }
            StreamResponse::ArtifactUpdate(update) => {
                let task = self.task.get_or_insert_with(|| named(&update.task_id));
                add_artifact(task, update);
                task
            }
        };
        end_of_task(task)
    }
}

/// A task known only by its id (a stream that began with an update).
fn named(id: &str) -> Task {
    Task {
        id: id.to_owned(),
        ..Task::default()
    }
}

/// An artifact update: appended to the artifact with its id when it says
/// so, else replacing it (or added).
fn add_artifact(task: &mut Task, update: TaskArtifactUpdateEvent) {
    let artifact = update.artifact;
    match task
        .artifacts
        .iter_mut()
        .find(|known| known.artifact_id == artifact.artifact_id)
    {
        Some(known) if update.append => known.parts.extend(artifact.parts),
        Some(known) => *known = artifact,
        None => task.artifacts.push(artifact),
    }
}
