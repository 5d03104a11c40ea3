//! The remote agent over A2A's JSON-RPC binding: its card, one call, one
//! stream. Every body read is capped; the bearer token goes only to URLs
//! that pass the transport rule, and never across a redirect.

use std::time::Duration;

use relayger_core::a2a::{
    A2aError, A2aMethod, AGENT_CARD_PATH, JsonRpcCall, JsonRpcResponse, PROTOCOL_VERSION,
    VERSION_HEADER,
};
use relayger_core::transport::check_token_transport;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::sse::{SseDecoder, SseError, SseEvent};
/// The largest card, JSON-RPC response or streamed event read.
pub(super) const MAX_BODY_BYTES: usize = 1024 * 1024;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a call to the remote agent failed. Its [`RemoteError::reason`] is
/// the attempt's failure reason: a code and at most a short detail that is
/// ours, never the remote agent's free text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum RemoteError {
    /// Not reached, or the connection broke.
    Unavailable,
    /// An HTTP status other than 2xx.
    Status(u16),
    /// A JSON-RPC error object: its code.
    Rpc(i64),
    /// A body that is not what A2A says (`what` is ours).
    Invalid(&'static str),
    /// A body past [`MAX_BODY_BYTES`].
    TooLarge,
    /// The card names no usable JSON-RPC interface, or one the token may
    /// not travel to.
    Card(&'static str),
}

impl RemoteError {
    pub(super) fn reason(&self) -> String {
        match self {
            RemoteError::Unavailable => "a2a_unavailable".to_owned(),
            RemoteError::Status(status) => format!("a2a_http_status: {status}"),
            RemoteError::Rpc(code) => match A2aError::from_code(*code) {
                Some(error) => format!("a2a_error: {}", error.reason().to_ascii_lowercase()),
                None => format!("a2a_error: {code}"),
            },
            RemoteError::Invalid(what) => format!("a2a_invalid_response: {what}"),
            RemoteError::TooLarge => "a2a_response_too_large".to_owned(),
            RemoteError::Card(what) => format!("a2a_card: {what}"),
        }
    }
}

/// The URL of the card for what the operator gave: a card URL as it is,
/// else the well-known path under the base URL.
pub(super) fn card_url(agent_url: &str) -> String {
    let trimmed = agent_url.trim();
    let path_end = trimmed.split(['?', '#']).next().unwrap_or_default();
    if path_end.ends_with(".json") {
        trimmed.to_owned()
    } else {
        format!("{}/{AGENT_CARD_PATH}", trimmed.trim_end_matches('/'))
    }
}

/// An HTTP client for one remote agent with the operator's token.
#[derive(Clone)]
pub(super) struct Remote {
    http: reqwest::Client,
    token: Option<String>,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remote")
            .field("token", &self.token.as_ref().map(|_| "<hidden>"))
            .finish_non_exhaustive()
    }
}

impl Remote {
    pub(super) fn new(token: Option<String>) -> Remote {
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            // A redirect could carry the bearer elsewhere.
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("relayger/", env!("CARGO_PKG_VERSION")))
            .build()
            .unwrap_or_default();
        Remote { http, token }
    }

    fn authorized(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }

    /// GET the card at `url` (with the bearer: a card may be private, as
    /// Relayger's own are).
    pub(super) async fn card<T: DeserializeOwned>(&self, url: &str) -> Result<T, RemoteError> {
        check_url(url)?;
        let response = self
            .authorized(self.http.get(url))
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|_| RemoteError::Unavailable)?;
        let body = read_capped(success(response)?).await?;
        serde_json::from_slice(&body).map_err(|_| RemoteError::Invalid("card"))
    }

    fn post(
        &self,
        url: &str,
        method: A2aMethod,
        params: &impl Serialize,
    ) -> Result<reqwest::RequestBuilder, RemoteError> {
        let params = serde_json::to_value(params).map_err(|_| RemoteError::Invalid("params"))?;
        let id = Value::String(uuid::Uuid::new_v4().to_string());
        let call = JsonRpcCall::new(id, method, params);
        Ok(self
            .authorized(self.http.post(url))
            .header(VERSION_HEADER, PROTOCOL_VERSION)
            .json(&call))
    }

    /// One JSON-RPC call: its `result`.
    pub(super) async fn call<T: DeserializeOwned>(
        &self,
        url: &str,
        method: A2aMethod,
        params: &impl Serialize,
    ) -> Result<T, RemoteError> {
        check_url(url)?;
        let response = self
            .post(url, method, params)?
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|_| RemoteError::Unavailable)?;
        let body = read_capped(success(response)?).await?;
        rpc_result(&body)
    }

    /// A streaming JSON-RPC call: its responses' `result`s, one by one.
    /// A server that answers with plain JSON instead (an error before the
    /// stream starts) yields that one response.
    pub(super) async fn stream(
        &self,
        url: &str,
        method: A2aMethod,
        params: &impl Serialize,
    ) -> Result<RpcStream, RemoteError> {
        check_url(url)?;
        let response = self
            .post(url, method, params)?
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .send()
            .await
            .map_err(|_| RemoteError::Unavailable)?;
        let response = success(response)?;
        let is_stream = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.contains("text/event-stream"));
        Ok(RpcStream {
            response: Some(response),
            decoder: is_stream.then(|| SseDecoder::new(MAX_BODY_BYTES)),
            ready: Vec::new(),
        })
    }
}

/// The responses of a streaming call, in order.
pub(super) struct RpcStream {
    response: Option<reqwest::Response>,
    /// `None` for a plain JSON body.
    decoder: Option<SseDecoder>,
    ready: Vec<SseEvent>,
}

impl RpcStream {
    /// The next response's `result`, or `None` once the stream ended.
    pub(super) async fn next<T: DeserializeOwned>(&mut self) -> Option<Result<T, RemoteError>> {
        loop {
            if !self.ready.is_empty() {
                let event = self.ready.remove(0);
                return Some(rpc_result(event.data.as_bytes()));
            }
            let response = self.response.as_mut()?;
            let Some(decoder) = &mut self.decoder else {
                let response = self.response.take()?;
                return Some(match read_capped(response).await {
                    Ok(body) => rpc_result(&body),
                    Err(err) => Err(err),
                });
            };
            match response.chunk().await {
                Ok(Some(chunk)) => match decoder.push(&chunk) {
                    Ok(events) => self.ready = events,
                    Err(err) => {
                        self.response = None;
                        return Some(Err(match err {
                            SseError::TooLarge => RemoteError::TooLarge,
                            SseError::NotText => RemoteError::Invalid("stream"),
                        }));
                    }
                },
                Ok(None) => self.response = None,
                Err(_) => {
                    self.response = None;
                    return Some(Err(RemoteError::Unavailable));
                }
            }
        }
    }
}

fn check_url(url: &str) -> Result<(), RemoteError> {
    check_token_transport(url).map_err(|_| RemoteError::Card("insecure_url"))
}

fn success(response: reqwest::Response) -> Result<reqwest::Response, RemoteError> {
    let status = response.status();
    if status.is_success() {
        Ok(response)
    } else {
        Err(RemoteError::Status(status.as_u16()))
    }
}

async fn read_capped(mut response: reqwest::Response) -> Result<Vec<u8>, RemoteError> {
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|_| RemoteError::Unavailable)?
    {
        if body.len() + chunk.len() > MAX_BODY_BYTES {
            return Err(RemoteError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The `result` of a JSON-RPC response, or its error's code.
pub(super) fn rpc_result<T: DeserializeOwned>(body: &[u8]) -> Result<T, RemoteError> {
    let response: JsonRpcResponse<Value> =
        serde_json::from_slice(body).map_err(|_| RemoteError::Invalid("not_json_rpc"))?;
    if let Some(error) = response.error {
        return Err(RemoteError::Rpc(error.code));
    }
    let result = response.result.ok_or(RemoteError::Invalid("no_result"))?;
    serde_json::from_value(result).map_err(|_| RemoteError::Invalid("result"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn card_urls() {
        let table = [
            (
                "https://agent.example.com",
                "https://agent.example.com/.well-known/agent-card.json",
            ),
            (
                "https://agent.example.com/a2a/7/",
                "https://agent.example.com/a2a/7/.well-known/agent-card.json",
            ),
            (
                "https://agent.example.com/.well-known/agent-card.json",
                "https://agent.example.com/.well-known/agent-card.json",
            ),
            (
                "http://127.0.0.1:9/cards/bot.json?v=2",
                "http://127.0.0.1:9/cards/bot.json?v=2",
            ),
        ];
        for (given, card) in table {
            assert_eq!(card_url(given), card, "{given}");
        }
    }

    #[test]
    fn responses_become_results_or_codes() {
        let ok: Result<Value, _> = rpc_result(br#"{"jsonrpc":"2.0","id":"1","result":{"a":1}}"#);
        assert_eq!(ok, Ok(serde_json::json!({"a": 1})));
        let table: [(&[u8], RemoteError, &str); 5] = [
            (
                br#"{"jsonrpc":"2.0","id":"1","error":{"code":-32001,"message":"Task 'x' not found, said the remote"}}"#,
                RemoteError::Rpc(-32001),
                "a2a_error: task_not_found",
            ),
            (
                br#"{"jsonrpc":"2.0","id":"1","error":{"code":-31000,"message":"?"}}"#,
                RemoteError::Rpc(-31000),
                "a2a_error: -31000",
            ),
            (
                br#"{"jsonrpc":"2.0","id":"1","error":{"message":"no code"}}"#,
                RemoteError::Invalid("not_json_rpc"),
                "a2a_invalid_response: not_json_rpc",
            ),
            (
                br#"{"jsonrpc":"2.0","id":"1"}"#,
                RemoteError::Invalid("no_result"),
                "a2a_invalid_response: no_result",
            ),
            (
                b"<html>",
                RemoteError::Invalid("not_json_rpc"),
                "a2a_invalid_response: not_json_rpc",
            ),
        ];
        for (body, error, reason) in table {
            let got: Result<Value, _> = rpc_result(body);
            assert_eq!(got, Err(error.clone()), "{}", String::from_utf8_lossy(body));
            assert_eq!(error.reason(), reason);
        }
    }
}
