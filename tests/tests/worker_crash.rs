//! `kill -9` of a worker in the middle of a job: its lease runs out and
//! another process of the same name answers — exactly one reply.
//!
//! To catch the worker mid-job without any hook in the product, it talks to
//! the server through a TCP proxy that forwards everything until the worker
//! sends its `…/finish`: that request is held, never forwarded, as if the
//! network had swallowed it. The worker is killed while it waits.

use crate::cli_support;

use std::net::SocketAddr;
use std::sync::Arc;

use cli_support::{CliTest, EVENT_TIMEOUT, ServerSettings, builtin_worker_args, stop_worker, text};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

/// What marks the request the proxy holds.
const HELD_REQUEST: &[u8] = b"/finish HTTP/1.1";

/// Forwards connections to `upstream`; a connection whose client sends
/// [`HELD_REQUEST`] stops forwarding from then on, and `held` is notified.
async fn holding_proxy(upstream: SocketAddr) -> (SocketAddr, Arc<Notify>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    let held = Arc::new(Notify::new());
    let notify = Arc::clone(&held);
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            tokio::spawn(forward(client, upstream, Arc::clone(&notify)));
        }
    });
    (address, held)
}

async fn forward(client: TcpStream, upstream: SocketAddr, held: Arc<Notify>) {
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    tokio::spawn(async move {
        let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
    });
    let mut buffer = vec![0_u8; 16 * 1024];
    // The end of the previous read, so a marker split across reads is seen.
    let mut window: Vec<u8> = Vec::new();
    loop {
        let read = match client_read.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(read) => read,
        };
        window.extend_from_slice(&buffer[..read]);
        if window
            .windows(HELD_REQUEST.len())
            .any(|part| part == HELD_REQUEST)
        {
            held.notify_one();
            // Keep both sockets open and silent until the test ends.
            std::future::pending::<()>().await;
        }
        let keep = window.len().saturating_sub(HELD_REQUEST.len());
        window.drain(..keep);
        if server_write.write_all(&buffer[..read]).await.is_err() {
            return;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn after_kill_9_mid_job_another_process_of_the_name_answers_once() {
    let (t, pair) =
        CliTest::with_pair("worker-crash", ServerSettings::lease(2000, false), true).await;
    let (receiver_number, room) = (pair.receiver_number, pair.room);

    // The receiver's profile once more, reaching the server through the proxy.
    let upstream: SocketAddr = t
        .url()
        .trim_start_matches("http://")
        .parse()
        .expect("server address");
    let (proxy, held) = holding_proxy(upstream).await;
    let profile_path = t.cli.home().join("receiver.json");
    let mut profile: Value =
        serde_json::from_slice(&std::fs::read(&profile_path).expect("profile")).expect("JSON");
    profile["server"] = Value::String(format!("http://{proxy}"));
    std::fs::write(
        t.cli.home().join("receiver-proxied.json"),
        serde_json::to_vec_pretty(&profile).expect("JSON"),
    )
    .expect("write profile");

    let worker_args =
        |profile: &'static str| builtin_worker_args(profile, "reply-worker", "uppercase");
    let mut first = t.spawn(&worker_args("receiver-proxied"), &[]);
    let started = first.wait_event("started");
    let runtime = text(&started["runtimeId"]);
    let question_id = t.ask(&receiver_number, "are you still there?", &[]);
    let claimed = first.wait_event("claimed");
    assert_eq!(claimed["messageId"], question_id.as_str());
    assert_eq!(claimed["attempt"], 1);
    tokio::time::timeout(EVENT_TIMEOUT, held.notified())
        .await
        .expect("the first worker sent its finish");
    first.signal("KILL");
    let killed = first.wait_exit(EVENT_TIMEOUT);
    assert_eq!(killed.code, None, "killed by the signal: {killed:?}");

    // Another process of the same name takes the job once the lease ends.
    let mut second = t.spawn(&worker_args("receiver"), &[]);
    assert_eq!(second.wait_event("started")["runtimeId"], runtime.as_str());
    let retaken = second.wait_event("claimed");
    assert_eq!(retaken["messageId"], question_id.as_str());
    assert_eq!(retaken["jobKey"], claimed["jobKey"], "one job, one key");
    assert_eq!(
        retaken["attempt"], 2,
        "the first attempt ended with its lease"
    );
    let replied = second.wait_event("replied");
    assert_eq!(replied["messageId"], question_id.as_str());

    let replies = t.replies_to("sender", &room, &question_id);
    assert_eq!(replies.len(), 1, "exactly one reply: {replies:?}");
    assert_eq!(replies[0]["text"], "ARE YOU STILL THERE?");
    let stats = t.json(&["--profile", "receiver", "runtimes", "stats", &runtime]);
    assert_eq!(stats["claims"], 2, "{stats}");
    assert_eq!(
        stats["unfinishedAttempts"], 1,
        "the crashed attempt: {stats}"
    );
    stop_worker(second);
}
