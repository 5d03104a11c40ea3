//! Claim liveness where only the store shows it: a claim passes over an
//! expired lease whose job row another transaction locks, and a claim that
//! spends its budget on thousands of refusals tells the worker to claim
//! again at once.

use std::time::Duration;

use relayger_core::wire::{ClaimResponse, StartFrom};
use serde_json::json;
use time::OffsetDateTime;

use crate::support::{Agent, execute};

/// Whether a worker that got this idle or partial answer claims again at
/// once: `morePending`, or a `retryAt` that is already due (one second of
/// leeway for the two clocks of this one machine).
fn claims_again_at_once(claimed: &ClaimResponse) -> bool {
    claimed.more_pending
        || claimed
            .retry_at
            .is_some_and(|at| at.0 <= OffsetDateTime::now_utc() + Duration::from_secs(1))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_claim_is_not_held_up_by_an_expired_lease_whose_job_another_transaction_locks() {
    let bot = Agent::start().await;
    let (asker, room) = bot.contact("asker").await;
    let runtime = bot
        .runtime("hygiene", StartFrom::Now, json!({"concurrency": 2}))
        .await;
    bot.ask(&asker, room, "first").await;
    let job_id = bot.claim_one(runtime).await.job_id;
    // The lease has run out while a finish (here: another connection) holds
    // the job row.
    let mut holder = bot.connection().await;
    execute(
        &mut holder,
        &format!(
            "UPDATE jobs SET lease_expires_at = now() - interval '1 second' WHERE id = '{job_id}'"
        ),
    )
    .await;
    execute(
        &mut holder,
        &format!("BEGIN; SELECT id FROM jobs WHERE id = '{job_id}' FOR UPDATE"),
    )
    .await;
    bot.ask(&asker, room, "second").await;
    let claim = tokio::time::timeout(Duration::from_secs(5), bot.claim(runtime, 1))
        .await
        .expect("the claim waited for the locked expired job instead of passing it over");
    assert_eq!(claim.jobs.len(), 1, "{claim:?}");
    execute(&mut holder, "ROLLBACK").await;
    // Once the row is free, the next claim expires the lease.
    bot.claim(runtime, 1).await;
    let log = bot.log_kinds(runtime).await;
    assert!(log.iter().any(|kind| kind == "expired"), "{log:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_claim_that_spends_its_budget_on_five_thousand_skips_says_more_is_pending_and_retry_now()
{
    let bot = Agent::start().await;
    let (stranger, stranger_room) = bot.contact("stranger").await;
    let (friend, friend_room) = bot.contact("friend").await;
    let runtime = bot
        .runtime(
            "flooded",
            StartFrom::Now,
            json!({"allowedSenders": [friend.number()]}),
        )
        .await;
    // 5,000 refused questions already scanned into pending jobs (seeded in
    // SQL: sending them one by one would take minutes).
    let seed = [
        format!(
            "INSERT INTO messages (id, room_id, seq, sender_id, text, ask)
             SELECT gen_random_uuid(), '{stranger_room}', g, '{}', 'spam ' || g, true
             FROM generate_series(1, 5000) AS g",
            stranger.id()
        ),
        format!("UPDATE rooms SET last_seq = 5000 WHERE id = '{stranger_room}'"),
        format!(
            "INSERT INTO jobs (id, runtime_id, room_id, message_id, state)
             SELECT gen_random_uuid(), '{runtime}', room_id, id, 'pending'
             FROM messages WHERE room_id = '{stranger_room}'"
        ),
        format!(
            "UPDATE runtime_checkpoints SET seq = 5000
             WHERE runtime_id = '{runtime}' AND room_id = '{stranger_room}'"
        ),
    ];
    for sql in &seed {
        bot.execute(sql).await;
    }
    let question = bot
        .ask(&friend, friend_room, "a real question")
        .await
        .message_id;

    let first = bot.claim(runtime, 1).await;
    assert!(first.jobs.is_empty(), "{first:?}");
    assert!(first.more_pending, "{first:?}");
    assert!(claims_again_at_once(&first), "{first:?}");
    let mut claims = 1;
    loop {
        let claimed = bot.claim(runtime, 1).await;
        claims += 1;
        if let Some(job) = claimed.jobs.first() {
            assert_eq!(job.message.message_id, question);
            break;
        }
        assert!(
            claims_again_at_once(&claimed),
            "claim {claims}: {claimed:?}"
        );
        assert!(claims < 50, "never reached the allowed question");
    }
    let view = bot.inspect(runtime).await;
    assert_eq!(view.jobs.skipped, 5000, "{view:?}");
}
