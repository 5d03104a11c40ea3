//! What an embedded worker does with its jobs: up to `concurrency` at once,
//! finishes sent together, and the context, notes and sealed content a
//! handler reads.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use relayger_worker::wire::{ClaimRequest, LeaseRequest, NoteWrite, RegisterRuntimeRequest};
use relayger_worker::{
    CancellationToken, HandlerError, HandlerInput, HandlerOutput, NoteInput, Policy, SealedContent,
    SendRequest, StartFrom, ThreadQuery, WorkerEvent, WorkerOptions, handler_fn,
};

use super::{is_outcome_for, next_event, runtime_id, setup, setup_with};
use crate::cli_support::ServerSettings;

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
    let (worker, mut events, cancel) = s.start_cancellable(WorkerOptions {
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
    let s = setup_with("lib-finish-batch", ServerSettings::lease(2000, true)).await;
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
    let (worker, mut events, cancel) = s.start_cancellable(WorkerOptions {
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
    let (worker, mut events, cancel) = s.start_cancellable(WorkerOptions {
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

/// Another process of the runtime (here the test, by hand) holds a job and
/// then goes silent (cut off or dead) while this worker's claim grants it a
/// fresh job, which it skips (no reply: no signal follows). The grant says
/// when the other lease expires (`retryAt`), so the worker takes the silent
/// process's job over moments after its lease ends, not at a fallback poll
/// minutes away.
#[tokio::test(flavor = "multi_thread")]
async fn a_job_whose_owner_went_silent_is_taken_over_soon_after_its_lease() {
    const LEASE: Duration = Duration::from_secs(5);
    let s = setup_with(
        "lib-takeover",
        ServerSettings::lease(LEASE.as_millis() as u64, false),
    )
    .await;
    let policy = Policy::parse(r#"{"concurrency": 2}"#).expect("policy");
    let runtimes = s.receiver.runtimes();
    let runtime = runtimes
        .register(&RegisterRuntimeRequest {
            name: "shared".into(),
            from: StartFrom::Now,
            policy: Some(policy.clone()),
        })
        .await
        .expect("register");
    let held = s.ask("held by a process that goes silent", None).await;
    let claim = runtimes
        .claim(runtime.id, &ClaimRequest::default())
        .await
        .expect("claim");
    let [job] = claim.response.jobs.as_slice() else {
        panic!("one job: {:?}", claim.response);
    };
    assert_eq!(job.message.message_id, held);
    let lease = LeaseRequest {
        owner: job.owner.clone(),
        version: job.version,
    };
    // The silent process is alive until the fresh question is answered:
    // its lease is renewed, so the worker's grant comes while it runs.
    let alive = CancellationToken::new();
    let beats = tokio::spawn({
        let client = s.receiver.clone();
        let (alive, job_id) = (alive.clone(), job.job_id);
        async move {
            let mut last = Instant::now();
            while !alive.is_cancelled() {
                let sent = Instant::now();
                client
                    .runtimes()
                    .heartbeat(runtime.id, job_id, &lease)
                    .await
                    .expect("the held lease is renewed");
                last = sent;
                tokio::select! {
                    _ = alive.cancelled() => {}
                    _ = tokio::time::sleep(LEASE / 5) => {}
                }
            }
            last
        }
    });

    let handler = handler_fn(|input: HandlerInput| async move {
        let text = input.message.text.unwrap_or_default();
        Ok(match text.as_str() {
            "skip me" => HandlerOutput::skip("not for me"),
            _ => HandlerOutput::reply(text.to_uppercase()).with_zero_usage(),
        })
    });
    // Asked before the worker starts: its first claim grants the job, and
    // no signal comes after that claim.
    let fresh = s.ask("skip me", None).await;
    let (worker, mut events, cancel) = s.start_cancellable(WorkerOptions {
        policy: Some(policy),
        fallback_interval: Duration::from_secs(600),
        ..WorkerOptions::new("shared", handler)
    });
    assert_eq!(runtime_id(&mut events).await, runtime.id);
    let skipped = next_event(&mut events, "the skip", |e| is_outcome_for(e, fresh)).await;
    assert_eq!(skipped.name(), "skipped", "{skipped:?}");
    alive.cancel();
    let last_beat = beats.await.expect("heartbeats");

    let taken = next_event(&mut events, "the takeover", |e| is_outcome_for(e, held)).await;
    assert_eq!(taken.name(), "replied", "{taken:?}");
    let after_expiry = last_beat.elapsed().saturating_sub(LEASE);
    assert!(
        after_expiry < Duration::from_secs(4),
        "taken over {after_expiry:?} after the lease ended"
    );
    assert_eq!(
        s.replies(held).await,
        ["HELD BY A PROCESS THAT GOES SILENT"]
    );
    cancel.cancel();
    worker.await.expect("task").expect("clean stop");
}

/// The asker cancels while the handler runs: the next heartbeat learns it,
/// the handler's token fires, the worker reports `canceled`, nothing of the
/// handler's late answer is written, and the slot serves the next question.
#[tokio::test(flavor = "multi_thread")]
async fn a_question_canceled_while_its_handler_runs_aborts_it_and_writes_nothing() {
    let s = setup("lib-cancel").await;
    let (started_tx, mut started) = tokio::sync::mpsc::unbounded_channel::<()>();
    let aborted = Arc::new(Mutex::new(false));
    let handler = handler_fn({
        let aborted = Arc::clone(&aborted);
        move |input: HandlerInput| {
            let (started_tx, aborted) = (started_tx.clone(), Arc::clone(&aborted));
            async move {
                let text = input.message.text.unwrap_or_default();
                if text == "take your time" {
                    started_tx.send(()).ok();
                    input.cancel.cancelled().await;
                    *aborted.lock().expect("flag") = true;
                    // A handler that answers anyway: the server refuses it.
                    return Ok(HandlerOutput::reply("too late").with_zero_usage());
                }
                Ok(HandlerOutput::reply(text).with_zero_usage())
            }
        }
    });
    let (worker, mut events, cancel) =
        s.start_cancellable(WorkerOptions::new("cancelable", handler));
    runtime_id(&mut events).await;
    let question = s.ask("take your time", None).await;
    tokio::time::timeout(Duration::from_secs(30), started.recv())
        .await
        .expect("the handler started");
    let delivery = s
        .sender
        .cancel_question(s.room, question)
        .await
        .expect("canceled");
    assert!(delivery.canceled);
    let event = next_event(&mut events, "canceled", |e| {
        matches!(e, WorkerEvent::Canceled { message_id, .. } if *message_id == question)
            || is_outcome_for(e, question)
    })
    .await;
    assert_eq!(event.name(), "canceled", "{event:?}");
    assert!(*aborted.lock().expect("flag"), "the handler's token fired");
    assert_eq!(s.replies(question).await, Vec::<String>::new());
    let after = s.sender.delivery(s.room, question).await.expect("delivery");
    assert_eq!(after.state, relayger_worker::DeliveryState::Canceled);

    let next = s.ask("next one", None).await;
    let outcome = next_event(&mut events, "the next outcome", |e| is_outcome_for(e, next)).await;
    assert_eq!(outcome.name(), "replied", "{outcome:?}");
    cancel.cancel();
    worker.await.expect("task").expect("clean stop");
}
