//! The server's WebSockets: `GET /v1/socket` (the identity's mailbox) and
//! `GET /v1/runtimes/{id}/socket`. They carry only content-free
//! `{"event":"inbox_changed"}` frames that say "look again"; what changed
//! is then read over HTTP, with the caller's permissions.

use std::collections::VecDeque;
use std::fmt;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use relayger_core::wire::SocketSignal;
use tokio::net::TcpStream;
use tokio::time::{Instant, sleep_until, timeout_at};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::client::{Client, ClientError, error_from};

/// How long opening a socket (TCP, TLS and the upgrade) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How the client tells a live socket from a half-open one (the link went
/// down without a FIN or RST, so no read ever fails): it pings every
/// `ping_every`, and a socket that has sent nothing — no pong, signal or
/// ping of the server's — for `silence` is dead, and so is one whose ping
/// has gone unanswered for `silence - ping_every`. Frames the server sent
/// before its half stalled can arrive late (TCP retransmits what a cut
/// held once the link is back): they prove nothing about the connection
/// now, and the first ping after the stall began, sent within
/// `ping_every`, still bounds the notice by the silence.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Liveness {
    ping_every: Duration,
    silence: Duration,
}

/// A healthy server answers a ping within moments, so a few missed pongs
/// in a row mean the link is gone: noticed within 15 s, not after the
/// server's own 20 s pings have been missed for a minute.
impl Liveness {
    /// How long a ping may go unanswered (10 s).
    fn pong_deadline(self) -> Duration {
        self.silence.saturating_sub(self.ping_every)
    }
}

const LIVENESS: Liveness = Liveness {
    ping_every: Duration::from_secs(5),
    silence: Duration::from_secs(15),
};

/// An open signal socket. Read it with [`SignalSocket::next_signal`].
pub struct SignalSocket {
    stream: WebSocketStream<MaybeTlsStream<TcpStream>>,
    liveness: Liveness,
    /// When the server was last heard from.
    heard: Instant,
    next_ping: Instant,
    /// The pings not answered yet, oldest first: (number, sent at).
    unanswered: VecDeque<(u64, Instant)>,
    pings: u64,
}

/// What woke [`SignalSocket::next_signal`].
enum Woken {
    Frame(Option<Result<Message, tokio_tungstenite::tungstenite::Error>>),
    PingDue,
    Silent,
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
        let now = Instant::now();
        Ok(SignalSocket {
            stream,
            liveness: LIVENESS,
            heard: now,
            next_ping: now + LIVENESS.ping_every,
            unanswered: VecDeque::new(),
            pings: 0,
        })
    }

    #[cfg(test)]
    fn with_liveness(mut self, liveness: Liveness) -> SignalSocket {
        self.liveness = liveness;
        self.next_ping = Instant::now() + liveness.ping_every;
        self
    }

    /// Waits for the next signal. Pings are answered on the way, and sent
    /// every few seconds: a socket whose server answers nothing for 15 s
    /// is dead (a half-open connection). An error means the socket is gone
    /// (closed by the server, network failure, silence, revoked token):
    /// open a new one, and look again over HTTP in case a signal was lost
    /// in between.
    pub async fn next_signal(&mut self) -> Result<SocketSignal, ClientError> {
        loop {
            let silent_at = self.dead_at();
            let woken = tokio::select! {
                frame = self.stream.next() => Woken::Frame(frame),
                _ = sleep_until(self.next_ping) => Woken::PingDue,
                _ = sleep_until(silent_at) => Woken::Silent,
            };
            let frame = match woken {
                Woken::Frame(frame) => frame,
                Woken::PingDue => {
                    let now = Instant::now();
                    self.next_ping = now + self.liveness.ping_every;
                    self.pings += 1;
                    self.unanswered.push_back((self.pings, now));
                    // A send into a stalled link is bounded by the same
                    // deadline as the silence.
                    let number = self.pings.to_string().into_bytes();
                    let ping = self.stream.send(Message::Ping(number.into()));
                    match timeout_at(silent_at, ping).await {
                        Ok(Ok(())) | Err(_) => continue,
                        Ok(Err(err)) => return Err(ClientError::Socket(err.to_string())),
                    }
                }
                Woken::Silent => {
                    if Instant::now() >= self.heard + self.liveness.silence {
                        return Err(ClientError::Socket(format!(
                            "the server answered nothing for {} ms",
                            self.liveness.silence.as_millis()
                        )));
                    }
                    return Err(ClientError::Socket(format!(
                        "the server answered no ping for {} ms",
                        self.liveness.pong_deadline().as_millis()
                    )));
                }
            };
            self.heard = Instant::now();
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
                // A pong answers its ping and every one before it.
                Some(Ok(Message::Pong(data))) => {
                    let number = std::str::from_utf8(&data)
                        .ok()
                        .and_then(|text| text.parse::<u64>().ok());
                    if let Some(number) = number {
                        while self.unanswered.front().is_some_and(|(n, _)| *n <= number) {
                            self.unanswered.pop_front();
                        }
                    }
                }
                // Pings are answered by the stream itself on the next read.
                Some(Ok(_)) => {}
            }
        }
    }

    /// When the socket counts as dead if nothing changes: the silence
    /// after the server was last heard, or the oldest unanswered ping's
    /// deadline, whichever comes first.
    fn dead_at(&self) -> Instant {
        let silent_at = self.heard + self.liveness.silence;
        match self.unanswered.front() {
            Some((_, sent)) => silent_at.min(*sent + self.liveness.pong_deadline()),
            None => silent_at,
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

    const QUICK: Liveness = Liveness {
        ping_every: Duration::from_millis(100),
        silence: Duration::from_millis(600),
    };

    /// A WebSocket server on a real port whose one connection is handed to
    /// `serve`, and a client socket connected to it with quick liveness.
    async fn connected_to<F, Fut>(serve: F) -> SignalSocket
    where
        F: FnOnce(WebSocketStream<TcpStream>) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send,
    {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.expect("accept");
            let stream = tokio_tungstenite::accept_async(tcp).await.expect("upgrade");
            serve(stream).await;
        });
        let client = Client::new(format!("http://127.0.0.1:{port}"), "token");
        SignalSocket::connect(&client, "/v1/socket")
            .await
            .expect("connect")
            .with_liveness(QUICK)
    }

    /// A half-open connection: the server's side neither reads nor writes
    /// (as when the link went down without a FIN or RST). Unanswered pings
    /// end the socket within the silence, not a minute later.
    #[tokio::test]
    async fn a_socket_whose_server_answers_nothing_is_dead_within_the_silence() {
        let (held_tx, held_rx) = tokio::sync::oneshot::channel::<()>();
        // From before the connect: the silence counts from the handshake's
        // answer, which comes before `connected_to` returns.
        let started = Instant::now();
        let mut socket = connected_to(|stream| async move {
            // Hold the connection open, unread, until the test ends.
            let _stream = stream;
            let _ = held_rx.await;
        })
        .await;
        let ended = tokio::time::timeout(Duration::from_secs(10), socket.next_signal())
            .await
            .expect("a silent socket is noticed");
        let err = ended.expect_err("the socket is dead");
        assert!(err.to_string().contains("answered nothing"), "{err}");
        let noticed = started.elapsed();
        assert!(noticed >= QUICK.silence, "{noticed:?}");
        assert!(noticed < QUICK.silence * 3, "{noticed:?}");
        drop(held_tx);
    }

    /// The server's half stalls right after the handshake (no pong gets
    /// through), but a frame it sent before the stall arrives late, as TCP
    /// retransmits what a cut held once the link is back. The late frame
    /// proves nothing about the connection now: the socket is still dead
    /// within the bound (the soak's 20 s for a 15 s silence, here 800 ms).
    #[tokio::test]
    async fn a_socket_whose_pings_go_unanswered_is_dead_though_a_late_frame_arrives() {
        let (held_tx, held_rx) = tokio::sync::oneshot::channel::<()>();
        let stalled = Instant::now();
        let mut socket = connected_to(|mut stream| async move {
            // Never read: the client's pings are not answered.
            sleep_until(Instant::now() + QUICK.silence / 2).await;
            let frame = r#"{"event":"inbox_changed"}"#;
            stream
                .send(Message::Text(frame.into()))
                .await
                .expect("send");
            let _ = held_rx.await;
        })
        .await;
        let limit = Duration::from_secs(10);
        let late = tokio::time::timeout(limit, socket.next_signal()).await;
        assert_eq!(
            late.expect("the late frame").expect("a signal"),
            SocketSignal::InboxChanged
        );
        let ended = tokio::time::timeout(limit, socket.next_signal())
            .await
            .expect("a stalled socket is noticed");
        let err = ended.expect_err("the socket is dead");
        assert!(err.to_string().contains("answered no ping"), "{err}");
        let noticed = stalled.elapsed();
        assert!(noticed < QUICK.silence * 4 / 3, "{noticed:?}");
        drop(held_tx);
    }

    /// A server that answers pings but has nothing to say for longer than
    /// the silence keeps the socket: the client's pings are answered.
    #[tokio::test]
    async fn pongs_keep_a_quiet_socket_alive() {
        let mut socket = connected_to(|mut stream| async move {
            let quiet_until = Instant::now() + QUICK.silence * 3;
            // Reading answers the client's pings.
            loop {
                tokio::select! {
                    frame = stream.next() => if frame.is_none() { return },
                    _ = sleep_until(quiet_until) => break,
                }
            }
            let frame = r#"{"event":"inbox_changed"}"#;
            stream
                .send(Message::Text(frame.into()))
                .await
                .expect("send");
            while stream.next().await.is_some() {}
        })
        .await;
        let signal = tokio::time::timeout(Duration::from_secs(10), socket.next_signal())
            .await
            .expect("a signal in time");
        assert_eq!(signal.expect("alive"), SocketSignal::InboxChanged);
    }
}
