//! `relayger_worker::run_worker` embedded in a program, with Rust handlers,
//! against the real server and PostgreSQL: cancellation before start,
//! handler timeouts, a handler that does not stop, shutdown releases,
//! revocation, concurrency, sealed input, thread context and notes.

use crate::cli_support;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cli_support::{Befriended, CliTest, ServerSettings};
// Only this crate's names: an embedder needs no direct relayger-core.
use relayger_worker::wire::{CreateTokenRequest, NoteWrite, Scope};
use relayger_worker::{
    Builtin, BuiltinHandler, CancellationToken, Client, ClientError, EventSink, Handler,
    HandlerError, HandlerFuture, HandlerInput, HandlerOutput, IdentityNumber, NoteInput, Policy,
    ProfileDir, SealedContent, SendRequest, StartFrom, StopReason, ThreadQuery, Timestamp,
    WorkerError, WorkerEvent, WorkerOptions, handler_fn, run_worker,
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
    setup_with(label, false).await
}

/// As [`setup`]; `log_requests` lets the test count the server's requests.
async fn setup_with(label: &str, log_requests: bool) -> Setup {
    let t = CliTest::start_with(
        label,
        ServerSettings {
            lease_ms: Some(2000),
            log_requests,
        },
    )
    .await;
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
    fn start<H: Handler>(
        &self,
        options: WorkerOptions<H>,
    ) -> (
        JoinHandle<Result<(), WorkerError>>,
        UnboundedReceiver<WorkerEvent>,
    ) {
        let (tx, rx) = unbounded_channel();
        let client = self.receiver.clone();
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
    let cancel = CancellationToken::new();
    let (worker, mut events) = s.start(WorkerOptions {
        cancel: cancel.clone(),
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
    let cancel = CancellationToken::new();
    let (worker, mut events) = s.start(WorkerOptions {
        cancel: cancel.clone(),
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

#[tokio::test(flavor = "multi_thread")]
async fn a_handler_that_does_not_stop_ends_the_worker_after_the_others_finish() {
    let s = setup("lib-stuck").await;
    // Fires when the stuck handler's cancellation does (it ignores it).
    let stuck_cancelled = Arc::new(tokio::sync::Notify::new());
    let cancelled_signal = Arc::clone(&stuck_cancelled);
    let handler = handler_fn(move |input: HandlerInput| {
        let stuck_cancelled = Arc::clone(&cancelled_signal);
        async move {
            let text = input.message.text.clone().unwrap_or_default();
            match text.as_str() {
                "stuck" => {
                    input.cancel.cancelled().await;
                    stuck_cancelled.notify_one();
                    // Ignores its cancellation.
                    tokio::time::sleep(Duration::from_secs(60)).await;
                }
                // Still running when the stuck one's extra second is over
                // (its heartbeats keep the 2 s lease), honouring cancellation.
                "slow" => {
                    tokio::select! {
                        _ = input.cancel.cancelled() => return Err(HandlerError::cancelled()),
                        _ = async {
                            stuck_cancelled.notified().await;
                            tokio::time::sleep(Duration::from_millis(2500)).await;
                        } => {}
                    }
                }
                _ => {}
            }
            Ok(HandlerOutput::reply(text.to_uppercase()).with_zero_usage())
        }
    });
    let (worker, mut events) = s.start(WorkerOptions {
        policy: Some(Policy::parse(r#"{"concurrency": 2}"#).expect("policy")),
        ..WorkerOptions::new("fragile", handler)
    });
    let runtime = runtime_id(&mut events).await;
    let slow = s.ask("slow", None).await;
    next_event(
        &mut events,
        "the slow claim",
        |e| matches!(e, WorkerEvent::Claimed { message_id, .. } if *message_id == slow),
    )
    .await;
    // The deadline gives the stuck question's handler about 3 s.
    let deadline = Timestamp(Timestamp::now().0 + Duration::from_secs(3));
    let stuck = s.ask("stuck", Some(deadline)).await;
    next_event(
        &mut events,
        "the stuck claim",
        |e| matches!(e, WorkerEvent::Claimed { message_id, .. } if *message_id == stuck),
    )
    .await;
    let later = s.ask("later", None).await;

    let result = tokio::time::timeout(WAIT, worker)
        .await
        .expect("the worker stops")
        .expect("task");
    let Err(WorkerError::HandlerDidNotStop { job_key }) = result else {
        panic!("expected handler_did_not_stop, got {result:?}");
    };
    let mut seen = Vec::new();
    while let Ok(event) = events.try_recv() {
        seen.push(event);
    }
    assert!(
        seen.iter()
            .any(|e| matches!(e, WorkerEvent::Replied { message_id, .. } if *message_id == slow)),
        "the other job ended normally: {seen:?}"
    );
    assert!(
        seen.iter()
            .all(|e| !matches!(e, WorkerEvent::Claimed { message_id, .. } if *message_id == later)),
        "no new job started: {seen:?}"
    );
    assert!(
        seen.iter().all(|e| !is_outcome_for(e, stuck)),
        "the stuck job was neither finished nor released: {seen:?}"
    );
    match seen.last() {
        Some(WorkerEvent::Stopped {
            reason: StopReason::HandlerDidNotStop,
            job_key: Some(stopped_key),
            ..
        }) => assert_eq!(*stopped_key, job_key),
        other => panic!("the last event is stopped: {other:?}"),
    }
    assert_eq!(s.replies(slow).await, ["SLOW"]);
    // Its heartbeats stopped: the lease (2 s) runs out.
    let until = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let inspect = s.receiver.runtimes().get(runtime).await.expect("inspect");
        if inspect.active_leases == 0 {
            break;
        }
        assert!(tokio::time::Instant::now() < until, "{inspect:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn stopping_cancels_the_handler_and_releases_its_job() {
    let s = setup("lib-release").await;
    let handler = handler_fn(|input: HandlerInput| async move {
        input.cancel.cancelled().await;
        Err(HandlerError::cancelled())
    });
    let cancel = CancellationToken::new();
    let (worker, mut events) = s.start(WorkerOptions {
        cancel: cancel.clone(),
        ..WorkerOptions::new("polite", handler)
    });
    let runtime = runtime_id(&mut events).await;
    let question = s.ask("hold on", None).await;
    next_event(&mut events, "the claim", |e| e.name() == "claimed").await;
    cancel.cancel();
    worker.await.expect("task").expect("a clean stop");
    let released = next_event(&mut events, "the release", |e| e.name() == "released").await;
    assert!(matches!(released, WorkerEvent::Released { message_id, .. } if message_id == question));
    let stopped = next_event(&mut events, "stopped", |e| e.name() == "stopped").await;
    assert!(matches!(
        stopped,
        WorkerEvent::Stopped {
            reason: StopReason::Interrupted,
            ..
        }
    ));
    let inspect = s.receiver.runtimes().get(runtime).await.expect("inspect");
    assert_eq!(inspect.active_leases, 0);
    assert_eq!(inspect.jobs.pending, 1, "pending again at once");
    let stats = s.receiver.runtimes().stats(runtime).await.expect("stats");
    assert_eq!(stats.unfinished_attempts, 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_revoked_token_cancels_the_handler_and_stops_the_worker() {
    let s = setup("lib-revoked").await;
    let token = s
        .receiver
        .create_token(&CreateTokenRequest {
            scopes: vec![Scope::Read, Scope::Write],
            room_ids: None,
            label: None,
        })
        .await
        .expect("token");
    let revocable = Client::new(s.t.url(), token.secret.clone());
    let handler = handler_fn(|input: HandlerInput| async move {
        input.cancel.cancelled().await;
        Err(HandlerError::cancelled())
    });
    let (tx, mut events) = unbounded_channel();
    let options = WorkerOptions {
        from: StartFrom::Now,
        events: EventSink::from(tx),
        ..WorkerOptions::new("revocable", handler)
    };
    let worker = tokio::spawn(async move { run_worker(&revocable, options).await });
    runtime_id(&mut events).await;
    let question = s.ask("are you allowed?", None).await;
    next_event(&mut events, "the claim", |e| e.name() == "claimed").await;
    s.receiver.revoke_token(token.id).await.expect("revoke");
    let failed = next_event(&mut events, "the lost lease", |e| {
        is_outcome_for(e, question)
    })
    .await;
    assert!(
        matches!(&failed, WorkerEvent::Failed { error, .. } if error == "lease_lost"),
        "{failed:?}"
    );
    let result = tokio::time::timeout(WAIT, worker)
        .await
        .expect("the worker stops")
        .expect("task");
    match result {
        Err(WorkerError::Client(err @ ClientError::Api { .. })) => {
            assert_eq!(err.code().map(|c| c.as_str()), Some("unauthorized"));
        }
        other => panic!("expected unauthorized, got {other:?}"),
    }
    let stopped = next_event(&mut events, "stopped", |e| e.name() == "stopped").await;
    assert!(
        matches!(&stopped, WorkerEvent::Stopped { reason: StopReason::Error, code: Some(code), .. } if code == "unauthorized"),
        "{stopped:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn up_to_concurrency_jobs_run_at_once() {
    let s = setup("lib-concurrency").await;
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let handler = handler_fn(move |input: HandlerInput| {
        let barrier = Arc::clone(&barrier);
        async move {
            // Both handlers must be running for either to pass.
            tokio::time::timeout(Duration::from_secs(5), barrier.wait())
                .await
                .map_err(|_| HandlerError::new("ran_alone"))?;
            let text = input.message.text.unwrap_or_default();
            Ok(HandlerOutput::reply(text).with_zero_usage())
        }
    });
    let cancel = CancellationToken::new();
    let (worker, mut events) = s.start(WorkerOptions {
        cancel: cancel.clone(),
        policy: Some(Policy::parse(r#"{"concurrency": 2}"#).expect("policy")),
        ..WorkerOptions::new("pair", handler)
    });
    runtime_id(&mut events).await;
    let first = s.ask("one", None).await;
    let second = s.ask("two", None).await;
    let mut outcomes = Vec::new();
    while outcomes.len() < 2 {
        let outcome = next_event(&mut events, "an outcome", |e| {
            is_outcome_for(e, first) || is_outcome_for(e, second)
        })
        .await;
        outcomes.push(outcome);
    }
    assert!(
        outcomes.iter().all(|e| e.name() == "replied"),
        "{outcomes:?}"
    );
    assert_eq!(s.replies(first).await, ["one"]);
    assert_eq!(s.replies(second).await, ["two"]);
    cancel.cancel();
    worker.await.expect("task").expect("clean stop");
}

#[tokio::test(flavor = "multi_thread")]
async fn finishes_ready_together_go_in_fewer_requests_and_a_lone_one_at_once() {
    const TOGETHER: usize = 6;
    let s = setup_with("lib-finish-batch", true).await;
    let barrier = Arc::new(tokio::sync::Barrier::new(TOGETHER));
    let handler = handler_fn(move |input: HandlerInput| {
        let barrier = Arc::clone(&barrier);
        async move {
            let text = input.message.text.unwrap_or_default();
            if text.starts_with("together") {
                // All of them return at the same moment.
                tokio::time::timeout(Duration::from_secs(10), barrier.wait())
                    .await
                    .map_err(|_| HandlerError::new("ran_alone"))?;
            }
            Ok(HandlerOutput::reply(text).with_zero_usage())
        }
    });
    let cancel = CancellationToken::new();
    let (worker, mut events) = s.start(WorkerOptions {
        cancel: cancel.clone(),
        policy: Some(Policy::parse(r#"{"concurrency": 6}"#).expect("policy")),
        ..WorkerOptions::new("batched", handler)
    });
    runtime_id(&mut events).await;
    let mut questions = Vec::new();
    for i in 0..TOGETHER {
        questions.push(s.ask(&format!("together {i}"), None).await);
    }
    for _ in 0..TOGETHER {
        let outcome = next_event(&mut events, "an outcome", |e| {
            questions.iter().any(|q| is_outcome_for(e, *q))
        })
        .await;
        assert_eq!(outcome.name(), "replied", "{outcome:?}");
    }
    for (i, question) in questions.iter().enumerate() {
        assert_eq!(s.replies(*question).await, [format!("together {i}")]);
    }
    let batches = s.t.requests_to("/finishes");
    let singles = s.t.requests_to("/finish") - batches;
    println!("{TOGETHER} finishes: {batches} batch and {singles} single requests");
    assert!(
        batches >= 1 && batches + singles < TOGETHER,
        "{TOGETHER} finishes ready together took {batches} batch and {singles} single requests"
    );

    // A lone finish is not held back for company: it goes on its own route.
    let alone = s.ask("alone", None).await;
    let outcome = next_event(&mut events, "the lone outcome", |e| {
        is_outcome_for(e, alone)
    })
    .await;
    assert_eq!(outcome.name(), "replied", "{outcome:?}");
    assert_eq!(s.replies(alone).await, ["alone"]);
    assert_eq!(
        s.t.requests_to("/finishes"),
        batches,
        "no batch for one job"
    );
    assert_eq!(
        s.t.requests_to("/finish") - batches,
        singles + 1,
        "one request for the lone finish"
    );
    cancel.cancel();
    worker.await.expect("task").expect("clean stop");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_handler_reads_context_and_notes_and_gets_sealed_content_opened() {
    let s = setup("lib-context").await;
    let client = s.receiver.clone();
    let opened_seen: Arc<Mutex<Vec<Option<SealedContent>>>> = Arc::default();
    let opened_log = Arc::clone(&opened_seen);
    // The seed's SDK example, in Rust.
    let handler = handler_fn(move |input: HandlerInput| {
        let client = client.clone();
        let opened_log = Arc::clone(&opened_log);
        async move {
            if input.cancel.is_cancelled() {
                return Err(HandlerError::cancelled());
            }
            let message = &input.message;
            if message.sealed.is_some() {
                opened_log.lock().expect("lock").push(input.opened.clone());
                return Ok(HandlerOutput::skip("private").with_zero_usage());
            }
            let query = ThreadQuery {
                limit: Some(5),
                max_bytes: Some(4096),
                ..ThreadQuery::default()
            };
            let context = client
                .thread(message.conversation_id, message.message_id, query)
                .await?;
            let notes = client
                .runtimes()
                .notes(input.runtime_id, message.conversation_id, Some(2))
                .await?;
            let mut output = HandlerOutput::reply(format!(
                "{} context messages, {} notes.",
                context.messages.len(),
                notes.len()
            ))
            .with_zero_usage();
            if message.text.as_deref() == Some("remember this") {
                output = output.with_note(NoteInput {
                    key: "remembered".into(),
                    text: "asked to remember".into(),
                    version: 0,
                    source_message_ids: vec![message.message_id],
                });
            }
            Ok(output)
        }
    });
    let cancel = CancellationToken::new();
    let (worker, mut events) = s.start(WorkerOptions {
        cancel: cancel.clone(),
        ..WorkerOptions::new("sdk-worker", handler)
    });
    let runtime = runtime_id(&mut events).await;

    let first = s.ask("what do you know?", None).await;
    next_event(&mut events, "the reply", |e| is_outcome_for(e, first)).await;
    assert_eq!(s.replies(first).await, ["1 context messages, 0 notes."]);
    s.receiver
        .runtimes()
        .put_note(
            runtime,
            s.room,
            "decision",
            &NoteWrite {
                version: 0,
                text: "Decision from the last conversation".into(),
                source_message_ids: vec![first],
            },
        )
        .await
        .expect("note");
    let second = s.ask("remember this", None).await;
    next_event(&mut events, "the reply", |e| is_outcome_for(e, second)).await;
    assert_eq!(s.replies(second).await, ["1 context messages, 1 notes."]);
    let notes = s
        .receiver
        .runtimes()
        .notes(runtime, s.room, None)
        .await
        .expect("notes");
    assert!(
        notes
            .iter()
            .any(|n| n.key == "remembered" && n.source_message_ids == [second]),
        "the note came with the reply: {notes:?}"
    );

    let sealed = s
        .sender
        .send_sealed(
            &SendRequest {
                to: Some(s.receiver_number.clone()),
                ask: true,
                ..SendRequest::default()
            },
            &SealedContent::Text {
                text: "for your eyes only".into(),
            },
        )
        .await
        .expect("sealed");
    let skipped = next_event(&mut events, "the skip", |e| {
        is_outcome_for(e, sealed.message_id)
    })
    .await;
    assert!(
        matches!(&skipped, WorkerEvent::Skipped { reason, .. } if reason == "private"),
        "{skipped:?}"
    );
    assert_eq!(
        *opened_seen.lock().expect("lock"),
        [Some(SealedContent::Text {
            text: "for your eyes only".into()
        })]
    );
    cancel.cancel();
    worker.await.expect("task").expect("clean stop");
}
