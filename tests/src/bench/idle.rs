//! P3: what an idle worker costs. The server keeps no per-client request
//! count, so the worker talks to the server through a small counting TCP
//! proxy that records every HTTP/1.1 request line it forwards.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use super::Bench;
use super::procs::{clock_ticks, cpu_ticks, rss_kib};
use super::setup::befriend;

#[derive(Debug)]
pub(crate) struct P3 {
    pub(crate) window_s: f64,
    pub(crate) requests: usize,
    pub(crate) requests_per_min: f64,
    /// The request lines seen in the window (method and path).
    pub(crate) request_lines: Vec<String>,
    pub(crate) cpu_s: f64,
    pub(crate) model_calls: u64,
    pub(crate) claims: u64,
    pub(crate) worker_rss_kib: u64,
}

/// P3: one `--builtin uppercase` worker with nothing to do for `idle`.
pub(crate) async fn p3(b: &Bench, idle: Duration) -> anyhow::Result<P3> {
    let proxy = CountingProxy::start(b.server.base_url()).await?;
    let agent = b
        .ids
        .register_at("p3-agent", true, &proxy.base_url())
        .await?;
    let asker = b.ids.register("p3-asker", false).await?;
    befriend(&asker, &agent).await?;
    let worker = super::procs::Worker::spawn(
        b.ids.home(),
        &agent.name,
        &["p3", "--builtin", "uppercase", "--from", "now"],
        &b.out.join("p3-worker.log"),
    )?;
    let runtime_id = worker
        .wait_started(Duration::from_secs(60))?
        .parse()
        .context("runtime id")?;
    // Let the start-up claim and socket settle before the window opens.
    tokio::time::sleep(Duration::from_secs(2)).await;
    eprintln!("bench: p3 idle window of {} s", idle.as_secs());
    let seen_before = proxy.seen();
    let cpu_before = cpu_ticks(worker.pid());
    let opened = Instant::now();
    tokio::time::sleep(idle).await;
    let cpu_after = cpu_ticks(worker.pid());
    let window_s = opened.elapsed().as_secs_f64();
    let request_lines: Vec<String> = proxy.lines()[seen_before..].to_vec();
    let worker_rss_kib = rss_kib(worker.pid())?;
    let stats = agent.client.runtimes().stats(runtime_id).await?;
    worker.stop();
    proxy.stop();
    let requests = request_lines.len();
    Ok(P3 {
        window_s,
        requests,
        requests_per_min: requests as f64 * 60.0 / window_s,
        request_lines,
        cpu_s: cpu_after.saturating_sub(cpu_before) as f64 / clock_ticks(),
        model_calls: stats.reported.model_calls,
        claims: stats.claims,
        worker_rss_kib,
    })
}

/// A TCP proxy that counts the HTTP requests passing through it.
#[derive(Debug)]
struct CountingProxy {
    addr: SocketAddr,
    lines: Arc<Mutex<Vec<String>>>,
    task: JoinHandle<()>,
}

impl CountingProxy {
    async fn start(upstream_url: &str) -> anyhow::Result<CountingProxy> {
        let upstream: SocketAddr = upstream_url
            .strip_prefix("http://")
            .ok_or_else(|| anyhow!("not an http URL: {upstream_url}"))?
            .trim_end_matches('/')
            .parse()
            .context("upstream address")?;
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let lines = Arc::new(Mutex::new(Vec::new()));
        let task = {
            let lines = Arc::clone(&lines);
            tokio::spawn(async move {
                while let Ok((client, _)) = listener.accept().await {
                    let lines = Arc::clone(&lines);
                    tokio::spawn(async move {
                        if let Ok(server) = TcpStream::connect(upstream).await {
                            let _ = forward(client, server, lines).await;
                        }
                    });
                }
            })
        };
        Ok(CountingProxy { addr, lines, task })
    }

    fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn seen(&self) -> usize {
        self.lines.lock().map(|lines| lines.len()).unwrap_or(0)
    }

    fn lines(&self) -> Vec<String> {
        self.lines
            .lock()
            .map(|lines| lines.clone())
            .unwrap_or_default()
    }

    fn stop(self) {
        self.task.abort();
    }
}

/// Copies both ways; the client's bytes are scanned for request lines
/// (`METHOD PATH HTTP/1.1`). WebSocket frames from a client are masked, so
/// they cannot look like one.
async fn forward(
    client: TcpStream,
    server: TcpStream,
    lines: Arc<Mutex<Vec<String>>>,
) -> std::io::Result<()> {
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let back = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
        let _ = client_write.shutdown().await;
    });
    let mut buf = vec![0u8; 16 * 1024];
    let mut carry: Vec<u8> = Vec::new();
    loop {
        let n = client_read.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        server_write.write_all(&buf[..n]).await?;
        let old = carry.len();
        carry.extend_from_slice(&buf[..n]);
        for line in request_lines(&carry, old) {
            if let Ok(mut all) = lines.lock() {
                all.push(line);
            }
        }
        let keep = carry.len().saturating_sub(512);
        carry.drain(..keep);
    }
    let _ = server_write.shutdown().await;
    let _ = back.await;
    Ok(())
}

/// The request lines in `hay` that end after byte `old` (the part already
/// scanned is kept only to catch a line split across reads).
fn request_lines(hay: &[u8], old: usize) -> Vec<String> {
    const END: &[u8] = b" HTTP/1.1\r\n";
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(pos) = hay[from..]
        .windows(END.len())
        .position(|window| window == END)
    {
        let at = from + pos;
        let end = at + END.len();
        if end > old {
            let start = hay[..at]
                .iter()
                .rposition(|byte| *byte == b'\n')
                .map(|p| p + 1)
                .unwrap_or(0);
            // A keep-alive connection's previous body may precede the
            // method on the same line.
            let line = String::from_utf8_lossy(&hay[start..at]).into_owned();
            let method = ["GET ", "POST ", "PUT ", "DELETE ", "PATCH "]
                .iter()
                .filter_map(|m| line.rfind(m))
                .max()
                .unwrap_or(0);
            found.push(line[method..].to_owned());
        }
        from = end;
    }
    found
}

#[cfg(test)]
mod tests {
    use super::request_lines;

    #[test]
    fn finds_each_request_line_once() {
        let first =
            b"POST /v1/runtimes/x/claim HTTP/1.1\r\nhost: a\r\n\r\n{\"maxJobs\":1}GET /v1/me HT";
        assert_eq!(
            request_lines(first, 0),
            vec!["POST /v1/runtimes/x/claim".to_owned()]
        );
        let mut both = first.to_vec();
        let old = both.len();
        both.extend_from_slice(b"TP/1.1\r\n\r\n");
        assert_eq!(request_lines(&both, old), vec!["GET /v1/me".to_owned()]);
    }
}
