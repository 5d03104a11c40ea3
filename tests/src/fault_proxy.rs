//! A fault-injecting TCP proxy for tests: what a network namespace cannot
//! express, or a test wants without root. Every connection to the proxy is
//! relayed to the target, and the link can be made slow (a delay each way),
//! one half of it stalled (bytes held, the connection left open), or cut
//! silently (both halves held: no FIN, no RST, as when a cable is pulled).
//! Held bytes flow again on [`FaultProxy::heal`], as TCP retransmits them
//! once a partition ends. Connections accepted during a cut reach the
//! target only after the heal.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep_until};

/// One direction of the relayed connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// From the proxy's clients to the target.
    ToTarget,
    /// From the target back to the clients.
    ToClient,
}

/// The faults in force, for every connection at once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Faults {
    /// Added to every chunk's way, in each direction.
    delay: Duration,
    to_target_held: bool,
    to_client_held: bool,
}

impl Faults {
    fn held(&self, direction: Direction) -> bool {
        match direction {
            Direction::ToTarget => self.to_target_held,
            Direction::ToClient => self.to_client_held,
        }
    }
}

/// A running proxy; it stops when dropped.
#[derive(Debug)]
pub struct FaultProxy {
    addr: SocketAddr,
    faults: watch::Sender<Faults>,
    accepting: JoinHandle<()>,
}

impl FaultProxy {
    /// Listens on a free port of 127.0.0.1 and relays to `target`.
    pub async fn start(target: SocketAddr) -> std::io::Result<FaultProxy> {
        FaultProxy::start_on(SocketAddr::from(([127, 0, 0, 1], 0)), target).await
    }

    /// Listens on `bind` (port 0: a free one) and relays to `target`.
    pub async fn start_on(bind: SocketAddr, target: SocketAddr) -> std::io::Result<FaultProxy> {
        let listener = TcpListener::bind(bind).await?;
        let addr = listener.local_addr()?;
        let (faults, watching) = watch::channel(Faults::default());
        let accepting = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(relay(client, target, watching.clone()));
            }
        });
        Ok(FaultProxy {
            addr,
            faults,
            accepting,
        })
    }

    /// `http://` and the proxy's address: a base URL for clients.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A slow link: every chunk arrives `delay` after it was sent, in each
    /// direction (latency, not a bandwidth limit).
    pub fn set_delay(&self, delay: Duration) {
        self.faults.send_modify(|faults| faults.delay = delay);
    }

    /// Holds what flows in `direction` (the other half keeps flowing).
    pub fn stall(&self, direction: Direction) {
        self.faults.send_modify(|faults| match direction {
            Direction::ToTarget => faults.to_target_held = true,
            Direction::ToClient => faults.to_client_held = true,
        });
    }

    /// A silent cut: nothing flows either way, and nobody is told.
    pub fn cut(&self) {
        self.stall(Direction::ToTarget);
        self.stall(Direction::ToClient);
    }

    /// Ends every stall and cut (the delay stays): held bytes flow on.
    pub fn heal(&self) {
        self.faults.send_modify(|faults| {
            faults.to_target_held = false;
            faults.to_client_held = false;
        });
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

/// Waits until `direction` flows.
async fn flowing(faults: &mut watch::Receiver<Faults>, direction: Direction) -> Option<Faults> {
    faults
        .wait_for(|faults| !faults.held(direction))
        .await
        .ok()
        .map(|faults| *faults)
}

async fn relay(client: TcpStream, target: SocketAddr, mut faults: watch::Receiver<Faults>) {
    // A connection made during a cut reaches the target only after it.
    if flowing(&mut faults, Direction::ToTarget).await.is_none() {
        return;
    }
    let Ok(upstream) = TcpStream::connect(target).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (upstream_read, upstream_write) = upstream.into_split();
    tokio::join!(
        pump(
            client_read,
            upstream_write,
            Direction::ToTarget,
            faults.clone()
        ),
        pump(upstream_read, client_write, Direction::ToClient, faults),
    );
}

/// Relays one direction: a reader stamps each chunk as it arrives, the
/// writer delivers it once its delay has passed and its direction flows.
async fn pump(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    direction: Direction,
    mut faults: watch::Receiver<Faults>,
) {
    let (chunks, mut arrived) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let reading = async move {
        let mut buffer = vec![0_u8; 16 * 1024];
        loop {
            match from.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if chunks.send((Instant::now(), buffer[..n].to_vec())).is_err() {
                        break;
                    }
                }
            }
        }
        // Dropping `chunks` ends the writer once it has delivered the rest.
    };
    let writing = async move {
        while let Some((read_at, chunk)) = arrived.recv().await {
            let Some(now_in_force) = flowing(&mut faults, direction).await else {
                return;
            };
            sleep_until(read_at + now_in_force.delay).await;
            // A cut that came during the delay holds the chunk too.
            if flowing(&mut faults, direction).await.is_none() {
                return;
            }
            if to.write_all(&chunk).await.is_err() {
                return;
            }
        }
        let _ = to.shutdown().await;
    };
    tokio::join!(reading, writing);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How long a held direction is watched for a byte that must not come.
    const HELD_FOR: Duration = Duration::from_millis(300);
    /// Far more than any relay on loopback takes.
    const ARRIVES_WITHIN: Duration = Duration::from_secs(5);

    /// A proxy to a listener of its own, one client connection through it
    /// and the target's end of that connection.
    async fn relayed() -> (FaultProxy, TcpStream, TcpStream) {
        let target = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let proxy = FaultProxy::start(target.local_addr().expect("addr"))
            .await
            .expect("proxy");
        let client = TcpStream::connect(proxy.addr).await.expect("connect");
        let (server, _) = tokio::time::timeout(ARRIVES_WITHIN, target.accept())
            .await
            .expect("relayed in time")
            .expect("accept");
        (proxy, client, server)
    }

    /// Reads exactly `expected.len()` bytes and compares them.
    async fn receives(stream: &mut TcpStream, expected: &[u8]) {
        let mut buffer = vec![0_u8; expected.len()];
        tokio::time::timeout(ARRIVES_WITHIN, stream.read_exact(&mut buffer))
            .await
            .expect("arrives in time")
            .expect("read");
        assert_eq!(buffer, expected);
    }

    /// Nothing arrives on `stream` for `HELD_FOR`, and the connection is
    /// not closed (a read neither returns bytes nor end of file).
    async fn holds(stream: &mut TcpStream) {
        let mut buffer = [0_u8; 64];
        let read = tokio::time::timeout(HELD_FOR, stream.read(&mut buffer)).await;
        assert!(read.is_err(), "a held direction delivered {read:?}");
    }

    /// One half stalled: what flows the held way is kept (the connection
    /// stays open, nothing is closed or reset) while the other way flows
    /// on, and everything held arrives, in order, once healed.
    #[tokio::test]
    async fn a_stalled_direction_holds_its_bytes_while_the_other_flows() {
        for held in [Direction::ToClient, Direction::ToTarget] {
            let (proxy, mut client, mut server) = relayed().await;
            proxy.stall(held);
            client.write_all(b"ping 1").await.expect("client write");
            server.write_all(b"pong 1").await.expect("server write");
            let (flowing_end, held_end) = match held {
                Direction::ToClient => (&mut server, &mut client),
                Direction::ToTarget => (&mut client, &mut server),
            };
            let (flowing_bytes, held_bytes): (&[u8], &[u8]) = match held {
                Direction::ToClient => (b"ping 1", b"pong 1"),
                Direction::ToTarget => (b"pong 1", b"ping 1"),
            };
            receives(flowing_end, flowing_bytes).await;
            holds(held_end).await;
            // More sent the held way while stalled joins the queue.
            let more: &[u8] = b" and 2";
            match held {
                Direction::ToClient => server.write_all(more).await.expect("write"),
                Direction::ToTarget => client.write_all(more).await.expect("write"),
            }
            let held_end = match held {
                Direction::ToClient => &mut client,
                Direction::ToTarget => &mut server,
            };
            holds(held_end).await;
            proxy.heal();
            receives(held_end, &[held_bytes, more].concat()).await;
        }
    }

    /// A connection opened while the target's answers are held reaches
    /// the target (a handshake is sent) but hears nothing back until the
    /// heal: the server never answers it, as over a half-open link.
    #[tokio::test]
    async fn a_connection_opened_during_a_stall_toward_the_client_is_never_answered() {
        let target = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let proxy = FaultProxy::start(target.local_addr().expect("addr"))
            .await
            .expect("proxy");
        proxy.stall(Direction::ToClient);
        let mut client = TcpStream::connect(proxy.addr).await.expect("connect");
        let (mut server, _) = tokio::time::timeout(ARRIVES_WITHIN, target.accept())
            .await
            .expect("relayed in time")
            .expect("accept");
        client.write_all(b"GET / HTTP/1.1").await.expect("write");
        receives(&mut server, b"GET / HTTP/1.1").await;
        server.write_all(b"HTTP/1.1 101").await.expect("write");
        holds(&mut client).await;
        proxy.heal();
        receives(&mut client, b"HTTP/1.1 101").await;
    }
}
