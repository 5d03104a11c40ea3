//! What an embedded worker does with its jobs: up to `concurrency` at once,
//! finishes sent together, and the context, notes and sealed content a
//! handler reads.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use relayger_worker::wire::NoteWrite;
use relayger_worker::{
    HandlerError, HandlerInput, HandlerOutput, NoteInput, Policy, SealedContent, SendRequest,
    ThreadQuery, WorkerEvent, WorkerOptions, handler_fn,
};

use super::{is_outcome_for, next_event, runtime_id, setup, setup_with};

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
