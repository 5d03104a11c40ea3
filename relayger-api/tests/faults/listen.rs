//! A LISTEN connection that dies or hangs is replaced.

use super::*;

/// The backend of the server's LISTEN connection (its last statement was a
/// LISTEN or a ping), once there is exactly one.
async fn listen_backend(watcher: &mut AsyncPgConnection) -> i32 {
    #[derive(QueryableByName)]
    struct Pid {
        #[diesel(sql_type = diesel::sql_types::Integer)]
        pid: i32,
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let rows: Vec<Pid> = diesel::sql_query(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() \
             AND (query LIKE 'LISTEN %' OR query = 'SELECT pg_notify($1, $2) AS ping')",
        )
        .load(watcher)
        .await
        .expect("pg_stat_activity");
        if let [row] = rows.as_slice() {
            return row.pid;
        }
        assert!(Instant::now() < deadline, "no single LISTEN backend");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn signal(pid: i32, signal: &str) {
    let status = std::process::Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill {signal} {pid}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dead_or_hung_listen_connection_is_replaced_and_every_socket_woken() {
    const WAIT: Duration = Duration::from_secs(10);
    let server = TestServer::start_config(relayger_api::ApiConfig {
        listen: ListenOptions {
            ping_every: Duration::from_millis(200),
            ping_timeout: Duration::from_millis(500),
            ..ListenOptions::default()
        },
        ..relayger_api::ApiConfig::default()
    })
    .await;
    let (alice, bob, _) = server
        .befriended_pair(("alice", "agent"), ("bob", "agent"))
        .await;
    let mut socket = server
        .ws_connect("/v1/socket", Some(&bob.token))
        .await
        .expect("socket");
    let mut watcher = server.raw_connection().await;
    let woken = async |socket: &mut common::WsStream, why: &str| {
        let frame = next_frame(socket, WAIT)
            .await
            .unwrap_or_else(|| panic!("no signal {why}"));
        assert_eq!(frame, r#"{"event":"inbox_changed"}"#, "{why}");
    };

    // Killed: the listener reconnects and wakes everyone.
    let killed = listen_backend(&mut watcher).await;
    execute(
        &mut watcher,
        &format!("SELECT pg_terminate_backend({killed})"),
    )
    .await;
    woken(&mut socket, "after the LISTEN backend was killed").await;
    // Signals still on their way (the befriending's) are not the ones the
    // next step waits for: let them arrive and drop them.
    while next_frame(&mut socket, Duration::from_millis(500))
        .await
        .is_some()
    {}

    // Hung (stopped, as a half-open connection looks): nothing arrives on
    // it, not even its own NOTIFY; the check replaces it.
    let hung = listen_backend(&mut watcher).await;
    assert_ne!(hung, killed);
    signal(hung, "-STOP");
    let frame = next_frame(&mut socket, WAIT).await;
    signal(hung, "-CONT");
    assert_eq!(
        frame.as_deref(),
        Some(r#"{"event":"inbox_changed"}"#),
        "no signal after the LISTEN backend hung"
    );
    server
        .send(&alice, json!({"to": bob.number, "text": "still there?"}))
        .await;
    woken(&mut socket, "for a message after the reconnect").await;
}

/// The identity ids of the next `relayger_inbox` NOTIFY `observer` hears
/// within `wait`, if any.
async fn next_inbox_notify(observer: &mut AsyncPgConnection, wait: Duration) -> Option<String> {
    next_notify(observer, wait, |channel, _| channel == "relayger_inbox").await
}

/// The payload of the next NOTIFY `observer` hears within `wait` that
/// `wanted` picks by channel and payload, if any.
async fn next_notify(
    observer: &mut AsyncPgConnection,
    wait: Duration,
    wanted: impl Fn(&str, &str) -> bool,
) -> Option<String> {
    use futures_util::StreamExt;
    let mut stream = std::pin::pin!(observer.notifications_stream());
    loop {
        let item = tokio::time::timeout(wait, stream.next()).await.ok()??;
        let notification = item.expect("a notification");
        if wanted(&notification.channel, &notification.payload) {
            return Some(notification.payload);
        }
    }
}

/// Sends `alice`'s messages to `to` until one goes without a NOTIFY that
/// `observer` hears, for at most `wait`.
async fn send_until_unnotified(
    server: &TestServer,
    observer: &mut AsyncPgConnection,
    alice: &common::User,
    to: &common::User,
    wait: Duration,
) {
    let deadline = Instant::now() + wait;
    loop {
        server
            .send(alice, json!({"to": to.number, "text": "anyone else?"}))
            .await;
        if next_inbox_notify(observer, Duration::from_millis(500))
            .await
            .is_none()
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "a lone instance kept sending NOTIFYs"
        );
    }
}

/// Sends `alice`'s messages to `to` until `observer` hears a NOTIFY, for
/// at most `wait` (the server may learn of another instance a moment after
/// the test made one speak), and answers its payload. With `peer`, the
/// observer pings as that instance before each send, as a live instance
/// pings every interval (the server counts another instance present for
/// three of its own ping intervals after it last heard one).
async fn send_until_notified(
    server: &TestServer,
    observer: &mut AsyncPgConnection,
    alice: &common::User,
    to: &common::User,
    wait: Duration,
    peer: Option<&str>,
) -> String {
    let deadline = Instant::now() + wait;
    loop {
        if let Some(peer) = peer {
            execute(
                observer,
                &format!("SELECT pg_notify('relayger_presence', '{peer}')"),
            )
            .await;
        }
        server
            .send(alice, json!({"to": to.number, "text": "hello, peer"}))
            .await;
        if let Some(payload) = next_inbox_notify(observer, Duration::from_millis(500)).await {
            return payload;
        }
        assert!(
            Instant::now() < deadline,
            "no NOTIFY after another instance spoke"
        );
    }
}

/// A server with `listen` settings, alice befriended with the agents bob
/// and carol, and an observer that LISTENs on `channels` and is no
/// instance (it never pings unless the test makes it).
async fn lone_instance(
    listen: ListenOptions,
    channels: &[&str],
) -> (TestServer, [common::User; 3], AsyncPgConnection) {
    let server = TestServer::start_config(relayger_api::ApiConfig {
        listen,
        ..relayger_api::ApiConfig::default()
    })
    .await;
    let [alice, bob, carol] = server
        .register_all([("alice", "person"), ("bob", "agent"), ("carol", "agent")])
        .await;
    server.befriend(&alice, &bob).await;
    server.befriend(&alice, &carol).await;
    let mut observer = server.raw_connection().await;
    for channel in channels {
        execute(&mut observer, &format!("LISTEN {channel}")).await;
    }
    (server, [alice, bob, carol], observer)
}

#[tokio::test(flavor = "multi_thread")]
async fn an_instance_alone_sends_no_notify_until_another_instance_pings() {
    const WAIT: Duration = Duration::from_secs(10);
    // Pings every 100 ms: alone once 300 ms pass without another instance.
    // The observer hears the server's NOTIFYs.
    let (server, [alice, bob, carol], mut observer) = lone_instance(
        ListenOptions {
            ping_every: Duration::from_millis(100),
            ping_timeout: Duration::from_millis(2000),
            ..ListenOptions::default()
        },
        &["relayger_inbox"],
    )
    .await;

    // Alone: sooner or later a message to bob goes without a NOTIFY.
    send_until_unnotified(&server, &mut observer, &alice, &bob, WAIT).await;

    // Another instance pings (as a live one does, every interval): the next
    // message's NOTIFY goes out, and it is the first the observer hears (the
    // one for bob was never sent, not late).
    let other = uuid::Uuid::new_v4().simple().to_string();
    // The server hears the pings on its own connection; until then a send
    // may still skip its NOTIFY.
    let payload =
        send_until_notified(&server, &mut observer, &alice, &carol, WAIT, Some(&other)).await;
    assert!(payload.contains(&carol.id), "{payload}");
    assert!(
        !payload.contains(&bob.id),
        "the skipped NOTIFY came late: {payload}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_new_instance_is_answered_at_once_and_alone_goes_quiet_once_no_answer_came() {
    const WAIT: Duration = Duration::from_secs(10);
    // Pings a minute apart, so no ping below is a periodic one, and a lone
    // instance would notify for three minutes if it waited for pings. The
    // observer hears the server's NOTIFYs and pings.
    let (server, [alice, bob, carol], mut observer) = lone_instance(
        ListenOptions {
            ping_every: Duration::from_secs(60),
            ping_timeout: Duration::from_secs(5),
            answer_within: Duration::from_millis(300),
        },
        &["relayger_inbox", "relayger_presence"],
    )
    .await;

    // Nobody answered the server's hello: it goes quiet within seconds.
    send_until_unnotified(&server, &mut observer, &alice, &bob, WAIT).await;

    // A new instance says hello: the server answers with a ping at once,
    // not a minute later.
    let other = uuid::Uuid::new_v4().simple().to_string();
    execute(
        &mut observer,
        &format!("SELECT pg_notify('relayger_presence', 'hello:{other}')"),
    )
    .await;
    let answer = next_notify(&mut observer, WAIT, |channel, payload| {
        channel == "relayger_presence" && !payload.starts_with("hello:")
    })
    .await
    .expect("no answer to a new instance's hello");
    assert_ne!(answer, other);
    assert!(answer.parse::<uuid::Uuid>().is_ok(), "{answer}");

    // And it has company again: its messages are NOTIFYed (the hello may
    // reach the server's hub a moment after its answer went out).
    let payload = send_until_notified(&server, &mut observer, &alice, &carol, WAIT, None).await;
    assert!(payload.contains(&carol.id), "{payload}");
}
