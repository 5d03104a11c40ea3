//! `--a2a URL`: each question's text goes to an outside A2A agent the
//! operator chose, and its answer comes back as the reply.
//!
//! Per job: the agent's card is read (the URL is its base URL or the card's
//! own URL) and its JSON-RPC interface taken; the question's text is sent
//! with `SendStreamingMessage` when the card says it streams, else with
//! `SendMessage` (`returnImmediately`) and then `GetTask` with backoff,
//! until the remote task ends, the handler's time runs out or the job is
//! cancelled (lease loss, our question canceled, shutdown). A remote task
//! still running then gets a `CancelTask` (best effort, bounded) before the
//! handler returns. How a remote end becomes our result is [`end`].
//!
//! What the outside agent learns: the question's text and nothing else
//! (no sender, no room, no ids of ours); a sealed question is never
//! forwarded. The bearer token is the operator's (`--a2a-token-env`), sent
//! only to URLs that pass the transport rule and never across a redirect.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{HandlerConfigError, StopReason, stop_signal};
use crate::{Handler, HandlerError, HandlerFuture, HandlerInput, HandlerOutput};

mod end;
mod exchange;
mod rpc;
mod sse;
#[cfg(test)]
mod tests;

use exchange::Exchange;
use rpc::{Remote, card_url};

/// How long a `CancelTask` for an abandoned remote task may take.
const CANCEL_TIMEOUT: Duration = Duration::from_secs(3);

/// The handler of `worker run --a2a URL`: forwards each question to one
/// outside A2A agent. Its bearer token (if any) is never printed, not even
/// by `Debug`.
#[derive(Debug, Clone)]
pub struct A2aHandler {
    card_url: String,
    remote: Remote,
}

impl A2aHandler {
    /// The agent at `url`: its base URL (the card is read from
    /// `/.well-known/agent-card.json` under it) or its card's URL (ending in
    /// `.json`). `https://`, or `http://` only to this machine.
    pub fn new(url: &str) -> Result<A2aHandler, HandlerConfigError> {
        let problem = |problem: &str| HandlerConfigError::AgentUrl {
            url: url.to_owned(),
            problem: problem.to_owned(),
        };
        let parsed = reqwest::Url::parse(url.trim()).map_err(|_| problem("not a URL"))?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host().is_none() {
            return Err(problem("not an http:// or https:// URL"));
        }
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err(problem("credentials in the URL: use --a2a-token-env"));
        }
        relayger_core::transport::check_token_transport(url)
            .map_err(|_| problem("plain http:// is allowed only to this machine: use https://"))?;
        Ok(A2aHandler {
            card_url: card_url(url),
            remote: Remote::new(None),
        })
    }

    /// Sends `token` as the bearer with every request to the agent.
    pub fn with_bearer_token(mut self, token: String) -> A2aHandler {
        self.remote = Remote::new(Some(token));
        self
    }

    /// Where the agent's card is read from.
    pub fn card_url(&self) -> &str {
        &self.card_url
    }

    async fn answer(
        &self,
        text: String,
        timeout_ms: u64,
        cancel: CancellationToken,
    ) -> Result<HandlerOutput, HandlerError> {
        let mut exchange = Exchange::new(&self.remote, &self.card_url);
        let ended = tokio::select! {
            ended = exchange.run(&text) => Ok(ended),
            stop = stop_signal(timeout_ms, &cancel) => Err(stop),
        };
        match ended {
            Ok(Ok(end)) => end::result(end),
            Ok(Err(err)) => {
                exchange.cancel_remote(CANCEL_TIMEOUT).await;
                Err(HandlerError::new(err.reason()))
            }
            Err(stop) => {
                exchange.cancel_remote(CANCEL_TIMEOUT).await;
                Err(match stop {
                    StopReason::Timeout => HandlerError::new(stop.as_str()),
                    StopReason::Cancelled => HandlerError::cancelled(),
                })
            }
        }
    }
}

impl Handler for A2aHandler {
    fn handle(&self, input: HandlerInput) -> HandlerFuture<'_> {
        Box::pin(async move {
            // Its plaintext never leaves us, like the builtins'.
            if input.message.sealed.is_some() {
                return Ok(HandlerOutput::skip("sealed"));
            }
            let Some(text) = input.message.text.filter(|text| !text.is_empty()) else {
                return Ok(HandlerOutput::skip("no_text"));
            };
            if input.cancel.is_cancelled() {
                return Err(HandlerError::cancelled());
            }
            self.answer(text, input.timeout_ms, input.cancel).await
        })
    }

    /// It ends the remote task (a bounded `CancelTask`) before returning.
    fn stops_itself(&self) -> bool {
        true
    }
}
