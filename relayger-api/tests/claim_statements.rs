//! A claim costs the same number of statements and round trips whatever its
//! batch size: counted by the store's own instrumentation on the one
//! connection of a store opened for the claims, against the real database.

use relayger_store::{Caller, PoolOptions, Store};
use serde_json::json;
use uuid::Uuid;

use crate::common::bot::Bot;

fn uuid(text: &str) -> Uuid {
    Uuid::parse_str(text).expect("uuid")
}

/// The claim granted four jobs in each of `rooms` rooms (the spread).
fn assert_four_a_room(claimed: &relayger_core::wire::ClaimResponse, rooms: usize) {
    assert_eq!(claimed.jobs.len(), rooms * 4, "{claimed:?}");
    let mut per_room = std::collections::HashMap::new();
    for job in &claimed.jobs {
        *per_room.entry(job.message.conversation_id).or_insert(0) += 1;
    }
    assert_eq!(per_room.len(), rooms, "{per_room:?}");
    assert!(per_room.values().all(|&n| n == 4), "{per_room:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_claim_of_one_job_and_of_thirty_two_send_the_same_statements() {
    let bot = Bot::start().await;
    let runtime = bot
        .runtime(
            "counted",
            "now",
            json!({"concurrency": 64, "maxCallsPerHour": 1000}),
        )
        .await;
    let runtime_id = uuid(&runtime);
    let caller = Caller {
        identity_id: uuid(&bot.agent.id),
        token_id: uuid(&bot.agent.token_id),
        rooms: None,
    };

    // The claims' own store, on one connection, counted by the store's own
    // instrumentation (the counters every pooled connection adds to).
    let store = Store::connect(
        bot.server.db.url(),
        PoolOptions {
            max_connections: 1,
            ..PoolOptions::default()
        },
    )
    .await
    .expect("store");
    store
        .runtime(caller.identity_id, runtime_id)
        .await
        .expect("the runtime, on the counted connection");
    assert!(
        store.statement_counts().statements > 0,
        "the connection is counted"
    );

    let claim = async |max_jobs: u32| {
        let before = store.statement_counts();
        let response = store
            .claim(&caller, runtime_id, max_jobs, None, 30_000, false)
            .await
            .expect("claim")
            .response;
        let after = store.statement_counts();
        (
            response,
            after.statements - before.statements,
            after.prepares() - before.prepares(),
            after.round_trips() - before.round_trips(),
        )
    };

    // One question in one room.
    let (first, first_room) = bot.contact("first").await;
    bot.ask(&first, &first_room, "the only question").await;
    let (one, one_statements, one_prepared, one_round_trips) = claim(1).await;
    assert_eq!(one.jobs.len(), 1, "{one:?}");

    // Thirty-two questions over eight rooms (four a room: the spread).
    for i in 0..8 {
        let (asker, room) = bot.contact(&format!("asker{i}")).await;
        for q in 0..4 {
            bot.ask(&asker, &room, &format!("question {i}.{q}")).await;
        }
    }
    let (many, many_statements, many_prepared, many_round_trips) = claim(32).await;
    assert_four_a_room(&many, 8);

    println!(
        "statements per claim: 1 job {one_statements} ({one_round_trips} round trips), \
         32 jobs {many_statements} ({many_round_trips} round trips)"
    );
    assert_eq!(
        one_statements, many_statements,
        "a claim of 32 jobs sends as many statements as a claim of one"
    );
    // Transaction control included: the lock, the expiry check, the state
    // read, the scan's three, one candidate round, one write.
    assert!(one_statements <= 12, "{one_statements} statements");
    // The first claim also prepares its statements (a round trip each).
    assert_eq!(
        one_round_trips - one_prepared,
        many_round_trips,
        "a claim of 32 jobs takes as many round trips as a claim of one"
    );
    // Pipelined: BEGIN with the lock, the expiry check, the state read and
    // the scan's reads; the scan's write with the candidate round; the
    // grants with COMMIT.
    assert!(many_round_trips <= 3, "{many_round_trips} round trips");
    // The same shapes as the first claim: nothing is prepared again.
    assert_eq!(many_prepared, 0, "the second claim re-prepared statements");

    // A backlog deeper than the spread: four rooms of twelve questions, made
    // jobs by one scan. Sixteen jobs are four a room, and one candidate
    // round finds them: the scan's jobs take turns between rooms, so the
    // round is not spent on one room's twelve.
    for i in 0..4 {
        let (asker, room) = bot.contact(&format!("deep{i}")).await;
        for q in 0..12 {
            bot.ask(&asker, &room, &format!("deep question {i}.{q}"))
                .await;
        }
    }
    let (deep, deep_statements, _, deep_round_trips) = claim(16).await;
    assert_four_a_room(&deep, 4);
    assert_eq!(
        deep_statements, one_statements,
        "a backlog deeper than the spread took more than one candidate round"
    );
    assert_eq!(deep_round_trips, many_round_trips);
    assert!(deep.more_pending || deep.work_left, "{deep:?}");
}
