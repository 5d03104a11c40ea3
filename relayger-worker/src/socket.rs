//! The server's WebSockets: `GET /v1/socket` (the identity's mailbox) and
//! `GET /v1/runtimes/{id}/socket`. They carry only content-free
//! `{"event":"inbox_changed"}` frames that say "look again"; what changed
//! is then read over HTTP, with the caller's permissions.

use std::fmt;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use relayger_core::wire::SocketSignal;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::client::{Client, ClientError, error_from};

/// How long opening a socket (TCP, TLS and the upgrade) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The server pings every 20 s; a socket silent for this long is dead
/// (a half-open TCP connection after the server's machine vanished).
const SILENCE_TIMEOUT: Duration = Duration::from_secs(60);

/// An open signal socket. Read it with [`SignalSocket::next_signal`].
pub struct SignalSocket {
    stream: WebSocketStream<MaybeTlsStream<TcpStream>>,
}

impl fmt::Debug for SignalSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SignalSocket").finish_non_exhaustive()
    }
}

impl Client {
    /// `GET /v1/socket`: `inbox_changed` whenever something arrives in a
    /// room this identity can read (or a contact request comes in). Open it
    /// before the action whose answer you wait for, so no signal is missed.
    ///
    /// ```no_run
    /// # async fn example(client: relayger_worker::Client) -> Result<(), relayger_worker::ClientError> {
    /// let mut socket = client.socket().await?;
    /// socket.next_signal().await?;
    /// let inbox = client.inbox().await?; // what changed
    /// # Ok(())
    /// # }
    /// ```
    pub async fn socket(&self) -> Result<SignalSocket, ClientError> {
        SignalSocket::connect(self, "/v1/socket").await
    }
}

impl SignalSocket {
    /// Opens the socket at `path` with the client's bearer token.
    pub(crate) async fn connect(client: &Client, path: &str) -> Result<SignalSocket, ClientError> {
        client.check_transport()?;
        let url = websocket_url(&client.url(path))?;
        let mut request = url
            .into_client_request()
            .map_err(|err| ClientError::Socket(format!("bad socket URL: {err}")))?;
        if let Some(token) = &client.token {
            let value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
                ClientError::InvalidArgument("the token is not a valid header value".into())
            })?;
            request.headers_mut().insert("authorization", value);
        }
        let connect = tokio_tungstenite::connect_async(request);
        let (stream, _) = match tokio::time::timeout(CONNECT_TIMEOUT, connect).await {
            Err(_) => {
                return Err(ClientError::Socket(format!(
                    "no connection within {} s",
                    CONNECT_TIMEOUT.as_secs()
                )));
            }
            Ok(Err(tokio_tungstenite::tungstenite::Error::Http(response))) => {
                // The server refused the upgrade with its error envelope.
                let status = response.status().as_u16();
                let body = response.body().as_deref().unwrap_or_default();
                return Err(error_from(status, body));
            }
            Ok(Err(err)) => return Err(ClientError::Socket(err.to_string())),
            Ok(Ok(connected)) => connected,
        };
        Ok(SignalSocket { stream })
    }

    /// Waits for the next signal. Pings are answered on the way. An error
    /// means the socket is gone (closed by the server, network failure,
    /// revoked token): open a new one, and look again over HTTP in case a
    /// signal was lost in between.
    pub async fn next_signal(&mut self) -> Result<SocketSignal, ClientError> {
        loop {
            let frame = tokio::time::timeout(SILENCE_TIMEOUT, self.stream.next())
                .await
                .map_err(|_| ClientError::Socket("the server went silent".into()))?;
            match frame {
                None => return Err(ClientError::Socket("closed".into())),
                Some(Err(err)) => return Err(ClientError::Socket(err.to_string())),
                Some(Ok(Message::Text(text))) => {
                    // Any text frame means "look again"; an event this
                    // version does not know is treated the same way.
                    let signal =
                        serde_json::from_str(text.as_str()).unwrap_or(SocketSignal::InboxChanged);
                    return Ok(signal);
                }
                Some(Ok(Message::Close(frame))) => {
                    let reason = frame
                        .map(|frame| frame.reason.to_string())
                        .filter(|reason| !reason.is_empty())
                        .unwrap_or_else(|| "closed by the server".into());
                    return Err(ClientError::Socket(reason));
                }
                // Pings are answered by the stream itself on the next read.
                Some(Ok(_)) => {}
            }
        }
    }

    /// Closes the socket politely (dropping it works too).
    pub async fn close(mut self) {
        let _ = self.stream.close(None).await;
        let _ = self.stream.flush().await;
    }
}

/// `http://…` → `ws://…`, `https://…` → `wss://…`.
fn websocket_url(http_url: &str) -> Result<String, ClientError> {
    if let Some(rest) = http_url.strip_prefix("http://") {
        Ok(format!("ws://{rest}"))
    } else if let Some(rest) = http_url.strip_prefix("https://") {
        Ok(format!("wss://{rest}"))
    } else {
        Err(ClientError::InvalidArgument(format!(
            "the server URL `{http_url}` is not http:// or https://"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn websocket_urls() {
        let table = [
            (
                "http://127.0.0.1:7070/v1/socket",
                "ws://127.0.0.1:7070/v1/socket",
            ),
            (
                "https://relay.example/v1/socket",
                "wss://relay.example/v1/socket",
            ),
        ];
        for (http, ws) in table {
            assert_eq!(websocket_url(http).expect("url"), ws);
        }
        assert!(websocket_url("ftp://x/v1/socket").is_err());
    }
}
