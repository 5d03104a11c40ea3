//! `send … --ask --wait [SECONDS]`: after sending, wait on the identity
//! socket (with a slow poll in case the socket is unavailable or a signal
//! is lost) until the question has its reply, or until every recipient has
//! ended without one (its delivery is failed, rejected or canceled).

use std::time::Duration;

use relayger_core::wire::{Delivery, DeliveryState, MessageEnvelope};
use relayger_worker::{Client, ClientError, OpenedMessage, SignalSocket, ThreadQuery};
use tokio::time::{Instant, sleep, sleep_until};

use super::delivery;
use crate::error::{self, CliError};
use crate::human;
use crate::output::Outcome;

/// How often the question is looked at when no signal comes.
const POLL_INTERVAL: Duration = Duration::from_secs(5);
/// How long to wait before opening a broken identity socket again.
const RECONNECT_DELAY: Duration = Duration::from_secs(1);
/// Thread pages read per look (the reply is normally on the first).
const PAGE_LIMIT: u32 = 100;
const PAGE_BYTES: u32 = 65_536;

/// How the wait for a question ended, before its timeout.
pub(crate) enum Ended {
    /// Someone replied to it (opened when sealed and this key can).
    Answered(Box<OpenedMessage>),
    /// Every recipient ended without answering: nothing more will come.
    Unanswered(Delivery),
}

/// The identity socket, opened before the question is sent.
pub(super) struct ReplyWaiter {
    socket: Option<SignalSocket>,
    timeout: Duration,
}

impl ReplyWaiter {
    pub(super) async fn open(client: &Client, seconds: u64) -> ReplyWaiter {
        // Without the socket the poll still finds the reply, only later.
        let socket = client.socket().await.ok();
        ReplyWaiter {
            socket,
            timeout: Duration::from_secs(seconds),
        }
    }

    /// The first message in `question`'s thread that replies to it, from
    /// someone else; an error with code `unanswered` (and the delivery to
    /// print) when every recipient ended without one, `timeout` when
    /// neither came in time.
    pub(super) async fn wait_for_reply(
        mut self,
        client: &Client,
        question: &MessageEnvelope,
    ) -> Result<Outcome, CliError> {
        let deadline = Instant::now() + self.timeout;
        loop {
            // At once after sending (a question can end before its signal
            // could reach the socket), then after each wake-up.
            match look(client, question).await {
                Ok(Some(Ended::Answered(reply))) => {
                    let line = format!(
                        "sent #{} ({}); reply:\n{}",
                        question.seq,
                        question.message_id,
                        human::message(&reply)
                    );
                    return Ok(Outcome::new(&*reply, line));
                }
                Ok(Some(Ended::Unanswered(delivery))) => {
                    return Err(unanswered(question, &delivery));
                }
                Ok(None) => {}
                // A server restarting while we wait: look again later.
                Err(err) if err.is_transient() => {}
                Err(err) => return Err(err.into()),
            }
            let poll = Instant::now() + POLL_INTERVAL;
            // Until a signal, a reopened socket or the poll says to look again.
            loop {
                tokio::select! {
                    _ = sleep_until(deadline) => return Err(no_reply(question, self.timeout)),
                    woken = next_signal(client, &mut self.socket) => if woken { break },
                    _ = sleep_until(poll) => break,
                }
            }
        }
    }
}

/// One look at `question`: its reply, or its delivery when every recipient
/// ended without one; `None` while an answer may still come.
pub(crate) async fn look(
    client: &Client,
    question: &MessageEnvelope,
) -> Result<Option<Ended>, ClientError> {
    if let Some(reply) = answered(client, question).await? {
        return Ok(Some(reply));
    }
    let delivery = match client
        .delivery(question.conversation_id, question.message_id)
        .await
    {
        Ok(delivery) => delivery,
        // The thread was just read, so a 404 is a server older than this
        // client, without deliveries: the reply alone ends the wait, as it
        // did there.
        Err(err) if is_not_found(&err) => return Ok(None),
        Err(err) => return Err(err),
    };
    if delivery.state.is_unanswered_end() {
        return Ok(Some(Ended::Unanswered(delivery)));
    }
    if delivery.state == DeliveryState::Answered {
        // The reply came between the two reads.
        return answered(client, question).await;
    }
    Ok(None)
}

fn is_not_found(err: &ClientError) -> bool {
    matches!(
        err,
        ClientError::Api { status: 404, .. } | ClientError::UnexpectedResponse { status: 404, .. }
    )
}

async fn answered(
    client: &Client,
    question: &MessageEnvelope,
) -> Result<Option<Ended>, ClientError> {
    Ok(match find_reply(client, question).await? {
        Some(reply) => Some(Ended::Answered(Box::new(client.open_message(reply).await))),
        None => None,
    })
}

/// The error when no reply came within `timeout`.
pub(crate) fn no_reply(question: &MessageEnvelope, timeout: Duration) -> CliError {
    CliError::with_code(
        error::TIMEOUT,
        format!(
            "no reply to {} within {} s (the question was sent)",
            question.message_id,
            timeout.as_secs()
        ),
    )
}

/// The error when every recipient ended without answering, with the
/// delivery for stdout (each recipient's state and reason).
fn unanswered(question: &MessageEnvelope, delivery: &Delivery) -> CliError {
    let lines = format!(
        "sent #{} ({}); no answer will come:\n{}",
        question.seq,
        question.message_id,
        delivery::human(delivery)
    );
    CliError::with_code(
        error::UNANSWERED,
        format!(
            "every recipient of {} ended without answering it ({}); the question stays sent",
            question.message_id,
            delivery.state.as_str()
        ),
    )
    .with_output(Outcome::new(delivery, lines))
}

/// Waits for the next signal on `socket` (true), or — with no socket or a
/// broken one — opens it again after a short delay (true once open, since
/// a signal may have been missed meanwhile).
pub(crate) async fn next_signal(client: &Client, socket: &mut Option<SignalSocket>) -> bool {
    match socket {
        Some(open) => {
            if open.next_signal().await.is_ok() {
                return true;
            }
            *socket = None;
            false
        }
        None => {
            sleep(RECONNECT_DELAY).await;
            *socket = client.socket().await.ok();
            socket.is_some()
        }
    }
}

pub(crate) async fn find_reply(
    client: &Client,
    question: &MessageEnvelope,
) -> Result<Option<MessageEnvelope>, ClientError> {
    let mut after = question.seq;
    loop {
        let query = ThreadQuery {
            after: Some(after),
            limit: Some(PAGE_LIMIT),
            max_bytes: Some(PAGE_BYTES),
        };
        let page = client
            .thread(question.conversation_id, question.message_id, query)
            .await?;
        let reply = page.messages.into_iter().find(|message| {
            message.reply_to == Some(question.message_id) && message.sender.id != question.sender.id
        });
        match (reply, page.next) {
            (Some(reply), _) => return Ok(Some(reply)),
            (None, Some(next)) => after = next,
            (None, None) => return Ok(None),
        }
    }
}
