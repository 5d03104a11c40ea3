//! The senders: each asks its share of the questions, one after another,
//! through the client library. A question's id is chosen here, so a send
//! retried across a server or PostgreSQL restart is idempotent on the
//! server instead of a second question.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use relayger_core::wire::SendRequest;
use relayger_worker::Client;
use tokio::task::JoinHandle;
use uuid::Uuid;

use super::rng::SplitMix64;
use super::setup::{self, Cast};

/// How long one question may keep failing transiently before the soak
/// gives up on it.
const SEND_PATIENCE: Duration = Duration::from_secs(120);

#[derive(Debug, Clone)]
pub(crate) struct Question {
    pub(crate) id: Uuid,
    pub(crate) text: String,
    pub(crate) sender: usize,
}

/// `count` questions spread over `senders`, each text unique.
pub(crate) fn questions(count: usize, senders: usize, seed: u64) -> Vec<Question> {
    let mut rng = SplitMix64::new(seed ^ 0x5EED);
    (0..count)
        .map(|index| Question {
            id: Uuid::now_v7(),
            text: format!(
                "soak question {index} (seed {seed}, salt {})",
                rng.below(1_000_000)
            ),
            sender: index % senders.max(1),
        })
        .collect()
}

#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct SendTally {
    pub(crate) sent: u64,
    pub(crate) retries: u64,
}

/// The running senders; dropping it stops them.
#[derive(Debug)]
pub(crate) struct Sending {
    tasks: Vec<JoinHandle<anyhow::Result<SendTally>>>,
}

impl Sending {
    pub(crate) fn is_finished(&self) -> bool {
        self.tasks.iter().all(JoinHandle::is_finished)
    }

    /// Waits for every sender; the first failure is the error.
    pub(crate) async fn join(&mut self) -> anyhow::Result<SendTally> {
        let mut total = SendTally::default();
        for task in self.tasks.drain(..) {
            let tally = task.await.context("sender task")??;
            total.sent += tally.sent;
            total.retries += tally.retries;
        }
        Ok(total)
    }
}

impl Drop for Sending {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Every sender asks through `homes[index % homes.len()]`'s profiles (each
/// home's profiles may point at another server instance), waiting `pace`
/// after each question (zero: as fast as the server answers).
pub(crate) fn start(
    homes: &[PathBuf],
    cast: &Cast,
    questions: &[Question],
    pace: Duration,
) -> anyhow::Result<Sending> {
    let agent = cast.agent.number.parse().context("agent number")?;
    let mut tasks = Vec::new();
    for (index, sender) in cast.senders.iter().enumerate() {
        let client = setup::client(&homes[index % homes.len()], &sender.profile)?;
        let mine: Vec<Question> = questions
            .iter()
            .filter(|q| q.sender == index)
            .cloned()
            .collect();
        let agent = relayger_core::ids::IdentityNumber::clone(&agent);
        tasks.push(tokio::spawn(async move {
            let mut tally = SendTally::default();
            for question in mine {
                tally.retries += ask(&client, &agent, &question).await?;
                tally.sent += 1;
                if !pace.is_zero() {
                    tokio::time::sleep(pace).await;
                }
            }
            Ok(tally)
        }));
    }
    Ok(Sending { tasks })
}

/// Sends one question, again while the server is unreachable; the number
/// of retries it took.
async fn ask(
    client: &Client,
    agent: &relayger_core::ids::IdentityNumber,
    question: &Question,
) -> anyhow::Result<u64> {
    let request = SendRequest {
        to: Some(agent.clone()),
        message_id: Some(question.id),
        text: Some(question.text.clone()),
        ask: true,
        ..SendRequest::default()
    };
    let give_up = tokio::time::Instant::now() + SEND_PATIENCE;
    let mut retries = 0;
    let mut delay = Duration::from_millis(50);
    loop {
        match client.send(&request).await {
            Ok(sent) if sent.message_id == question.id => return Ok(retries),
            Ok(sent) => bail!(
                "sent {} but the server stored {}",
                question.id,
                sent.message_id
            ),
            Err(err) if err.is_transient() && tokio::time::Instant::now() < give_up => {
                retries += 1;
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(1));
            }
            Err(err) => bail!("send {}: {err}", question.id),
        }
    }
}
