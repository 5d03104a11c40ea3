//! `ask_and_wait`: send a question, then wait — woken by the identity
//! socket, never by a timer reading the server — for its reply, or for
//! every recipient to end without one, with progress notifications while
//! waiting. A question that will not be answered, or whose wait ran out,
//! gives its delivery (each recipient's state and reason), not an error.

use std::time::Duration;

use relayger_core::wire::{Delivery, MessageEnvelope};
use relayger_worker::{Client, OpenedMessage, SignalSocket};
use rmcp::model::{CallToolResult, ProgressNotificationParam, ProgressToken};
use rmcp::{Peer, RoleServer};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::time::{Instant, MissedTickBehavior, interval, sleep_until};

use super::server::McpServer;
use super::tools::{SendParams, tool_error, tool_result};
use crate::commands;
use crate::commands::delivery;
use crate::commands::wait::{Ended, look, next_signal, no_reply};
use crate::error::CliError;
use crate::human;
use crate::output::Outcome;

/// How long the tool waits when the call does not say.
const DEFAULT_TIMEOUT_SECONDS: u64 = 60;
/// The longest wait one call may ask for.
const MAX_TIMEOUT_SECONDS: u64 = 600;
/// How often a progress notification says the wait goes on.
const PROGRESS_INTERVAL: Duration = Duration::from_secs(2);

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct AskParams {
    /// A contact's identity number (9 digits). Give `to` or `roomId`, not both.
    #[serde(default)]
    to: Option<String>,
    /// A room's id (UUID). Give `to` or `roomId`, not both.
    #[serde(default)]
    room_id: Option<String>,
    /// The question (at most 64 KiB).
    text: String,
    /// When the question stops mattering: RFC 3339 in UTC with `Z`.
    #[serde(default)]
    deadline: Option<String>,
    /// Ask in reply to this message (its id; in the same room).
    #[serde(default)]
    reply_to: Option<String>,
    /// Encrypt the question end to end, here, for the room's members.
    #[serde(default)]
    sealed: bool,
    /// How long to wait for the reply, in seconds (1–600, default 60).
    #[serde(default)]
    timeout_seconds: Option<u64>,
}

/// How a call ended: `answered` (with the reply), `unanswered` (every
/// recipient ended without an answer) or `timeout` (the wait ran out
/// first), the last two with the question's delivery.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Asked<'a> {
    question: &'a MessageEnvelope,
    outcome: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    reply: Option<&'a OpenedMessage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    delivery: Option<&'a Delivery>,
}

/// How the wait ended.
enum Waited {
    Ended(Ended),
    TimedOut,
}

impl McpServer {
    pub(super) async fn ask(
        &self,
        args: AskParams,
        progress: Option<ProgressToken>,
        peer: Peer<RoleServer>,
    ) -> CallToolResult {
        let seconds = args.timeout_seconds.unwrap_or(DEFAULT_TIMEOUT_SECONDS);
        if !(1..=MAX_TIMEOUT_SECONDS).contains(&seconds) {
            return tool_error(&CliError::invalid(format!(
                "timeoutSeconds must be 1 to {MAX_TIMEOUT_SECONDS}, not {seconds}"
            )));
        }
        let send = SendParams {
            to: args.to,
            room_id: args.room_id,
            text: args.text,
            ask: true,
            deadline: args.deadline,
            reply_to: args.reply_to,
            sealed: args.sealed,
        };
        let command = match send.into_command() {
            Ok(command) => command,
            Err(err) => return tool_error(&err),
        };
        let client = self.client();
        // Listen before sending, so a reply that comes at once is not missed.
        let socket = client.socket().await.ok();
        let question = match commands::run(self.context(), command).await {
            Ok(outcome) => outcome,
            Err(err) => return tool_error(&err),
        };
        let (json, _) = question.into_parts();
        let question: MessageEnvelope = match serde_json::from_str(&json) {
            Ok(question) => question,
            Err(err) => {
                return tool_error(&CliError::with_code(
                    "internal",
                    format!("the sent question cannot be read back: {err}"),
                ));
            }
        };
        let mut waiter = Waiter {
            client,
            socket,
            peer,
            progress,
            started: Instant::now(),
            timeout: Duration::from_secs(seconds),
        };
        match waiter.wait(&question).await {
            Ok(waited) => waiter.result(&question, waited).await,
            Err(err) => tool_error(&err),
        }
    }
}

struct Waiter {
    client: Client,
    socket: Option<SignalSocket>,
    peer: Peer<RoleServer>,
    progress: Option<ProgressToken>,
    started: Instant,
    timeout: Duration,
}

impl Waiter {
    /// The reply to `question`, or its delivery once every recipient ended
    /// without one, read again after every signal (and after the socket is
    /// opened again); `TimedOut` when neither came in time.
    async fn wait(&mut self, question: &MessageEnvelope) -> Result<Waited, CliError> {
        let deadline = self.started + self.timeout;
        self.notify(&format!(
            "asked #{} in {}; waiting for the reply",
            question.seq, question.conversation_id
        ))
        .await;
        let mut ticks = interval(PROGRESS_INTERVAL);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        ticks.tick().await;
        loop {
            match look(&self.client, question).await {
                Ok(Some(ended)) => return Ok(Waited::Ended(ended)),
                Ok(None) => {}
                // A server restarting while we wait: the socket's return says when to look.
                Err(err) if err.is_transient() => {}
                Err(err) => return Err(err.into()),
            }
            // Until a signal (or a reopened socket) says to look again.
            loop {
                tokio::select! {
                    _ = sleep_until(deadline) => return Ok(Waited::TimedOut),
                    _ = ticks.tick() => self.notify("still waiting for the reply").await,
                    woken = next_signal(&self.client, &mut self.socket) => if woken { break },
                }
            }
        }
    }

    /// The tool's result for how the wait ended: the reply, or the
    /// question's delivery (read once more when the wait ran out).
    async fn result(&self, question: &MessageEnvelope, waited: Waited) -> CallToolResult {
        let head = format!("asked #{} ({})", question.seq, question.message_id);
        let (outcome, delivery, head) = match waited {
            Waited::Ended(Ended::Answered(reply)) => {
                let line = format!("{head}; reply:\n{}", human::message(&reply));
                let answered = Asked {
                    question,
                    outcome: "answered",
                    reply: Some(&*reply),
                    delivery: None,
                };
                return tool_result(Outcome::new(&answered, line), true);
            }
            Waited::Ended(Ended::Unanswered(delivery)) => (
                "unanswered",
                delivery,
                format!("{head}; no answer will come:"),
            ),
            Waited::TimedOut => {
                let read = self
                    .client
                    .delivery(question.conversation_id, question.message_id)
                    .await;
                let Ok(delivery) = read else {
                    return tool_error(&no_reply(question, self.timeout));
                };
                let head = format!(
                    "{head}; no reply within {} s (the question stays sent):",
                    self.timeout.as_secs()
                );
                ("timeout", delivery, head)
            }
        };
        let line = format!("{head}\n{}", delivery::human(&delivery));
        let asked = Asked {
            question,
            outcome,
            reply: None,
            delivery: Some(&delivery),
        };
        tool_result(Outcome::new(&asked, line), false)
    }

    async fn notify(&self, message: &str) {
        let Some(token) = &self.progress else {
            return;
        };
        let elapsed = self.started.elapsed().as_secs_f64();
        let param = ProgressNotificationParam::new(token.clone(), elapsed)
            .with_total(self.timeout.as_secs_f64())
            .with_message(message);
        // A client that went away cancels the call anyway.
        let _ = self.peer.notify_progress(param).await;
    }
}
