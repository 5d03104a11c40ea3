//! A claim costs the same number of statements whatever its batch size: the
//! statements are counted on the claiming connection itself (diesel's
//! instrumentation hook), against the real database.
//!
//! One test in its own binary (not a module of tests/tests.rs): the hook is
//! process-wide, and it is only handed to the connection this test opens
//! for its claims.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use common::bot::Bot;
use diesel::connection::{Instrumentation, InstrumentationEvent, set_default_instrumentation};
use relayger_store::{Caller, PoolOptions, Store};
use serde_json::json;
use uuid::Uuid;

/// Set while the counted connection is being opened.
static OPENING: AtomicBool = AtomicBool::new(false);
/// Statements sent on the counted connection.
static STATEMENTS: AtomicUsize = AtomicUsize::new(0);
/// Statements the counted connection prepared (added to its cache).
static PREPARED: AtomicUsize = AtomicUsize::new(0);

fn counting() -> Option<Box<dyn Instrumentation>> {
    if !OPENING.load(Ordering::SeqCst) {
        return None;
    }
    Some(Box::new(|event: InstrumentationEvent<'_>| match event {
        InstrumentationEvent::StartQuery { .. } => {
            STATEMENTS.fetch_add(1, Ordering::SeqCst);
        }
        InstrumentationEvent::CacheQuery { .. } => {
            PREPARED.fetch_add(1, Ordering::SeqCst);
        }
        _ => {}
    }))
}

fn uuid(text: &str) -> Uuid {
    Uuid::parse_str(text).expect("uuid")
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

    // The claims' own store, on one connection that carries the counter.
    set_default_instrumentation(counting).expect("instrumentation");
    OPENING.store(true, Ordering::SeqCst);
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
    OPENING.store(false, Ordering::SeqCst);
    assert!(
        STATEMENTS.load(Ordering::SeqCst) > 0,
        "the connection is counted"
    );

    let claim = async |max_jobs: u32| {
        let statements = STATEMENTS.load(Ordering::SeqCst);
        let prepared = PREPARED.load(Ordering::SeqCst);
        let response = store
            .claim(&caller, runtime_id, max_jobs, None, 30_000)
            .await
            .expect("claim");
        (
            response,
            STATEMENTS.load(Ordering::SeqCst) - statements,
            PREPARED.load(Ordering::SeqCst) - prepared,
        )
    };

    // One question in one room.
    let (first, first_room) = bot.contact("first").await;
    bot.ask(&first, &first_room, "the only question").await;
    let (one, one_statements, _) = claim(1).await;
    assert_eq!(one.jobs.len(), 1, "{one:?}");

    // Thirty-two questions over eight rooms (four a room: the spread).
    for i in 0..8 {
        let (asker, room) = bot.contact(&format!("asker{i}")).await;
        for q in 0..4 {
            bot.ask(&asker, &room, &format!("question {i}.{q}")).await;
        }
    }
    let (many, many_statements, many_prepared) = claim(32).await;
    assert_eq!(many.jobs.len(), 32, "{many:?}");
    let mut rooms = std::collections::HashMap::new();
    for job in &many.jobs {
        *rooms.entry(job.message.conversation_id).or_insert(0) += 1;
    }
    assert_eq!(rooms.len(), 8, "{rooms:?}");
    assert!(rooms.values().all(|&n| n == 4), "{rooms:?}");

    println!("statements per claim: 1 job {one_statements}, 32 jobs {many_statements}");
    assert_eq!(
        one_statements, many_statements,
        "a claim of 32 jobs sends as many statements as a claim of one"
    );
    // Transaction control included: the lock, the expiry check, the state
    // read, the scan's three, one candidate round, one write.
    assert!(one_statements <= 12, "{one_statements} statements");
    // The same shapes as the first claim: nothing is prepared again.
    assert_eq!(many_prepared, 0, "the second claim re-prepared statements");
}
