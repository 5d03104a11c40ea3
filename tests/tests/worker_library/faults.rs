//! An embedded worker whose link to the server fails, through the test
//! support's fault proxy: a silent cut leaves its socket half-open, which
//! the worker notices within 20 s and replaces; over a slow link work still
//! flows and leases are still renewed.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use relayger_tests::fault_proxy::FaultProxy;
use relayger_worker::{
    Builtin, BuiltinHandler, Client, HandlerError, HandlerInput, HandlerOutput, ProfileDir,
    SocketState, WorkerEvent, WorkerOptions, handler_fn,
};

use super::{Setup, is_outcome_for, next_event, runtime_id, setup, setup_with};
use crate::cli_support::ServerSettings;

/// A proxy to the test's server, and a client of the receiver through it.
async fn behind_a_proxy(s: &Setup) -> (FaultProxy, Client) {
    let target: SocketAddr =
        s.t.url()
            .trim_start_matches("http://")
            .parse()
            .expect("the server's address");
    let proxy = FaultProxy::start(target).await.expect("proxy");
    let mut profile = ProfileDir::at(s.t.cli.home())
        .load("receiver")
        .expect("profile");
    profile.server = proxy.url();
    let client = Client::for_profile(&profile).expect("client");
    (proxy, client)
}

fn is_socket_event(event: &WorkerEvent, name: &str) -> bool {
    event.name() == name
}

#[tokio::test(flavor = "multi_thread")]
async fn a_half_open_socket_is_noticed_within_20_s_and_replaced() {
    let s = setup("lib-half-open").await;
    let (proxy, client) = behind_a_proxy(&s).await;
    let (worker, mut events, cancel) = s.start_cancellable_with(
        client,
        WorkerOptions::new("behind-a-cut", BuiltinHandler(Builtin::Uppercase)),
    );
    let started = next_event(&mut events, "started", |e| e.name() == "started").await;
    assert!(
        matches!(
            started,
            WorkerEvent::Started {
                socket: SocketState::Connected,
                ..
            }
        ),
        "{started:?}"
    );

    // The link goes down without a FIN or RST: nothing tells the worker.
    proxy.cut();
    let cut_at = Instant::now();
    let lost = next_event(&mut events, "the half-open socket noticed", |e| {
        is_socket_event(e, "socket_disconnected")
    })
    .await;
    let noticed = cut_at.elapsed();
    assert!(
        noticed <= Duration::from_secs(20),
        "noticed after {noticed:?}: {lost:?}"
    );

    // The link comes back: the socket is opened again and work flows.
    proxy.heal();
    next_event(&mut events, "the socket reopened", |e| {
        is_socket_event(e, "socket_connected")
    })
    .await;
    let question = s.ask("after the cut", None).await;
    let replied = next_event(&mut events, "the reply", |e| is_outcome_for(e, question)).await;
    assert_eq!(replied.name(), "replied", "{replied:?}");
    assert_eq!(s.replies(question).await, ["AFTER THE CUT"]);
    cancel.cancel();
    worker.await.expect("task").expect("clean stop");
}

#[tokio::test(flavor = "multi_thread")]
async fn over_a_slow_link_work_flows_and_the_lease_is_renewed() {
    const LEASE: Duration = Duration::from_secs(5);
    let s = setup_with(
        "lib-slow-link",
        ServerSettings::lease(LEASE.as_millis() as u64, false),
    )
    .await;
    let (proxy, client) = behind_a_proxy(&s).await;
    // Hundreds of milliseconds each way.
    let delay = Duration::from_millis(300);
    proxy.set_delay(delay);
    let sent = Instant::now();
    client
        .runtimes()
        .list()
        .await
        .expect("a request over the slow link");
    assert!(
        sent.elapsed() >= 2 * delay,
        "{:?} for a round trip",
        sent.elapsed()
    );
    // The handler outlasts the lease: only renewals keep the job its own.
    let handler = handler_fn(|input: HandlerInput| async move {
        tokio::select! {
            _ = input.cancel.cancelled() => Err(HandlerError::cancelled()),
            _ = tokio::time::sleep(LEASE + LEASE / 2) => {
                let text = input.message.text.unwrap_or_default();
                Ok(HandlerOutput::reply(format!("{text} (attempt {})", input.attempt)).with_zero_usage())
            }
        }
    });
    let (worker, mut events, cancel) =
        s.start_cancellable_with(client, WorkerOptions::new("slow-link", handler));
    runtime_id(&mut events).await;
    let question = s.ask("slowly", None).await;
    let outcome = next_event(&mut events, "the outcome", |e| is_outcome_for(e, question)).await;
    assert_eq!(outcome.name(), "replied", "{outcome:?}");
    assert_eq!(s.replies(question).await, ["slowly (attempt 1)"]);
    cancel.cancel();
    worker.await.expect("task").expect("clean stop");
}

/// The network soak's slow link with its short lease: 3 s, 400 ms each
/// way, a handler running 1.6 s. The claim's answer already took 0.8 s of
/// the 2 s the handler may run without a renewal (the lease less its
/// second to stop, counted from the claim's send); a first heartbeat a
/// whole period after that answer came back after the limit, so the
/// handler was cancelled (`lease_expired`) though the link was working.
#[tokio::test(flavor = "multi_thread")]
async fn over_a_slow_link_a_short_lease_is_renewed_in_time() {
    const LEASE: Duration = Duration::from_secs(3);
    const RUNS: Duration = Duration::from_millis(1600);
    let s = setup_with(
        "lib-slow-short-lease",
        ServerSettings::lease(LEASE.as_millis() as u64, false),
    )
    .await;
    let (proxy, client) = behind_a_proxy(&s).await;
    proxy.set_delay(Duration::from_millis(400));
    let handler = handler_fn(|input: HandlerInput| async move {
        tokio::select! {
            _ = input.cancel.cancelled() => Err(HandlerError::cancelled()),
            _ = tokio::time::sleep(RUNS) => {
                let text = input.message.text.unwrap_or_default();
                Ok(HandlerOutput::reply(format!("{text} (attempt {})", input.attempt)).with_zero_usage())
            }
        }
    });
    let (worker, mut events, cancel) =
        s.start_cancellable_with(client, WorkerOptions::new("slow-short-lease", handler));
    runtime_id(&mut events).await;
    for text in ["first", "second"] {
        let question = s.ask(text, None).await;
        let outcome = next_event(&mut events, "the outcome", |e| is_outcome_for(e, question)).await;
        assert_eq!(outcome.name(), "replied", "{outcome:?}");
        assert_eq!(s.replies(question).await, [format!("{text} (attempt 1)")]);
    }
    cancel.cancel();
    worker.await.expect("task").expect("clean stop");
}
