//! Stopping an embedded worker: a handler that ignores its cancellation,
//! a stop that releases the running job, a revoked token.

use std::sync::Arc;
use std::time::Duration;

use relayger_worker::wire::{CreateTokenRequest, Scope};
use relayger_worker::{
    Client, ClientError, EventSink, HandlerError, HandlerInput, HandlerOutput, Policy, StartFrom,
    StopReason, Timestamp, WorkerError, WorkerEvent, WorkerOptions, handler_fn, run_worker,
};
use tokio::sync::mpsc::unbounded_channel;

use super::{WAIT, is_outcome_for, next_event, runtime_id, setup};

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
    let (worker, mut events, cancel) = s.start_cancellable(WorkerOptions {
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
