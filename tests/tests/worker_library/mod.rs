//! `relayger_worker::run_worker` embedded in a program, with Rust handlers,
//! against the real server and PostgreSQL: cancellation before start,
//! handler timeouts, a handler that does not stop, shutdown releases,
//! revocation, concurrency, sealed input, thread context and notes.

mod faults;
mod jobs;
mod stopping;

use crate::cli_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use cli_support::{Befriended, CliTest, ServerSettings};
// Only this crate's names: an embedder needs no direct relayger-core.
use relayger_worker::{
    Builtin, BuiltinHandler, CancellationToken, Client, EventSink, Handler, HandlerError,
    HandlerFuture, HandlerInput, HandlerOutput, IdentityNumber, ProfileDir, SendRequest, StartFrom,
    StopReason, ThreadQuery, Timestamp, WorkerError, WorkerEvent, WorkerOptions, handler_fn,
    run_worker,
};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};
use tokio::task::JoinHandle;
use uuid::Uuid;

const WAIT: Duration = Duration::from_secs(30);

struct Setup {
    t: CliTest,
    receiver: Client,
    sender: Client,
    receiver_number: IdentityNumber,
    room: Uuid,
}

async fn setup(label: &str) -> Setup {
    setup_with(label, ServerSettings::lease(2000, false)).await
}

/// As [`setup`] with the server's `settings` (a lease of another length,
/// requests logged so the test can count them).
async fn setup_with(label: &str, settings: ServerSettings) -> Setup {
    let t = CliTest::start_with(label, settings).await;
    let Befriended {
        receiver_number,
        room,
        ..
    } = t.befriended_pair(true);
    let profiles = ProfileDir::at(t.cli.home());
    let client =
        |name: &str| Client::for_profile(&profiles.load(name).expect("profile")).expect("client");
    Setup {
        receiver: client("receiver"),
        sender: client("sender"),
        receiver_number: receiver_number.parse().expect("number"),
        room: room.parse().expect("room"),
        t,
    }
}

/// A started worker's task and its events.
type Running = (
    JoinHandle<Result<(), WorkerError>>,
    UnboundedReceiver<WorkerEvent>,
);
/// The same and the token that stops it.
type Cancellable = (
    JoinHandle<Result<(), WorkerError>>,
    UnboundedReceiver<WorkerEvent>,
    CancellationToken,
);

impl Setup {
    async fn ask(&self, text: &str, deadline: Option<Timestamp>) -> Uuid {
        let sent = self
            .sender
            .send(&SendRequest {
                to: Some(self.receiver_number.clone()),
                text: Some(text.to_owned()),
                ask: true,
                deadline,
                ..SendRequest::default()
            })
            .await
            .expect("send");
        sent.message_id
    }

    /// Starts `run_worker` with `options` (events to the returned channel).
    fn start<H: Handler>(&self, options: WorkerOptions<H>) -> Running {
        self.start_with(self.receiver.clone(), options)
    }

    /// [`start`](Self::start) with the receiver's `client` of the test's
    /// choosing (through a fault proxy, say).
    fn start_with<H: Handler>(&self, client: Client, options: WorkerOptions<H>) -> Running {
        let (tx, rx) = unbounded_channel();
        let options = WorkerOptions {
            events: EventSink::from(tx),
            from: StartFrom::Now,
            ..options
        };
        (
            tokio::spawn(async move { run_worker(&client, options).await }),
            rx,
        )
    }

    /// [`start`](Self::start) with a fresh cancellation token in `options`,
    /// returned to stop the worker with.
    fn start_cancellable<H: Handler>(&self, options: WorkerOptions<H>) -> Cancellable {
        self.start_cancellable_with(self.receiver.clone(), options)
    }

    /// [`start_cancellable`](Self::start_cancellable) with the receiver's
    /// `client` of the test's choosing.
    fn start_cancellable_with<H: Handler>(
        &self,
        client: Client,
        options: WorkerOptions<H>,
    ) -> Cancellable {
        let cancel = CancellationToken::new();
        let (worker, events) = self.start_with(
            client,
            WorkerOptions {
                cancel: cancel.clone(),
                ..options
            },
        );
        (worker, events, cancel)
    }

    async fn replies(&self, message: Uuid) -> Vec<String> {
        let thread = self
            .sender
            .thread(self.room, message, ThreadQuery::default())
            .await
            .expect("thread");
        thread
            .messages
            .into_iter()
            .filter(|m| m.reply_to == Some(message))
            .map(|m| m.text.unwrap_or_default())
            .collect()
    }
}

/// The next event `matches` accepts (others are skipped).
async fn next_event(
    events: &mut UnboundedReceiver<WorkerEvent>,
    what: &str,
    matches: impl Fn(&WorkerEvent) -> bool,
) -> WorkerEvent {
    let mut skipped = Vec::new();
    let wait = async {
        while let Some(event) = events.recv().await {
            if matches(&event) {
                return event;
            }
            skipped.push(event);
        }
        panic!("the worker stopped before {what}; events: {skipped:#?}");
    };
    match tokio::time::timeout(WAIT, wait).await {
        Ok(event) => event,
        Err(_) => panic!("no {what} within {WAIT:?}"),
    }
}

fn is_outcome_for(event: &WorkerEvent, message: Uuid) -> bool {
    match event {
        WorkerEvent::Replied { message_id, .. }
        | WorkerEvent::Skipped { message_id, .. }
        | WorkerEvent::Failed { message_id, .. }
        | WorkerEvent::DeadLetter { message_id, .. } => *message_id == message,
        _ => false,
    }
}

async fn runtime_id(events: &mut UnboundedReceiver<WorkerEvent>) -> Uuid {
    match next_event(events, "started", |e| e.name() == "started").await {
        WorkerEvent::Started { runtime_id, .. } => runtime_id,
        _ => unreachable!(),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_already_cancelled_token_creates_no_runtime() {
    let s = setup("lib-cancelled").await;
    let cancel = CancellationToken::new();
    cancel.cancel();
    let (worker, mut events) = s.start(WorkerOptions {
        cancel,
        ..WorkerOptions::new("never", BuiltinHandler(Builtin::Echo))
    });
    worker
        .await
        .expect("task")
        .expect("a cancelled worker stops cleanly");
    let stopped = next_event(&mut events, "stopped", |_| true).await;
    assert!(matches!(
        stopped,
        WorkerEvent::Stopped {
            reason: StopReason::Interrupted,
            ..
        }
    ));
    let list = s.receiver.runtimes().list().await.expect("list");
    assert!(list.runtimes.is_empty(), "{list:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_timed_out_handler_that_stops_fails_the_attempt_and_the_retry_is_answered() {
    let s = setup("lib-timeout").await;
    let handler = handler_fn(|input: HandlerInput| async move {
        if input.attempt == 1 {
            input.cancel.cancelled().await;
            return Err(HandlerError::cancelled());
        }
        let text = input.message.text.unwrap_or_default();
        Ok(HandlerOutput::reply(format!("{text} (attempt {})", input.attempt)).with_zero_usage())
    });
    let (worker, mut events, cancel) = s.start_cancellable(WorkerOptions {
        handler_timeout_ms: Some(300),
        ..WorkerOptions::new("patient", handler)
    });
    runtime_id(&mut events).await;
    let question = s.ask("take your time", None).await;
    let failed = next_event(&mut events, "the timeout", |e| is_outcome_for(e, question)).await;
    match failed {
        WorkerEvent::Failed {
            error, retry_at, ..
        } => {
            assert_eq!(error, "handler_timeout");
            assert!(retry_at.is_some(), "the server retries it");
        }
        other => panic!("expected a failure, got {other:?}"),
    }
    // The retry time wakes the worker; the next attempt is handled.
    let replied = next_event(&mut events, "the retry", |e| is_outcome_for(e, question)).await;
    assert_eq!(replied.name(), "replied", "{replied:?}");
    assert_eq!(s.replies(question).await, ["take your time (attempt 2)"]);
    cancel.cancel();
    worker.await.expect("task").expect("clean stop");
}

/// A handler type of the program's own, counting the jobs it handled.
struct Numbered {
    handled: Arc<AtomicU32>,
}

impl Handler for Numbered {
    fn handle(&self, input: HandlerInput) -> HandlerFuture<'_> {
        Box::pin(async move {
            let n = self.handled.fetch_add(1, Ordering::SeqCst) + 1;
            let text = input.message.text.unwrap_or_default();
            Ok(HandlerOutput::reply(format!("#{n}: {text}")).with_zero_usage())
        })
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_handler_chosen_at_run_time_runs_as_a_trait_object() {
    let s = setup("lib-dyn").await;
    let handled = Arc::new(AtomicU32::new(0));
    // As a program holds a handler it picked from its configuration.
    let handler: Arc<dyn Handler> = Arc::new(Numbered {
        handled: Arc::clone(&handled),
    });
    let (worker, mut events, cancel) = s.start_cancellable(WorkerOptions {
        ..WorkerOptions::new("dyn", handler)
    });
    runtime_id(&mut events).await;
    let question = s.ask("which handler?", None).await;
    let replied = next_event(&mut events, "the reply", |e| is_outcome_for(e, question)).await;
    assert_eq!(replied.name(), "replied", "{replied:?}");
    assert_eq!(s.replies(question).await, ["#1: which handler?"]);
    assert_eq!(handled.load(Ordering::SeqCst), 1);
    cancel.cancel();
    worker.await.expect("task").expect("clean stop");
}
