//! One question's exchange with the remote agent: card, send, follow the
//! task to its end (stream, or poll with backoff), and the cancel of a
//! task left running.

use std::time::Duration;

use serde_json::json;

use super::end::{RemoteEnd, end_of_message, end_of_task};
use super::rpc::{Remote, RemoteError};
use super::types::{AgentCard, SendMessageResponse, StreamResponse, Task};

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
            .jsonrpc_url()
            .ok_or(RemoteError::Card("no_jsonrpc_interface"))?;
        self.rpc_url = Some(rpc_url.clone());
        let message = json!({
            "messageId": uuid::Uuid::new_v4().to_string(),
            "role": "ROLE_USER",
            "parts": [{"text": text}],
        });
        if card.streams() {
            let params = json!({ "message": message });
            self.streamed(&rpc_url, &params).await
        } else {
            let params = json!({
                "message": message,
                "configuration": { "returnImmediately": true },
            });
            let sent: SendMessageResponse =
                self.remote.call(&rpc_url, "SendMessage", &params).await?;
            match sent {
                SendMessageResponse::Message(message) => Ok(end_of_message(&message)),
                SendMessageResponse::Task(task) => self.follow(&rpc_url, task).await,
            }
        }
    }

    /// `SendStreamingMessage`: the events until the task ends. A stream
    /// that closes before it did (a dropped connection) is followed by
    /// polling.
    async fn streamed(
        &mut self,
        rpc_url: &str,
        params: &serde_json::Value,
    ) -> Result<RemoteEnd, RemoteError> {
        let mut stream = self
            .remote
            .stream(rpc_url, "SendStreamingMessage", params)
            .await?;
        let mut last: Option<Task> = None;
        while let Some(event) = stream.next::<StreamResponse>().await {
            let event = match event {
                Ok(event) => event,
                // The task may still end: poll it if it is known.
                Err(RemoteError::Unavailable) if last.is_some() => break,
                Err(err) => return Err(err),
            };
            match event {
                StreamResponse::Message(message) => {
                    self.running = None;
                    return Ok(end_of_message(&message));
                }
                StreamResponse::Task(task) => {
                    self.running = Some(task.id.clone());
                    last = Some(task);
                }
                StreamResponse::StatusUpdate(update) => {
                    let task = last.get_or_insert_with(|| Task::named(&update.task_id));
                    self.running = Some(task.id.clone());
                    task.status = update.status;
                }
                StreamResponse::ArtifactUpdate(update) => {
                    let task = last.get_or_insert_with(|| Task::named(&update.task_id));
                    task.add_artifact(update.artifact, update.append);
                }
            }
            if let Some(end) = last.as_ref().and_then(end_of_task) {
                self.running = None;
                return Ok(end);
            }
        }
        match last {
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
            let params = json!({ "id": task.id });
            task = self.remote.call(rpc_url, "GetTask", &params).await?;
        }
    }

    /// Best effort: a `CancelTask` for the remote task if one still runs,
    /// given at most `within`.
    pub(super) async fn cancel_remote(&mut self, within: Duration) {
        let (Some(rpc_url), Some(task_id)) = (&self.rpc_url, self.running.take()) else {
            return;
        };
        let params = json!({ "id": task_id });
        let cancel = self
            .remote
            .call::<serde_json::Value>(rpc_url, "CancelTask", &params);
        let _ = tokio::time::timeout(within, cancel).await;
    }
}
