//! One caller's questions to one agent as A2A tasks: asking, reading,
//! listing, canceling, and waiting for a question's delivery to end on the
//! hub's signals.

use std::time::Duration;

use relayger_core::ErrorCode;
use relayger_core::a2a::serve::{TaskShape, history_length, page_size, page_token, question_text};
use relayger_core::a2a::{
    A2aError, CancelTaskRequest, GetTaskRequest, JsonRpcError, ListTasksRequest, ListTasksResponse,
    Message, SendMessageRequest, SendMessageResponse, Task, TaskState, task_state,
};
use relayger_core::wire::{Delivery, DeliveryState, Identity, MessageEnvelope, Scope};
use relayger_store::{Caller, MessageBody, NewMessage};
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::time::Instant;
use uuid::Uuid;

use super::Failure;
use crate::extract::Auth;
use crate::hub::HubSignal;
use crate::{ApiError, AppState};

/// How long a blocking `SendMessage` waits for the question's delivery to
/// end before it answers with the task as it stands.
pub(super) const BLOCKING_WAIT: Duration = Duration::from_secs(30);

fn task_not_found(id: &str) -> Failure {
    A2aError::TaskNotFound
        .with_message(format!("no task {id} of yours with this agent"))
        .into()
}

/// An HTTP 404 (no such room or message for this caller) as "task not
/// found"; anything else stays what it was.
fn not_found_as_task(id: &str, error: impl Into<ApiError>) -> Failure {
    let error = error.into();
    if error.code == ErrorCode::NotFound {
        task_not_found(id)
    } else {
        Failure::Http(error)
    }
}

/// A question with its delivery and, once answered, the reply.
#[derive(Debug, Clone)]
pub(super) struct TaskView {
    pub(super) question: MessageEnvelope,
    pub(super) delivery: Delivery,
    pub(super) reply: Option<MessageEnvelope>,
}

impl TaskView {
    pub(super) fn state(&self) -> TaskState {
        task_state(self.delivery.state)
    }

    /// Leases granted on the question, over its recipients.
    pub(super) fn attempts(&self) -> u32 {
        self.delivery.recipients.iter().map(|r| r.attempts).sum()
    }

    pub(super) fn task(&self, shape: TaskShape) -> Task {
        relayger_core::a2a::serve::task_of(
            &self.question,
            &self.delivery,
            self.reply.as_ref(),
            shape,
        )
    }
}

/// What a wait for the next change heard.
pub(super) enum Heard {
    /// Something may have changed: read again.
    LookAgain,
    /// The caller's token was revoked.
    Revoked,
    /// The hub is gone (the server is stopping).
    Closed,
}

/// The caller (a token) and the agent its calls address.
pub(super) struct Asker {
    pub(super) state: AppState,
    pub(super) auth: Auth,
    pub(super) agent: Identity,
}

impl Asker {
    pub(super) fn new(state: AppState, auth: Auth, agent: Identity) -> Asker {
        Asker { state, auth, agent }
    }

    pub(super) fn caller(&self) -> Caller {
        self.auth.0.caller()
    }

    /// The caller's signals; subscribe before acting so no change between
    /// the act and the first read passes unheard.
    pub(super) fn subscribe(&self) -> broadcast::Receiver<HubSignal> {
        self.state.hub.subscribe(self.auth.0.identity.id)
    }

    /// Waits for the next signal that may concern a question's delivery.
    pub(super) async fn next_change(&self, signals: &mut broadcast::Receiver<HubSignal>) -> Heard {
        loop {
            match signals.recv().await {
                Ok(HubSignal::InboxChanged(_) | HubSignal::DeliveryChanged)
                | Err(RecvError::Lagged(_)) => return Heard::LookAgain,
                Ok(HubSignal::TokenRevoked(token)) if token == self.auth.0.token_id => {
                    return Heard::Revoked;
                }
                Ok(HubSignal::TokenRevoked(_) | HubSignal::RuntimeChanged) => {}
                Err(RecvError::Closed) => return Heard::Closed,
            }
        }
    }

    /// Drops the caller's hub channel when nothing else listens on it.
    pub(super) fn unsubscribe(&self, signals: broadcast::Receiver<HubSignal>) {
        drop(signals);
        self.state.hub.prune(self.auth.0.identity.id);
    }

    fn require_write(&self) -> Result<(), Failure> {
        self.auth.require(Scope::Write)?;
        Ok(())
    }

    /// The caller's direct room with the agent.
    async fn room(&self) -> Result<Uuid, ApiError> {
        Ok(self
            .state
            .store
            .direct_room_with(&self.caller(), &self.agent.number)
            .await?)
    }

    /// The view of a question already read.
    pub(super) async fn view(&self, question: MessageEnvelope) -> Result<TaskView, Failure> {
        let caller = self.caller();
        let (room, id) = (question.conversation_id, question.message_id);
        let delivery = self.state.store.delivery(&caller, room, id).await?;
        let reply_id = (delivery.state == DeliveryState::Answered)
            .then(|| {
                delivery
                    .recipients
                    .iter()
                    .find_map(|recipient| recipient.reply_message_id)
            })
            .flatten();
        let reply = match reply_id {
            Some(reply_id) => Some(self.state.store.message(&caller, room, reply_id).await?),
            None => None,
        };
        Ok(TaskView {
            question,
            delivery,
            reply,
        })
    }

    /// Task `id`: a question the caller asked in its direct room with the
    /// agent; anything else is "task not found".
    pub(super) async fn question(&self, id: &str) -> Result<MessageEnvelope, Failure> {
        let message_id = Uuid::parse_str(id).map_err(|_| task_not_found(id))?;
        let room = self
            .room()
            .await
            .map_err(|error| not_found_as_task(id, error))?;
        let question = self
            .state
            .store
            .message(&self.caller(), room, message_id)
            .await
            .map_err(|error| not_found_as_task(id, error))?;
        if question.sender.id != self.auth.0.identity.id || !question.ask {
            return Err(task_not_found(id));
        }
        Ok(question)
    }

    /// Reads task `id` as it stands.
    pub(super) async fn read(&self, id: &str) -> Result<TaskView, Failure> {
        let question = self.question(id).await?;
        self.view(question).await
    }

    /// Asks the agent: a question in the direct room (a reply in the thread
    /// of `message.taskId` when given). Needs `write`.
    pub(super) async fn ask(&self, message: &Message) -> Result<MessageEnvelope, Failure> {
        self.require_write()?;
        let text = question_text(message)?;
        let reply_to = match message.task_id.as_str() {
            "" => None,
            task => Some(self.question(task).await?.message_id),
        };
        let new = NewMessage {
            to: Some(self.agent.number.clone()),
            room_id: None,
            message_id: None,
            body: MessageBody::Text(text),
            ask: true,
            deadline: None,
            reply_to,
        };
        let (question, _) = self
            .state
            .store
            .send_message(&self.caller(), new, |_, _| {
                Err("sealed messages are not offered over A2A".to_owned())
            })
            .await?;
        Ok(question)
    }

    /// Refuses a `contextId` that is not the direct room, before anything
    /// is sent.
    async fn check_context(&self, message: &Message) -> Result<(), Failure> {
        if message.context_id.is_empty() {
            return Ok(());
        }
        let room = self.room().await?;
        if message.context_id != room.to_string() {
            return Err(A2aError::InvalidParams
                .with_message(
                    "contextId is your direct room with this agent (the contextId of its tasks), or absent",
                )
                .into());
        }
        Ok(())
    }

    /// Reads the view again on every signal until the delivery ends or
    /// `until` passes; answers the latest view.
    pub(super) async fn wait_for_end(
        &self,
        signals: &mut broadcast::Receiver<HubSignal>,
        question: MessageEnvelope,
        until: Instant,
    ) -> Result<TaskView, Failure> {
        let mut view = self.view(question).await?;
        loop {
            if view.state().is_terminal() {
                return Ok(view);
            }
            match tokio::time::timeout_at(until, self.next_change(signals)).await {
                Err(_) | Ok(Heard::Closed) => return Ok(view),
                Ok(Heard::Revoked) => return Err(revoked()),
                Ok(Heard::LookAgain) => view = self.view(view.question).await?,
            }
        }
    }

    /// `SendMessage`: blocking unless `returnImmediately`.
    pub(super) async fn send(
        &self,
        request: SendMessageRequest,
    ) -> Result<SendMessageResponse, Failure> {
        let (message, configuration) = sent_message(request)?;
        let shape = TaskShape {
            history: history_length(configuration.history_length)?,
            artifacts: true,
        };
        self.check_context(&message).await?;
        let mut signals = self.subscribe();
        let result = async {
            let question = self.ask(&message).await?;
            let view = if configuration.return_immediately {
                self.view(question).await?
            } else {
                let until = Instant::now() + BLOCKING_WAIT;
                self.wait_for_end(&mut signals, question, until).await?
            };
            Ok(SendMessageResponse::Task(view.task(shape)))
        }
        .await;
        self.unsubscribe(signals);
        result
    }

    /// `GetTask`.
    pub(super) async fn get(&self, request: GetTaskRequest) -> Result<Task, Failure> {
        let shape = TaskShape {
            history: history_length(request.history_length)?,
            artifacts: true,
        };
        Ok(self.read(&request.id).await?.task(shape))
    }

    /// `CancelTask`: the question's cancel (only its asker; a task that
    /// ended is not cancelable). Needs `write`.
    pub(super) async fn cancel(&self, request: CancelTaskRequest) -> Result<Task, Failure> {
        self.require_write()?;
        let view = self.read(&request.id).await?;
        if view.state().is_terminal() {
            return Err(A2aError::TaskNotCancelable
                .with_message(format!(
                    "task {} already ended ({})",
                    request.id,
                    view.state().as_str()
                ))
                .into());
        }
        let question = view.question;
        self.state
            .store
            .cancel_question(
                &self.caller(),
                question.conversation_id,
                question.message_id,
            )
            .await?;
        Ok(self.view(question).await?.task(TaskShape::FULL))
    }

    /// `ListTasks`: the caller's questions to this agent, newest first.
    pub(super) async fn list(
        &self,
        request: ListTasksRequest,
    ) -> Result<ListTasksResponse, Failure> {
        let size = page_size(request.page_size)?;
        let before = page_token(&request.page_token)?;
        let shape = TaskShape {
            history: history_length(request.history_length)?,
            artifacts: request.include_artifacts.unwrap_or(false),
        };
        let empty = ListTasksResponse {
            page_size: size as i32,
            ..ListTasksResponse::default()
        };
        let room = match self.room().await {
            Ok(room) => room,
            // Not a contact (or not in this token's rooms): no tasks.
            Err(error) if error.code == ErrorCode::NotFound => return Ok(empty),
            Err(error) => return Err(error.into()),
        };
        if !request.context_id.is_empty() && request.context_id != room.to_string() {
            return Ok(empty);
        }
        let page = self
            .state
            .store
            .questions(&self.caller(), room, before, size)
            .await?;
        let mut tasks = Vec::with_capacity(page.questions.len());
        for question in page.questions {
            let task = self.view(question).await?.task(shape);
            let state_matches =
                request.status == TaskState::Unspecified || task.status.state == request.status;
            let recent_enough = match (request.status_timestamp_after, task.status.timestamp) {
                (Some(after), Some(at)) => at >= after,
                _ => true,
            };
            if state_matches && recent_enough {
                tasks.push(task);
            }
        }
        Ok(ListTasksResponse {
            tasks,
            next_page_token: page
                .next_before
                .map(|seq| seq.to_string())
                .unwrap_or_default(),
            page_size: size as i32,
            total_size: i32::try_from(page.total).unwrap_or(i32::MAX),
        })
    }
}

/// The message and configuration of a send; a missing message is invalid
/// params, push notifications are not offered.
pub(super) fn sent_message(
    request: SendMessageRequest,
) -> Result<(Message, relayger_core::a2a::SendMessageConfiguration), JsonRpcError> {
    let message = request
        .message
        .ok_or_else(|| A2aError::InvalidParams.with_message("`message` is required"))?;
    let configuration = request.configuration.unwrap_or_default();
    if configuration.task_push_notification_config.is_some() {
        return Err(A2aError::PushNotificationNotSupported
            .with_message("push notifications are not offered: stream or poll instead"));
    }
    Ok((message, configuration))
}

pub(super) fn revoked() -> Failure {
    Failure::Http(ApiError::new(
        ErrorCode::Unauthorized,
        "a valid token is required (Authorization: Bearer TOKEN)",
    ))
}
