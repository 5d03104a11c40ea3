//! What became of a question, as its asker reads it, and the asker's
//! cancel: each state from the jobs the recipients' runtimes hold, the
//! signals a change publishes, and a cancel that no worker can outrun.

use relayger_core::ErrorCode;
use relayger_core::wire::{
    Delivery, DeliveryState, IdentityKind, JobResult, RecipientDelivery, StartFrom,
};
use relayger_store::StoreError;
use serde_json::json;
use uuid::Uuid;

use crate::support::{Agent, User, failure, refusal, register, reply, send};

/// The agent, a person who asks it, their room.
struct Asked {
    base: Agent,
    asker: User,
    room: Uuid,
}

impl Asked {
    async fn start() -> Asked {
        let base = Agent::start().await;
        let (asker, room) = base.contact("asker").await;
        Asked { base, asker, room }
    }

    async fn ask(&self) -> Uuid {
        self.base
            .ask(&self.asker, self.room, "what now?")
            .await
            .message_id
    }

    async fn delivery(&self, message: Uuid) -> Delivery {
        self.base
            .store
            .delivery(&self.asker.caller(), self.room, message)
            .await
            .expect("the delivery")
    }

    /// The agent's one recipient entry.
    async fn agent_view(&self, message: Uuid) -> RecipientDelivery {
        let delivery = self.delivery(message).await;
        assert_eq!(delivery.recipients.len(), 1, "{delivery:?}");
        let agent = delivery.recipients[0].clone();
        assert_eq!(agent.identity_id, self.base.agent.id());
        assert_eq!(delivery.state, agent.state, "one recipient sums up alone");
        agent
    }

    async fn cancel(&self, message: Uuid) -> Result<Delivery, StoreError> {
        self.base
            .store
            .cancel_question(&self.asker.caller(), self.room, message)
            .await
    }
}

fn state_of(view: &RecipientDelivery) -> (DeliveryState, Option<&str>, u32) {
    (view.state, view.reason.as_deref(), view.listeners)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_question_is_queued_then_working_then_answered() {
    let t = Asked::start().await;
    let unheard = t.ask().await;
    // No runtime: queued, and nobody listens.
    assert_eq!(
        state_of(&t.agent_view(unheard).await),
        (DeliveryState::Queued, None, 0)
    );
    let runtime = t.base.runtime("bot", StartFrom::Now, json!({})).await;
    // Registered `--from now` after it: that runtime never takes it.
    assert_eq!(t.agent_view(unheard).await.listeners, 0);

    let question = t.ask().await;
    assert_eq!(
        state_of(&t.agent_view(question).await),
        (DeliveryState::Queued, None, 1),
        "a runtime yet to scan it listens"
    );
    let job = t.base.claim_one(runtime).await;
    let working = t.agent_view(question).await;
    assert_eq!(state_of(&working), (DeliveryState::Working, None, 1));
    assert_eq!(working.attempts, 1);

    let answer = t.base.reply(runtime, &job).await;
    let answered = t.agent_view(question).await;
    assert_eq!(state_of(&answered), (DeliveryState::Answered, None, 1));
    assert_eq!(answered.reply_message_id, answer.reply_message_id);
    assert!(answered.reply_message_id.is_some());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dead_letter_fails_and_a_skip_rejects_with_a_code_only() {
    let t = Asked::start().await;
    let once = t
        .base
        .runtime("once", StartFrom::Now, json!({"maxAttempts": 1}))
        .await;
    let failing = t.ask().await;
    let job = t.base.claim_one(once).await;
    let failed = failure("the model said: my secret prompt");
    t.base
        .finish(once, &job, failed)
        .await
        .expect("dead letter");
    let view = t.agent_view(failing).await;
    assert_eq!(
        state_of(&view),
        (DeliveryState::Failed, Some("attempts_exhausted"), 1)
    );

    let skipped = t.ask().await;
    let job = t.base.claim_one(once).await;
    let skip = JobResult {
        skip: Some("my private rule #7".to_owned()),
        ..JobResult::default()
    };
    t.base.finish(once, &job, skip).await.expect("skipped");
    assert_eq!(
        state_of(&t.agent_view(skipped).await),
        (DeliveryState::Rejected, Some("handler_skipped"), 1),
        "the handler's text never reaches the asker"
    );

    // A policy that refuses the asker: rejected with the policy's code, at
    // the claim that judges it.
    let stranger = register(&t.base.store, "stranger", IdentityKind::Person).await;
    let picky = t
        .base
        .runtime(
            "picky",
            StartFrom::Now,
            json!({"allowedSenders": [stranger.number().to_string()]}),
        )
        .await;
    let refused = t.ask().await;
    // `once` takes it too: two runtimes of one agent.
    let claimed = t.base.claim(picky, 1).await;
    assert!(claimed.jobs.is_empty(), "{claimed:?}");
    let both = t.agent_view(refused).await;
    assert_eq!(
        state_of(&both),
        (DeliveryState::Queued, None, 2),
        "`once` has yet to take it: queued beats rejected"
    );
    let job = t.base.claim_one(once).await;
    let failed = failure("boom");
    t.base
        .finish(once, &job, failed)
        .await
        .expect("dead letter");
    assert_eq!(
        state_of(&t.agent_view(refused).await),
        (DeliveryState::Failed, Some("attempts_exhausted"), 2),
        "failed beats rejected"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_question_canceled_while_queued_is_never_claimed_and_spends_nothing() {
    let t = Asked::start().await;
    let runtime = t.base.runtime("bot", StartFrom::Now, json!({})).await;
    let question = t.ask().await;
    let canceled = t.cancel(question).await.expect("canceled");
    assert!(canceled.canceled);
    assert_eq!(canceled.state, DeliveryState::Canceled);
    // Again: the same answer, nothing more written.
    assert_eq!(
        t.cancel(question).await.expect("idempotent").state,
        DeliveryState::Canceled
    );

    // Its runtime had not scanned it: the scan makes the job, the claim
    // skips it.
    let claimed = t.base.claim(runtime, 8).await;
    assert!(claimed.jobs.is_empty(), "{claimed:?}");
    let stats = t
        .base
        .store
        .runtime_stats(&t.base.agent.caller(), runtime)
        .await
        .expect("stats");
    assert_eq!((stats.claims, stats.budget_used_last_hour), (0, 0));
    assert_eq!(stats.jobs.skipped, 1, "{stats:?}");
    let view = t.agent_view(question).await;
    assert_eq!(state_of(&view), (DeliveryState::Canceled, None, 1));
    assert_eq!(view.attempts, 0);

    // A job already made and pending is ended by the cancel itself.
    let busy = t
        .base
        .runtime(
            "busy",
            StartFrom::Now,
            json!({"activeHoursUTC": [closed_hours()]}),
        )
        .await;
    let second = t.ask().await;
    let idle = t.base.claim(busy, 1).await;
    assert!(idle.jobs.is_empty(), "outside its hours: made, not granted");
    t.cancel(second).await.expect("canceled");
    assert_eq!(
        t.base
            .query_n(&format!(
                "SELECT count(*) AS n FROM jobs WHERE message_id = '{second}' \
                 AND state = 'skipped' AND reason = 'canceled'"
            ))
            .await,
        1,
        "the pending job of busy is ended by the cancel"
    );
    assert!(t.base.claim(runtime, 8).await.jobs.is_empty());
    assert_eq!(
        t.base
            .query_n(&format!(
                "SELECT count(*) AS n FROM jobs WHERE message_id = '{second}' \
                 AND state = 'skipped' AND reason = 'canceled'"
            ))
            .await,
        2,
        "the pending job (busy) and the one made later (bot) are both skipped"
    );
}

/// An activeHoursUTC window that is closed now.
fn closed_hours() -> String {
    let hour = (time::OffsetDateTime::now_utc().hour() + 2) % 24;
    format!("{hour:02}:00-{:02}:00", (hour + 1) % 24)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_question_canceled_while_held_refuses_its_holder_and_writes_nothing() {
    let t = Asked::start().await;
    let runtime = t.base.runtime("bot", StartFrom::Now, json!({})).await;
    let question = t.ask().await;
    let job = t.base.claim_one(runtime).await;
    assert_eq!(
        t.cancel(question).await.expect("canceled").state,
        DeliveryState::Canceled
    );

    let store = &t.base.store;
    let caller = t.base.agent.caller();
    let beat = store
        .heartbeat(
            &caller,
            runtime,
            job.job_id,
            &job.owner,
            job.version,
            30_000,
        )
        .await;
    assert_eq!(refusal(&beat), Some((409, ErrorCode::JobCanceled)));
    let finish = t.base.finish(runtime, &job, reply("too late")).await;
    assert_eq!(refusal(&finish), Some((409, ErrorCode::JobCanceled)));
    let release = store
        .release(&caller, runtime, job.job_id, &job.owner, job.version)
        .await;
    assert_eq!(refusal(&release), Some((409, ErrorCode::JobCanceled)));

    assert_eq!(
        t.base
            .query_n(&format!(
                "SELECT count(*) AS n FROM messages WHERE reply_to = '{question}'"
            ))
            .await,
        0,
        "no reply was written"
    );
    let stats = store.runtime_stats(&caller, runtime).await.expect("stats");
    assert_eq!(
        (stats.claims, stats.unfinished_attempts),
        (1, 1),
        "its budget unit stays spent; the attempt is unfinished"
    );
    assert!(
        t.base
            .log_kinds(runtime)
            .await
            .contains(&"canceled".to_owned()),
        "the attempt's end is in the log"
    );
    // The slot is free: the next question is granted at once.
    t.ask().await;
    assert_eq!(t.base.claim(runtime, 1).await.jobs.len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn only_the_sender_cancels_only_a_question_and_only_members_read() {
    let t = Asked::start().await;
    let question = t.ask().await;
    let store = &t.base.store;
    let by_agent = store
        .cancel_question(&t.base.agent.caller(), t.room, question)
        .await;
    assert_eq!(refusal(&by_agent), Some((403, ErrorCode::Forbidden)));

    let outsider = register(store, "outsider", IdentityKind::Person).await;
    for answer in [
        store
            .cancel_question(&outsider.caller(), t.room, question)
            .await,
        store.delivery(&outsider.caller(), t.room, question).await,
    ] {
        assert_eq!(refusal(&answer), Some((404, ErrorCode::NotFound)));
    }
    let no_such = store
        .delivery(&t.asker.caller(), t.room, Uuid::now_v7())
        .await;
    assert_eq!(refusal(&no_such), Some((404, ErrorCode::NotFound)));

    let statement = send(store, &t.asker, t.room, "just so you know", false).await;
    let not_asked = t.cancel(statement.message_id).await;
    assert_eq!(
        refusal(&not_asked),
        Some((422, ErrorCode::UnprocessableEntity))
    );
    assert_eq!(
        t.base
            .query_n("SELECT count(*) AS n FROM question_cancels")
            .await,
        0,
        "refused cancels write nothing"
    );
    // The agent, a member, reads the delivery too.
    let seen = store
        .delivery(&t.base.agent.caller(), t.room, question)
        .await
        .expect("a member reads it");
    assert_eq!(seen.recipients.len(), 1);
    assert_eq!(
        seen.recipients[0].identity_id,
        t.base.agent.id(),
        "not the asker itself"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn every_change_of_a_delivery_signals_its_asker() {
    let t = Asked::start().await;
    let runtime = t
        .base
        .runtime("bot", StartFrom::Now, json!({"maxAttempts": 1}))
        .await;
    let mut bus = t.base.store.subscribe_wakes();
    let asker = t.asker.id();
    let mut next_askers = || {
        let mut seen = Vec::new();
        while let Ok(wakes) = bus.try_recv() {
            seen.extend(wakes.asker_ids.iter().copied());
        }
        seen
    };

    let question = t.ask().await;
    assert_eq!(
        next_askers(),
        Vec::<Uuid>::new(),
        "a send is no delivery change"
    );
    let job = t.base.claim_one(runtime).await;
    assert_eq!(next_askers(), vec![asker], "claimed");
    let failed = failure("boom");
    t.base
        .finish(runtime, &job, failed)
        .await
        .expect("dead letter");
    assert_eq!(next_askers(), vec![asker], "a dead letter");
    t.base
        .store
        .retry_dead_letter(
            &t.base.agent.caller(),
            runtime,
            &relayger_core::lookup::JobRef::Id(job.job_id),
        )
        .await
        .expect("revived by hand");
    assert_eq!(next_askers(), vec![asker], "a dead letter revived");
    assert_eq!(t.agent_view(question).await.state, DeliveryState::Queued);
    let job = t.base.claim_one(runtime).await;
    t.base.reply(runtime, &job).await;
    next_askers();

    let answered = t.ask().await;
    let job = t.base.claim_one(runtime).await;
    next_askers();
    t.base.reply(runtime, &job).await;
    assert_eq!(next_askers(), vec![asker], "a reply");

    // No job of it yet (the runtime has not scanned it): the cancel alone
    // changes the delivery, from queued to canceled.
    let unscanned = t.ask().await;
    next_askers();
    t.cancel(unscanned).await.expect("canceled");
    assert_eq!(next_askers(), vec![asker], "a cancel before any job");
    t.base.claim(runtime, 1).await;
    next_askers();

    let canceled = t.ask().await;
    let claimed = t.base.claim(runtime, 1).await;
    assert_eq!(claimed.jobs.len(), 1);
    next_askers();
    t.cancel(canceled).await.expect("canceled");
    assert_eq!(next_askers(), vec![asker], "a cancel that ended a job");
    t.cancel(canceled).await.expect("again");
    assert_eq!(
        next_askers(),
        Vec::<Uuid>::new(),
        "a cancel that changed nothing"
    );
    let _ = (question, answered);
}

#[tokio::test(flavor = "multi_thread")]
async fn canceling_a_question_no_runtime_took_signals_its_asker() {
    let t = Asked::start().await;
    let mut bus = t.base.store.subscribe_wakes();
    let asker = t.asker.id();
    let question = t.ask().await;
    while bus.try_recv().is_ok() {}
    t.cancel(question).await.expect("canceled");
    let mut seen = Vec::new();
    while let Ok(wakes) = bus.try_recv() {
        seen.extend(wakes.asker_ids.iter().copied());
    }
    assert_eq!(seen, vec![asker], "the delivery became canceled");
}
