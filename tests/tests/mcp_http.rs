//! `relayger mcp --http`: the session cap and idle expiry (issue #38, item 9).

use crate::cli_support;

use std::time::{Duration, Instant};

use cli_support::CliTest;
use serde_json::json;

/// `initialize` over Streamable HTTP: the status and the session id.
async fn initialize(http: &reqwest::Client, url: &str) -> (u16, Option<String>) {
    let response = http
        .post(url)
        .header("Accept", "application/json, text/event-stream")
        .json(&json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "cap-test", "version": "1"}
            }
        }))
        .send()
        .await
        .expect("initialize");
    let session = response
        .headers()
        .get("mcp-session-id")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    (response.status().as_u16(), session)
}

/// A `ping` in `session`: its status (404 once the session is gone).
async fn ping(http: &reqwest::Client, url: &str, session: &str) -> u16 {
    http.post(url)
        .header("Accept", "application/json, text/event-stream")
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", "2025-06-18")
        .json(&json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}))
        .send()
        .await
        .expect("ping")
        .status()
        .as_u16()
}

/// With `--max-sessions 2`, a third `initialize` is 503 (and so would the
/// 500th be: no session is made); closing one frees its place; a session
/// unused for `--session-idle-secs` is closed and its id answers 404, and
/// its place is free again.
#[tokio::test(flavor = "multi_thread")]
async fn mcp_http_caps_its_sessions_and_expires_idle_ones() {
    const IDLE: Duration = Duration::from_secs(2);
    let t = CliTest::start("mcp-http").await;
    t.register("reader", "Reader", false);
    let mut mcp = t.spawn(
        &[
            "--profile",
            "reader",
            "mcp",
            "--http",
            "127.0.0.1:0",
            "--max-sessions",
            "2",
            "--session-idle-secs",
            "2",
        ],
        &[],
    );
    let line = mcp
        .poll_line(Duration::from_secs(30))
        .expect("the listening line");
    let url = line
        .as_str()
        .and_then(|line| line.strip_prefix("relayger mcp listening on "))
        .unwrap_or_else(|| panic!("{line}"))
        .to_owned();
    let http = reqwest::Client::new();

    let (status, first) = initialize(&http, &url).await;
    assert_eq!(status, 200);
    let (status, second) = initialize(&http, &url).await;
    assert_eq!(status, 200);
    let (first, second) = (first.expect("a session"), second.expect("a session"));
    for _ in 0..5 {
        let (status, session) = initialize(&http, &url).await;
        assert_eq!((status, session), (503, None), "past the cap");
    }
    // Taken before the request: the session's last use is no earlier.
    let first_used = Instant::now();
    assert_eq!(ping(&http, &url, &first).await, 200);

    // Closing one frees its place.
    let closed = http
        .delete(&url)
        .header("mcp-session-id", &second)
        .send()
        .await
        .expect("DELETE");
    assert!(closed.status().is_success(), "{}", closed.status());
    assert_eq!(ping(&http, &url, &second).await, 404);
    let third_used = Instant::now();
    let (status, third) = initialize(&http, &url).await;
    assert_eq!(status, 200);
    let third = third.expect("a session");
    assert_eq!(initialize(&http, &url).await.0, 503);

    // Unused, each expires after the idle time, and its place is free.
    for (session, used) in [(&first, first_used), (&third, third_used)] {
        let freed = wait_for_a_free_place(&http, &url, used + IDLE + Duration::from_secs(10)).await;
        assert!(
            freed >= used + IDLE,
            "a session expired before its idle time: {:?}",
            freed - used
        );
        assert_eq!(ping(&http, &url, session).await, 404);
    }
}

/// Polls `initialize` until one is served (a place was freed): when.
async fn wait_for_a_free_place(http: &reqwest::Client, url: &str, deadline: Instant) -> Instant {
    loop {
        let (status, _) = initialize(http, url).await;
        if status == 200 {
            return Instant::now();
        }
        assert_eq!(status, 503);
        assert!(Instant::now() < deadline, "no session expired in time");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
