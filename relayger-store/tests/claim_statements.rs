//! A claim, and a finish, costs the same number of round trips whatever its
//! batch size: counted by the store's own instrumentation on the one
//! connection of a store opened for the test, against the real database.

use relayger_core::wire::{FinishOutcome, FinishResponse, JobResult, StartFrom};
use relayger_store::{Caller, JobFinishInput, PoolOptions, Store};
use serde_json::json;
use uuid::Uuid;

use crate::support::Agent;

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

/// `call`'s answer and what it sent on `store`.
async fn count_on<T>(store: &Store, call: impl AsyncFnOnce(&Store) -> T) -> (T, Sent) {
    let before = store.statement_counts();
    let answer = call(store).await;
    let after = store.statement_counts();
    let sent = Sent {
        statements: after.statements - before.statements,
        prepares: after.prepares() - before.prepares(),
        round_trips: after.round_trips() - before.round_trips(),
    };
    (answer, sent)
}

/// An agent with a runtime, and a store of its own on one connection,
/// counted by the store's own instrumentation (the counters every pooled
/// connection adds to).
struct Counted {
    bot: Agent,
    runtime_id: Uuid,
    caller: Caller,
    store: Store,
}

/// What a counted call sent: statements, prepares and round trips.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Sent {
    statements: u64,
    prepares: u64,
    round_trips: u64,
}

impl Counted {
    async fn start(runtime: &str) -> Counted {
        let bot = Agent::start().await;
        let runtime_id = bot
            .runtime(
                runtime,
                StartFrom::Now,
                json!({"concurrency": 64, "maxCallsPerHour": 1000}),
            )
            .await;
        let caller = bot.agent.caller();
        let store = Store::connect(
            bot.db.url(),
            PoolOptions {
                max_connections: 1,
                ..PoolOptions::default()
            },
        )
        .await
        .expect("store");
        store
            .runtime(&caller, runtime_id)
            .await
            .expect("the runtime, on the counted connection");
        assert!(
            store.statement_counts().statements > 0,
            "the connection is counted"
        );
        Counted {
            bot,
            runtime_id,
            caller,
            store,
        }
    }

    /// `call`'s answer and what it sent.
    async fn count<T>(&self, call: impl AsyncFnOnce(&Store) -> T) -> (T, Sent) {
        count_on(&self.store, call).await
    }

    async fn claim(&self, max_jobs: u32) -> (relayger_core::wire::ClaimResponse, Sent) {
        self.count(async |store| {
            store
                .claim(&self.caller, self.runtime_id, max_jobs, None, 30_000, false)
                .await
                .expect("claim")
                .response
        })
        .await
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_claim_of_one_job_and_of_thirty_two_send_the_same_statements() {
    let counted = Counted::start("counted").await;
    let bot = &counted.bot;
    let claim = async |max_jobs: u32| {
        let (response, sent) = counted.claim(max_jobs).await;
        (response, sent.statements, sent.prepares, sent.round_trips)
    };

    // One question in one room.
    let (first, first_room) = bot.contact("first").await;
    bot.ask(&first, first_room, "the only question").await;
    let (one, one_statements, one_prepared, one_round_trips) = claim(1).await;
    assert_eq!(one.jobs.len(), 1, "{one:?}");

    // Thirty-two questions over eight rooms (four a room: the spread).
    for i in 0..8 {
        let (asker, room) = bot.contact(&format!("asker{i}")).await;
        for q in 0..4 {
            bot.ask(&asker, room, &format!("question {i}.{q}")).await;
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
    // Transaction control included: the plan mode, the lock, the expiry
    // check, the state read, the scan's two, one candidate round, one write.
    assert!(one_statements <= 11, "{one_statements} statements");
    // The first claim also prepares its statements (a round trip each).
    assert_eq!(
        one_round_trips - one_prepared,
        many_round_trips,
        "a claim of 32 jobs takes as many round trips as a claim of one"
    );
    // Pipelined: BEGIN with the lock, the expiry check, the state read, the
    // scan and the candidate round; the grants with COMMIT.
    assert_eq!(many_round_trips, 2, "{many_round_trips} round trips");
    // The same shapes as the first claim: nothing is prepared again.
    assert_eq!(many_prepared, 0, "the second claim re-prepared statements");

    // A backlog deeper than the spread: four rooms of twelve questions, made
    // jobs by one scan. Sixteen jobs are four a room, and one candidate
    // round finds them: the scan's jobs take turns between rooms, so the
    // round is not spent on one room's twelve.
    for i in 0..4 {
        let (asker, room) = bot.contact(&format!("deep{i}")).await;
        for q in 0..12 {
            bot.ask(&asker, room, &format!("deep question {i}.{q}"))
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

#[tokio::test(flavor = "multi_thread")]
async fn a_claim_of_a_runtime_at_its_concurrency_cap_locks_no_pending_job() {
    let bot = Agent::start().await;
    let runtime = bot
        .runtime("capped", StartFrom::Now, json!({"concurrency": 1}))
        .await;
    let (asker, room) = bot.contact("asker").await;
    bot.ask(&asker, room, "the first question").await;
    let first = bot.claim(runtime, 1).await;
    assert_eq!(first.jobs.len(), 1, "{first:?}");
    // The second question's job is made by the next claim's scan, which
    // grants nothing: the one lease slot is taken.
    let second = bot
        .ask(&asker, room, "the second question")
        .await
        .message_id;
    let idle = bot.claim(runtime, 1).await;
    assert_eq!(idle.jobs.len(), 0, "{idle:?}");
    let jobs = bot
        .query_n(&format!(
            "SELECT count(*) AS n FROM jobs WHERE message_id = '{second}' AND state = 'pending'"
        ))
        .await;
    assert_eq!(jobs, 1, "the scan made the second question's job");
    // A row lock leaves its locker in the row's xmax: the first candidate
    // round, sent before the claim knew the slot was taken, took no row.
    let locked_by = bot
        .query_n(&format!(
            "SELECT xmax::text::bigint AS n FROM jobs WHERE message_id = '{second}'"
        ))
        .await;
    assert_eq!(locked_by, 0, "the idle claim locked the pending job");
}

/// Seventeen questions claimed on the counted store: one in one room, then
/// four in each of four more; a finish input answering each.
async fn seventeen_claimed(counted: &Counted) -> Vec<JobFinishInput> {
    let bot = &counted.bot;
    let (first, first_room) = bot.contact("first").await;
    bot.ask(&first, first_room, "the only question").await;
    for i in 0..4 {
        let (asker, room) = bot.contact(&format!("asker{i}")).await;
        for q in 0..4 {
            bot.ask(&asker, room, &format!("question {i}.{q}")).await;
        }
    }
    let (claimed, _) = counted.claim(17).await;
    assert_eq!(claimed.jobs.len(), 17, "{claimed:?}");
    claimed
        .jobs
        .iter()
        .map(|job| JobFinishInput {
            job_id: job.job_id,
            owner: job.owner.clone(),
            version: job.version,
            result: JobResult {
                reply: Some(format!("the answer to {}", job.job_key)),
                ..JobResult::default()
            },
        })
        .collect()
}

/// `inputs` finished by `store`, and what it sent.
async fn finish_on(
    counted: &Counted,
    store: &Store,
    inputs: &[JobFinishInput],
) -> (
    Vec<Result<FinishResponse, relayger_store::StoreError>>,
    Sent,
) {
    count_on(store, async |store| {
        store
            .finish_batch(&counted.caller, counted.runtime_id, inputs)
            .await
            .expect("finish")
    })
    .await
}

/// The seventeen `inputs` finished by `store`: the first alone, then the
/// other sixteen in one batch, every one replied; what each call sent.
async fn finish_one_then_sixteen(
    counted: &Counted,
    store: &Store,
    inputs: &[JobFinishInput],
) -> (Sent, Sent) {
    let (one, one_sent) = finish_on(counted, store, &inputs[..1]).await;
    assert!(replied(&one), "{one:?}");
    let (many, many_sent) = finish_on(counted, store, &inputs[1..]).await;
    assert!(replied(&many), "{many:?}");
    assert_eq!(inputs.len(), 17);
    println!("a finish of one reply: {one_sent:?}; of sixteen: {many_sent:?}");
    (one_sent, many_sent)
}

fn replied(outcomes: &[Result<FinishResponse, relayger_store::StoreError>]) -> bool {
    outcomes
        .iter()
        .all(|outcome| matches!(outcome, Ok(done) if done.outcome == FinishOutcome::Replied))
}

async fn replies_written(counted: &Counted) -> i64 {
    counted
        .bot
        .query_n("SELECT count(*) AS n FROM messages WHERE by_runtime")
        .await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_finish_of_one_reply_and_of_sixteen_take_one_round_trip() {
    let counted = Counted::start("finishing").await;
    let inputs = seventeen_claimed(&counted).await;

    let (one_sent, many_sent) = finish_one_then_sixteen(&counted, &counted.store, &inputs).await;

    // The store that granted the jobs knows their rooms and messages, so
    // the whole batch is one statement (fences, ends, replies,
    // completions): BEGIN, the statement and COMMIT in one flight. The
    // first finish also prepares its statement (a round trip).
    assert_eq!(one_sent.statements, 3);
    assert_eq!(many_sent.statements, 3);
    assert_eq!(one_sent.round_trips - one_sent.prepares, 1, "{one_sent:?}");
    assert_eq!(many_sent.prepares, 0, "{many_sent:?}");
    assert_eq!(many_sent.round_trips, 1, "{many_sent:?}");
    // Every reply is in its room once, answers its own question, and the
    // four replies a room got in one statement took the seqs after its
    // questions, without a gap, in the room's `last_seq`.
    assert_eq!(replies_written(&counted).await, 17);
    let bot = &counted.bot;
    assert_eq!(
        bot.query_n(
            "SELECT count(*) AS n FROM messages r JOIN messages q \
             ON q.room_id = r.room_id AND q.id = r.reply_to \
             WHERE r.by_runtime AND position(replace(q.id::text, '-', '') IN r.text) > 0"
        )
        .await,
        17
    );
    assert_eq!(
        bot.query_n(
            "SELECT count(*) AS n FROM rooms r WHERE EXISTS (SELECT 1 FROM messages m \
             WHERE m.room_id = r.id) AND (r.last_seq <> (SELECT max(seq) FROM messages m \
             WHERE m.room_id = r.id) OR (SELECT count(*) FROM messages m WHERE m.room_id = r.id) \
             <> (SELECT max(seq) - min(seq) + 1 FROM messages m WHERE m.room_id = r.id))"
        )
        .await,
        0
    );
    assert_eq!(
        bot.query_n(
            "SELECT count(*) AS n FROM messages r JOIN messages q \
             ON q.room_id = r.room_id AND q.id = r.reply_to \
             WHERE r.by_runtime AND r.seq > q.seq AND r.thread_root = q.thread_root"
        )
        .await,
        17
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_finish_of_jobs_another_instance_granted_takes_two_round_trips() {
    let counted = Counted::start("elsewhere").await;
    let inputs = seventeen_claimed(&counted).await;
    // A second server instance: it granted none of these jobs.
    let other = Store::connect(
        counted.bot.db.url(),
        PoolOptions {
            max_connections: 1,
            ..PoolOptions::default()
        },
    )
    .await
    .expect("store");

    let (one_sent, many_sent) = finish_one_then_sixteen(&counted, &other, &inputs).await;

    // BEGIN, the fence, the end, the reply, COMMIT; three a job more.
    assert_eq!(one_sent.statements, 5);
    assert_eq!(many_sent.statements, 2 + 16 * 3);
    // BEGIN with the fences (which read the rooms and messages); the ends,
    // the replies and COMMIT.
    assert_eq!(one_sent.round_trips - one_sent.prepares, 2, "{one_sent:?}");
    assert_eq!(many_sent.prepares, 0, "{many_sent:?}");
    assert_eq!(many_sent.round_trips, 2, "{many_sent:?}");
    assert_eq!(replies_written(&counted).await, 17);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_one_statement_finish_by_a_stale_owner_writes_nothing_and_is_refused() {
    let counted = Counted::start("stale").await;
    let inputs = seventeen_claimed(&counted).await;
    let rightful = inputs[0].clone();
    let stale = JobFinishInput {
        owner: relayger_core::lease::LeaseOwner::generate().expect("owner"),
        ..rightful.clone()
    };

    // The one statement's fence matches nothing, so it writes nothing; the
    // long way then tells why.
    let (refused, refused_sent) = finish_on(&counted, &counted.store, &[stale]).await;
    match &refused[..] {
        [
            Err(relayger_store::StoreError::Rejected {
                code: relayger_core::ErrorCode::LeaseLost,
                ..
            }),
        ] => {}
        other => panic!("a stale owner's finish answered {other:?}"),
    }
    // BEGIN, the one statement, COMMIT; then BEGIN, the fence, the
    // diagnosis, COMMIT.
    assert_eq!(refused_sent.statements, 3 + 4, "{refused_sent:?}");
    assert_eq!(replies_written(&counted).await, 0);
    assert_eq!(
        counted
            .bot
            .query_n(
                "SELECT count(*) AS n FROM attempts WHERE outcome IN ('replied', 'skipped', 'handled')"
            )
            .await,
        0
    );

    // The rightful owner still finishes in one flight, once.
    let (done, done_sent) = finish_on(&counted, &counted.store, &[rightful]).await;
    assert!(replied(&done), "{done:?}");
    assert_eq!(done_sent.statements, 3, "{done_sent:?}");
    assert_eq!(
        done_sent.round_trips - done_sent.prepares,
        1,
        "{done_sent:?}"
    );
    assert_eq!(replies_written(&counted).await, 1);
}
