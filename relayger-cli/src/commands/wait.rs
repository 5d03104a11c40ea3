//! `send … --ask --wait [SECONDS]`: after sending, wait on the identity
//! socket for the question's reply (with a slow poll in case the socket is
//! unavailable or a signal is lost) and print it.

use std::time::Duration;

use relayger_core::wire::MessageEnvelope;
use relayger_worker::{Client, ClientError, SignalSocket, ThreadQuery};
use tokio::time::{Instant, sleep, sleep_until};

use crate::error::CliError;
use crate::human;
use crate::output::Outcome;

/// How often the thread is read when no signal comes.
const POLL_INTERVAL: Duration = Duration::from_secs(5);
/// Thread pages read per look (the reply is normally on the first).
const PAGE_LIMIT: u32 = 100;
const PAGE_BYTES: u32 = 65_536;

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
    /// someone else; an error with code `timeout` when none came in time.
    pub(super) async fn wait_for_reply(
        mut self,
        client: &Client,
        question: &MessageEnvelope,
    ) -> Result<Outcome, CliError> {
        let deadline = Instant::now() + self.timeout;
        // The socket subscribed before the question was sent, so a reply
        // committed after it signals: the first look waits for that signal
        // (or the poll). Without a socket, look at once.
        let mut look = self.socket.is_none();
        loop {
            if look {
                match find_reply(client, question).await {
                    Ok(Some(reply)) => {
                        let opened = client.open_message(reply).await;
                        let line = format!(
                            "sent #{} ({}); reply:\n{}",
                            question.seq,
                            question.message_id,
                            human::message(&opened)
                        );
                        return Ok(Outcome::new(&opened, line));
                    }
                    Ok(None) => {}
                    // A server restarting while we wait: look again later.
                    Err(err) if err.is_transient() => {}
                    Err(err) => return Err(err.into()),
                }
            }
            look = true;
            tokio::select! {
                _ = sleep_until(deadline) => return Err(no_reply(question, self.timeout)),
                signal = next_signal(&mut self.socket) => {
                    if signal.is_err() {
                        self.socket = None;
                    }
                }
                _ = sleep(POLL_INTERVAL) => {}
            }
        }
    }
}

/// The error when no reply came within `timeout`.
pub(crate) fn no_reply(question: &MessageEnvelope, timeout: Duration) -> CliError {
    CliError::with_code(
        "timeout",
        format!(
            "no reply to {} within {} s (the question was sent)",
            question.message_id,
            timeout.as_secs()
        ),
    )
}

/// The next signal, or never when there is no socket.
async fn next_signal(socket: &mut Option<SignalSocket>) -> Result<(), ClientError> {
    match socket {
        Some(socket) => socket.next_signal().await.map(drop),
        None => std::future::pending().await,
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
