//! `SendStreamingMessage` and `SubscribeToTask`: Server-Sent Events, each a
//! JSON-RPC response whose result is a `StreamResponse` — first the task,
//! then a status update on every change of its delivery (read again on
//! each hub signal, never on a timer), ending with the final state.

use std::convert::Infallible;
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream::{self, Stream};
use relayger_core::a2a::serve::{TaskShape, history_length, stream_steps};
use relayger_core::a2a::{
    A2aError, Artifact, JsonRpcResponse, SendMessageRequest, StreamResponse,
    SubscribeToTaskRequest, TaskArtifactUpdateEvent, TaskState, TaskStatus, TaskStatusUpdateEvent,
};
use serde_json::Value;
use tokio::sync::broadcast;
use tokio::time::Interval;

use super::Failure;
use super::tasks::{Asker, Heard, TaskView, sent_message};
use crate::hub::HubSignal;

/// A comment line this often keeps proxies from closing a quiet stream.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// A stream's state between events.
struct Watch {
    asker: Asker,
    id: Value,
    signals: broadcast::Receiver<HubSignal>,
    view: TaskView,
    shape: TaskShape,
    /// The state the client last heard.
    reported: TaskState,
    /// Events ready to go out, in order.
    pending: Vec<StreamResponse>,
    /// Re-checks the token, as an open socket does (a revocation whose
    /// NOTIFY another instance missed).
    token_check: Interval,
    /// The last event went out: end the stream.
    finished: bool,
}

impl Watch {
    fn event(&self, response: StreamResponse) -> Event {
        let body = JsonRpcResponse::success(self.id.clone(), response);
        Event::default().data(serde_json::to_string(&body).unwrap_or_default())
    }

    fn error_event(&self, failure: Failure) -> Event {
        let error = match failure {
            Failure::Rpc(error) => error,
            Failure::Http(error) => A2aError::InternalError.with_message(error.message),
        };
        let body = JsonRpcResponse::<Value>::failure(self.id.clone(), error);
        Event::default().data(serde_json::to_string(&body).unwrap_or_default())
    }

    /// The updates for the view as it is now: one status update per state
    /// passed since the last one heard, the reply as an artifact before a
    /// completed state.
    fn queue_changes(&mut self) {
        let task = self.view.task(self.shape);
        let steps = stream_steps(self.reported, task.status.state, self.view.attempts());
        for state in steps {
            let status = if state == task.status.state {
                task.status.clone()
            } else {
                TaskStatus {
                    state,
                    message: None,
                    timestamp: task.status.timestamp,
                }
            };
            if state == TaskState::Completed
                && let Some(reply) = &task.status.message
            {
                self.pending
                    .push(StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
                        task_id: task.id.clone(),
                        context_id: task.context_id.clone(),
                        artifact: Artifact {
                            artifact_id: reply.message_id.clone(),
                            name: relayger_core::a2a::serve::REPLY_ARTIFACT.to_owned(),
                            parts: reply.parts.clone(),
                            ..Artifact::default()
                        },
                        append: false,
                        last_chunk: true,
                        metadata: None,
                    }));
            }
            self.pending
                .push(StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
                    task_id: task.id.clone(),
                    context_id: task.context_id.clone(),
                    status,
                    metadata: None,
                }));
            self.reported = state;
        }
    }

    /// The next event, waiting for signals as long as nothing changed.
    async fn next(mut self) -> Option<(Event, Watch)> {
        loop {
            if !self.pending.is_empty() {
                let response = self.pending.remove(0);
                if self.pending.is_empty() && self.reported.is_terminal() {
                    self.finished = true;
                }
                return Some((self.event(response), self));
            }
            if self.finished {
                self.asker.unsubscribe(self.signals);
                return None;
            }
            let heard = tokio::select! {
                heard = self.asker.next_change(&mut self.signals) => heard,
                _ = self.token_check.tick() => {
                    match self.asker.state.store.token_is_active(self.asker.auth.0.token_id).await {
                        Ok(true) => continue,
                        Ok(false) | Err(_) => Heard::Revoked,
                    }
                }
            };
            match heard {
                Heard::LookAgain => {}
                Heard::Revoked | Heard::Closed => {
                    self.asker.unsubscribe(self.signals);
                    return None;
                }
            }
            match self.asker.view(self.view.question.clone()).await {
                Ok(view) => {
                    self.view = view;
                    self.queue_changes();
                }
                Err(failure) => {
                    self.finished = true;
                    return Some((self.error_event(failure), self));
                }
            }
        }
    }
}

/// The SSE answer: the task as it stands, then its changes.
fn respond(
    asker: Asker,
    id: Value,
    signals: broadcast::Receiver<HubSignal>,
    view: TaskView,
    shape: TaskShape,
) -> Response {
    let mut token_check = tokio::time::interval(asker.state.config.socket_check_interval);
    token_check.reset();
    let task = view.task(shape);
    let reported = task.status.state;
    let watch = Watch {
        asker,
        id,
        signals,
        view,
        shape,
        reported,
        pending: vec![StreamResponse::Task(task)],
        token_check,
        finished: false,
    };
    let events = stream::unfold(watch, Watch::next).map_ok();
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response()
}

trait MapOk: Stream<Item = Event> + Sized {
    fn map_ok(self) -> impl Stream<Item = Result<Event, Infallible>> {
        futures_util::StreamExt::map(self, Ok)
    }
}

impl<S: Stream<Item = Event>> MapOk for S {}

/// `SendStreamingMessage`: asks, then streams the task.
pub(super) async fn send(
    asker: Asker,
    id: Value,
    request: SendMessageRequest,
) -> Result<Response, Failure> {
    let (message, configuration) = sent_message(request)?;
    let shape = TaskShape {
        history: history_length(configuration.history_length)?,
        artifacts: true,
    };
    let signals = asker.subscribe();
    let question = match asker.ask(&message).await {
        Ok(question) => question,
        Err(failure) => {
            asker.unsubscribe(signals);
            return Err(failure);
        }
    };
    let view = asker.view(question).await?;
    Ok(respond(asker, id, signals, view, shape))
}

/// `SubscribeToTask`: streams a task that has not ended.
pub(super) async fn subscribe(
    asker: Asker,
    id: Value,
    request: SubscribeToTaskRequest,
) -> Result<Response, Failure> {
    let signals = asker.subscribe();
    let view = match asker.read(&request.id).await {
        Ok(view) if !view.state().is_terminal() => view,
        Ok(view) => {
            asker.unsubscribe(signals);
            return Err(A2aError::UnsupportedOperation
                .with_message(format!(
                    "task {} already ended ({}); read it with GetTask",
                    request.id,
                    view.state().as_str()
                ))
                .into());
        }
        Err(failure) => {
            asker.unsubscribe(signals);
            return Err(failure);
        }
    };
    Ok(respond(asker, id, signals, view, TaskShape::FULL))
}
