//! The dashboard's reads of a runtime's work, against the real schema: the
//! last hour minute by minute, one job in full, a filtered page of jobs.

use relayger_core::ErrorCode;
use relayger_core::job::{AttemptEnd, AttemptOutcome, JobState};
use relayger_core::job_filter::{JobFilter, JobFilterText};
use relayger_core::lookup::JobRef;
use relayger_core::wire::{ACTIVITY_MINUTES, StartFrom};
use relayger_store::Caller;
use serde_json::json;

use crate::support::{Agent, failure, refusal, register, reply};

fn filter(text: JobFilterText<'_>) -> JobFilter {
    JobFilter::parse(text).expect("a valid filter")
}

#[tokio::test(flavor = "multi_thread")]
async fn activity_job_detail_and_search_read_what_the_job_path_wrote() {
    let s = Agent::start().await;
    let (alice, alice_room) = s.contact("alice").await;
    let (bob, bob_room) = s.contact("bob").await;
    let runtime = s
        .runtime("dashboard", StartFrom::Now, json!({"maxAttempts": 1}))
        .await;
    let answered_question = s.ask(&alice, alice_room, "what is the plan?").await;
    let failed_question = s.ask(&bob, bob_room, "will it rain?").await;
    let pending_question = s.ask(&alice, alice_room, "and tomorrow?").await;

    let answered = s.claim_one(runtime).await;
    assert_eq!(answered.message.message_id, answered_question.message_id);
    s.finish(runtime, &answered, reply("plan B"))
        .await
        .expect("replied");
    let failed = s.claim_one(runtime).await;
    assert_eq!(failed.message.message_id, failed_question.message_id);
    s.finish(runtime, &failed, failure("the model is unavailable"))
        .await
        .expect("failed");

    // The last hour: every minute present, oldest first; the figures add up
    // to what happened (summed, so a minute boundary in between is fine).
    let minutes = s
        .store
        .runtime_activity(&s.agent.caller(), runtime)
        .await
        .expect("activity");
    assert_eq!(minutes.len(), ACTIVITY_MINUTES as usize);
    assert!(minutes.windows(2).all(|w| w[0].at.0 < w[1].at.0));
    let sum =
        |f: fn(&relayger_core::wire::ActivityMinute) -> u64| minutes.iter().map(f).sum::<u64>();
    assert_eq!(sum(|m| m.claimed), 2);
    assert_eq!(sum(|m| m.answered), 1);
    assert_eq!(sum(|m| m.failed), 1);
    assert_eq!(sum(|m| m.skipped), 0);
    assert_eq!(sum(|m| m.replies), 1);
    let latest = minutes
        .iter()
        .find(|m| m.replies > 0)
        .expect("a minute with a reply");
    let (median, max) = (
        latest.latency_median_ms.expect("median"),
        latest.latency_max_ms.expect("max"),
    );
    assert!(median <= max && max < 60_000, "{latest:?}");

    // One job in full, by its id, its message's id or its key.
    let caller = s.agent.caller();
    let detail = s
        .store
        .job_detail(&caller, runtime, &JobRef::Id(failed.job_id))
        .await
        .expect("the failed job");
    assert_eq!(detail.job.state, JobState::Dead);
    assert_eq!(detail.question.text.as_deref(), Some("will it rain?"));
    assert_eq!(detail.question.sender.id, bob.id());
    assert_eq!(detail.attempts.len(), 1);
    let attempt = &detail.attempts[0];
    assert_eq!(attempt.outcome, Some(AttemptOutcome::Failed));
    assert_eq!(attempt.ended, Some(AttemptEnd::Finished));
    assert_eq!(attempt.error.as_deref(), Some("the model is unavailable"));
    assert!(attempt.duration_ms.is_some() && attempt.ended_at.is_some());
    assert!(detail.reply.is_none());
    let by_message = s
        .store
        .job_detail(&caller, runtime, &JobRef::Id(answered_question.message_id))
        .await
        .expect("the answered job by its message");
    assert_eq!(by_message.job.job_id, answered.job_id);
    assert_eq!(by_message.job.state, JobState::Handled);
    assert_eq!(
        by_message.reply.as_ref().and_then(|r| r.text.as_deref()),
        Some("plan B")
    );
    assert_eq!(
        by_message.attempts[0].outcome,
        Some(AttemptOutcome::Replied)
    );
    let by_key = s
        .store
        .job_detail(&caller, runtime, &JobRef::Key(answered.job_key.clone()))
        .await
        .expect("the answered job by its key");
    assert_eq!(by_key, by_message);
    let unknown = s
        .store
        .job_detail(&caller, runtime, &JobRef::Id(uuid::Uuid::nil()))
        .await;
    assert_eq!(refusal(&unknown), Some((404, ErrorCode::NotFound)));

    // Search: newest question first, each filter keeps what it says, pages
    // follow `next` and meet every job once.
    let search = async |text: JobFilterText<'_>, after, size| {
        s.store
            .search_jobs(&caller, runtime, &filter(text), after, size)
            .await
            .expect("search")
    };
    let (all, next) = search(JobFilterText::default(), None, 25).await;
    assert_eq!(next, None);
    let questions: Vec<_> = all.iter().map(|j| j.question.message_id).collect();
    assert_eq!(
        questions,
        [
            pending_question.message_id,
            failed_question.message_id,
            answered_question.message_id
        ]
    );
    let bob_number = bob.number().to_string();
    let (by_bob, _) = search(
        JobFilterText {
            sender: Some(&bob_number),
            ..Default::default()
        },
        None,
        25,
    )
    .await;
    assert_eq!(by_bob.len(), 1);
    assert_eq!(by_bob[0].job.job_id, failed.job_id);
    assert_eq!(by_bob[0].question.text.as_deref(), Some("will it rain?"));
    let (dead, _) = search(
        JobFilterText {
            state: Some("dead"),
            ..Default::default()
        },
        None,
        25,
    )
    .await;
    assert_eq!(
        dead.iter().map(|j| j.job.job_id).collect::<Vec<_>>(),
        [failed.job_id]
    );
    let (in_alice_room, _) = search(
        JobFilterText {
            room: Some(alice_room),
            ..Default::default()
        },
        None,
        25,
    )
    .await;
    assert_eq!(in_alice_room.len(), 2);
    let (future, _) = search(
        JobFilterText {
            since: Some("2999-01-01T00:00:00Z"),
            ..Default::default()
        },
        None,
        25,
    )
    .await;
    assert!(future.is_empty());
    let (past, _) = search(
        JobFilterText {
            until: Some("2000-01-01T00:00:00Z"),
            ..Default::default()
        },
        None,
        25,
    )
    .await;
    assert!(past.is_empty());
    let mut paged = Vec::new();
    let mut after = None;
    loop {
        let (page, next) = search(JobFilterText::default(), after, 1).await;
        assert_eq!(page.len(), 1);
        paged.push(page[0].question.message_id);
        match next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    assert_eq!(paged, questions);

    // A token restricted to alice's room reads only that room's jobs.
    let restricted = Caller {
        rooms: Some(vec![alice_room]),
        ..s.agent.caller()
    };
    let claimed_by = async |caller: &Caller| {
        s.store
            .runtime_activity(caller, runtime)
            .await
            .expect("activity")
            .iter()
            .map(|m| m.claimed)
            .sum::<u64>()
    };
    let visible = async |caller: &Caller| {
        s.store
            .search_jobs(caller, runtime, &JobFilter::default(), None, 25)
            .await
            .expect("search")
            .0
            .iter()
            .map(|j| j.question.message_id)
            .collect::<Vec<_>>()
    };
    assert_eq!(claimed_by(&restricted).await, 1);
    assert_eq!(
        visible(&restricted).await,
        [pending_question.message_id, answered_question.message_id]
    );
    assert_eq!(
        refusal(
            &s.store
                .job_detail(&restricted, runtime, &JobRef::Id(failed.job_id))
                .await
        ),
        Some((404, ErrorCode::NotFound))
    );
    // Once bob is no longer a contact, his room's job is gone from every read.
    s.store
        .remove_contact(bob.id(), s.agent.number())
        .await
        .expect("remove the contact");
    assert_eq!(claimed_by(&caller).await, 1);
    assert_eq!(visible(&caller).await, visible(&restricted).await);
    assert_eq!(
        refusal(
            &s.store
                .job_detail(&caller, runtime, &JobRef::Id(failed.job_id))
                .await
        ),
        Some((404, ErrorCode::NotFound))
    );

    // Another agent reaches none of it.
    let other = register(&s.store, "other", relayger_core::wire::IdentityKind::Agent).await;
    let other = other.caller();
    assert_eq!(
        refusal(&s.store.runtime_activity(&other, runtime).await),
        Some((404, ErrorCode::NotFound))
    );
    assert_eq!(
        refusal(
            &s.store
                .job_detail(&other, runtime, &JobRef::Id(failed.job_id))
                .await
        ),
        Some((404, ErrorCode::NotFound))
    );
    assert_eq!(
        refusal(
            &s.store
                .search_jobs(&other, runtime, &JobFilter::default(), None, 25)
                .await
        ),
        Some((404, ErrorCode::NotFound))
    );
    let _ = alice;
}
