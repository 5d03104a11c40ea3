//! Lease writes that wait on locks past their lease, and concurrent writers
//! of one room: row locks held by a connection of the test's own.

use std::sync::Arc;
use std::time::Duration;

use relayger_core::ErrorCode;
use relayger_core::wire::{ClaimedJob, FinishOutcome, JobResult, NoteInput, StartFrom};
use relayger_store::StoreError;
use serde_json::json;
use uuid::Uuid;

use crate::support::{Agent, User, WAIT, execute, refusal, reply, wait_for};

/// A lease of one second: long enough for a write to start inside it.
const LEASE_MS: u64 = 1000;

/// The agent, a contact of it and their room, and the agent's runtime.
struct Bot {
    base: Agent,
    asker: User,
    room: Uuid,
    runtime: Uuid,
}

impl Bot {
    async fn start() -> Bot {
        let base = Agent::start().await;
        let (asker, room) = base.contact("asker").await;
        let runtime = base.runtime("faults", StartFrom::Now, json!({})).await;
        Bot {
            base,
            asker,
            room,
            runtime,
        }
    }

    async fn ask(&self, text: &str) -> Uuid {
        self.base.ask(&self.asker, self.room, text).await.message_id
    }

    /// One job, claimed with a lease of [`LEASE_MS`].
    async fn claim_one(&self) -> ClaimedJob {
        let mut claimed = self.base.claim_leased(self.runtime, 1, LEASE_MS).await;
        assert_eq!(claimed.jobs.len(), 1, "{claimed:?}");
        claimed.jobs.remove(0)
    }

    /// A connection of the test's own holding the runtime's row, as another
    /// claim (or a server cut mid-claim) does.
    async fn hold_runtime(&self) -> diesel_async::AsyncPgConnection {
        self.base
            .hold_lock(&format!(
                "SELECT id FROM runtimes WHERE id = '{}' FOR UPDATE",
                self.runtime
            ))
            .await
    }

    /// A note write as the operator (`runtimes note`), on its own task.
    fn spawn_put_note(
        self: &Arc<Self>,
        key: String,
        text: &str,
    ) -> tokio::task::JoinHandle<Result<relayger_core::wire::Note, StoreError>> {
        let (bot, text) = (self.clone(), text.to_owned());
        tokio::spawn(async move {
            let note = NoteInput {
                key,
                text,
                version: 0,
                source_message_ids: vec![],
            };
            bot.base
                .store
                .put_note(&bot.base.agent.caller(), bot.runtime, bot.room, note)
                .await
        })
    }
}

/// Sends one lease write (`heartbeat`, `release` or `finish`, a finish with
/// a reply) for a claimed job while another transaction holds the job's
/// row lock, lets the lease run out while the write waits, then lets it
/// through: the refusal's status and code, if it was refused.
async fn lease_write_after_waiting_past_the_lease(
    bot: &Bot,
    job: &ClaimedJob,
    write: &'static str,
) -> Option<(u16, ErrorCode)> {
    let job_id = job.job_id;
    let mut holder = bot
        .base
        .hold_lock(&format!(
            "SELECT id FROM jobs WHERE id = '{job_id}' FOR UPDATE"
        ))
        .await;
    let sent = {
        let (store, caller, runtime, job) = (
            bot.base.store.clone(),
            bot.base.agent.caller(),
            bot.runtime,
            job.clone(),
        );
        tokio::spawn(async move {
            let (owner, version) = (&job.owner, job.version);
            match write {
                "heartbeat" => refusal(
                    &store
                        .heartbeat(&caller, runtime, job_id, owner, version, LEASE_MS)
                        .await,
                ),
                "release" => refusal(
                    &store
                        .release(&caller, runtime, job_id, owner, version)
                        .await,
                ),
                "finish" => refusal(
                    &store
                        .finish(&caller, runtime, job_id, owner, version, reply("late"))
                        .await,
                ),
                other => unreachable!("{other} is not a lease write"),
            }
        })
    };
    // The write began well inside its lease; the lease now runs out while
    // it waits.
    expire_while_waiting(
        bot,
        &mut holder,
        job_id,
        &format!("the {write} to wait on the job lock"),
    )
    .await;
    sent.await.expect("join")
}

/// Once a write waits on the lock `holder` holds (`what` names the wait),
/// lets `job`'s lease run out, then lets the write through.
async fn expire_while_waiting(
    bot: &Bot,
    holder: &mut diesel_async::AsyncPgConnection,
    job: Uuid,
    what: &str,
) {
    let mut watcher = bot.base.watch_until_someone_waits(what).await;
    wait_for(
        &mut watcher,
        "the lease to expire",
        &format!(
            "SELECT lease_expires_at < clock_timestamp() AS flag FROM jobs WHERE id = '{job}'"
        ),
    )
    .await;
    execute(holder, "COMMIT").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_finish_that_waited_on_the_job_lock_past_its_lease_is_refused() {
    let bot = Bot::start().await;
    bot.ask("slow lock").await;
    let job = bot.claim_one().await;

    let refused = lease_write_after_waiting_past_the_lease(&bot, &job, "finish").await;
    assert_eq!(refused, Some((409, ErrorCode::LeaseLost)));
    assert_eq!(
        bot.base
            .query_n("SELECT count(*) AS n FROM messages WHERE by_runtime")
            .await,
        0
    );
}

/// One fence with one clock: a heartbeat and a release that waited for the
/// job's row lock until the lease ran out are refused exactly like a finish
/// in that position, and write nothing (the lease is not renewed, the job
/// is not released).
#[tokio::test(flavor = "multi_thread")]
async fn a_heartbeat_or_release_that_waited_on_the_job_lock_past_its_lease_is_refused_like_a_finish()
 {
    let bot = Bot::start().await;
    for write in ["heartbeat", "release"] {
        bot.ask(&format!("slow lock for a {write}")).await;
        let job = bot.claim_one().await;
        let job_id = job.job_id;
        let refused = lease_write_after_waiting_past_the_lease(&bot, &job, write).await;
        assert_eq!(refused, Some((409, ErrorCode::LeaseLost)), "{write}");
        assert_eq!(
            bot.base
                .query_n(&format!(
                    "SELECT count(*) AS n FROM jobs WHERE id = '{job_id}' AND state = 'claimed' \
                     AND lease_expires_at < clock_timestamp()"
                ))
                .await,
            1,
            "{write}: the lease stays expired and the job unreleased"
        );
        assert_eq!(
            bot.base
                .query_n(&format!(
                    "SELECT count(*) AS n FROM attempts WHERE job_id = '{job_id}' \
                     AND end_event = 'released'"
                ))
                .await,
            0,
            "{write}: nothing logged"
        );
        // The next claim ends the expired lease; the job comes back later.
        bot.base.claim_leased(bot.runtime, 1, LEASE_MS).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reply_and_a_note_with_the_same_key_do_not_deadlock() {
    let bot = Arc::new(Bot::start().await);
    let question = bot.ask("remember").await;
    let job = bot.base.claim_one(bot.runtime).await;

    // Stall the reply after it holds the room lock: its message refers to
    // the question, whose row is locked here (the foreign key waits).
    let mut holder = bot
        .base
        .hold_lock(&format!(
            "SELECT id FROM messages WHERE id = '{question}' FOR UPDATE"
        ))
        .await;
    let noted = |version: u32| JobResult {
        reply: Some("noted".to_owned()),
        note: Some(NoteInput {
            key: "decision".to_owned(),
            text: "from the reply".to_owned(),
            version,
            source_message_ids: vec![question],
        }),
        ..JobResult::default()
    };
    let finish = {
        let (bot, job, result) = (bot.clone(), job.clone(), noted(0));
        tokio::spawn(async move { bot.base.finish(bot.runtime, &job, result).await })
    };
    let _watcher = bot
        .base
        .watch_until_someone_waits("the reply to wait with the room locked")
        .await;

    // The operator writes the same note meanwhile: it must not wait for the
    // reply's room lock (a note only references the room).
    let put = tokio::time::timeout(
        Duration::from_secs(5),
        bot.spawn_put_note("decision".to_owned(), "from the operator"),
    )
    .await
    .expect("the note waited on the reply's room lock")
    .expect("join")
    .expect("the note");
    assert_eq!(put.version, 1);

    execute(&mut holder, "COMMIT").await;
    let finished = finish.await.expect("join");
    assert_eq!(
        refusal(&finished),
        Some((409, ErrorCode::VersionConflict)),
        "the note exists now; the whole finish rolled back: {finished:?}"
    );
    let retried = bot
        .base
        .finish(bot.runtime, &job, noted(1))
        .await
        .expect("the retried finish");
    assert_eq!(retried.outcome, FinishOutcome::Replied);
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_note_creates_at_sixty_three_leave_exactly_sixty_four() {
    let bot = Arc::new(Bot::start().await);
    for i in 0..63 {
        bot.spawn_put_note(format!("n{i}"), "kept")
            .await
            .expect("join")
            .expect("a note under the cap");
    }

    // Hold the room so that every create has counted and inserted before
    // any of them can commit (a note's foreign key waits on the room).
    let mut holder = bot
        .base
        .hold_lock(&format!(
            "SELECT id FROM rooms WHERE id = '{}' FOR UPDATE",
            bot.room
        ))
        .await;
    let racers: Vec<_> = (0..8)
        .map(|i| bot.spawn_put_note(format!("race{i}"), "raced"))
        .collect();
    let mut watcher = bot.base.connection().await;
    wait_for(
        &mut watcher,
        "all eight creates to wait",
        "SELECT count(*) = 8 AS flag FROM pg_stat_activity \
         WHERE datname = current_database() AND wait_event_type = 'Lock'",
    )
    .await;
    execute(&mut holder, "COMMIT").await;

    let mut created = 0;
    for racer in racers {
        let put = tokio::time::timeout(WAIT, racer)
            .await
            .expect("the create answered")
            .expect("join");
        match refusal(&put) {
            None => created += 1,
            Some(refused) => assert_eq!(refused, (400, ErrorCode::InvalidArgument)),
        }
    }
    assert_eq!(created, 1, "one create fits under the cap");
    assert_eq!(
        bot.base.query_n("SELECT count(*) AS n FROM notes").await,
        64
    );
}

/// What a server cut from PostgreSQL mid-transaction leaves behind: its
/// session idle in a transaction (nobody tells PostgreSQL the link is gone)
/// holding the locks its claim and its reply took, the runtime's row and
/// the room's, until `idle_in_transaction_session_timeout` (3 s) ends it.
/// A lease another process already holds, shorter than that, is not lost
/// to it: its heartbeat locks only its job and is answered at once, and its
/// finish with a reply in that room, fenced before it waits for the room's
/// lock, commits once the lock is free though the lease ran out meanwhile
/// (the job's row stayed locked by the finish all along, so no claim could
/// take it over). A claim of that runtime does wait for the runtime's row.
#[tokio::test(flavor = "multi_thread")]
async fn a_transaction_left_open_by_a_cut_server_holds_up_no_heartbeat_and_refuses_no_fenced_finish()
 {
    let bot = Bot::start().await;
    bot.ask("answered while a cut server holds the room").await;
    let job = bot.claim_one().await;
    let (runtime, room, job_id) = (bot.runtime, bot.room, job.job_id);
    let mut holder = bot
        .base
        .hold_lock(&format!(
            "SELECT id FROM runtimes WHERE id = '{runtime}' FOR NO KEY UPDATE; \
             SELECT id FROM rooms WHERE id = '{room}' FOR NO KEY UPDATE"
        ))
        .await;
    let caller = bot.base.agent.caller();
    let renewed = tokio::time::timeout(
        Duration::from_millis(LEASE_MS / 2),
        bot.base
            .store
            .heartbeat(&caller, runtime, job_id, &job.owner, job.version, LEASE_MS),
    )
    .await
    .expect("a heartbeat does not wait on the runtime's or the room's lock");
    assert_eq!(refusal(&renewed), None);

    let finish = {
        let (store, caller, job) = (bot.base.store.clone(), caller.clone(), job.clone());
        tokio::spawn(async move {
            let answer = store
                .finish(
                    &caller,
                    runtime,
                    job.job_id,
                    &job.owner,
                    job.version,
                    reply("in time"),
                )
                .await;
            refusal(&answer)
        })
    };
    expire_while_waiting(
        &bot,
        &mut holder,
        job_id,
        "the finish to wait on the room's lock",
    )
    .await;
    assert_eq!(finish.await.expect("join"), None, "the finish is accepted");
    assert_eq!(
        bot.base
            .query_n(&format!(
                "SELECT count(*) AS n FROM messages WHERE by_runtime AND room_id = '{room}'"
            ))
            .await,
        1
    );
    assert_eq!(
        bot.base
            .query_n(&format!(
                "SELECT count(*) AS n FROM jobs WHERE id = '{job_id}' AND state = 'handled'"
            ))
            .await,
        1
    );
}

/// A claim of this many milliseconds' lease waits up to a third of it
/// (`claim_lock_wait_ms`) for the runtime's row.
const LONG_LEASE_MS: u64 = 6000;

/// Claims (at most one job) with a lease of [`LONG_LEASE_MS`], on its own
/// task: the jobs granted.
fn spawn_claim(bot: &Arc<Bot>) -> tokio::task::JoinHandle<Result<Vec<ClaimedJob>, StoreError>> {
    let bot = bot.clone();
    tokio::spawn(async move {
        let claimed = bot
            .base
            .store
            .claim(
                &bot.base.agent.caller(),
                bot.runtime,
                1,
                None,
                LONG_LEASE_MS,
                false,
            )
            .await?;
        Ok(claimed.response.jobs)
    })
}

/// The one job a claim granted.
fn the_job(jobs: Vec<ClaimedJob>) -> ClaimedJob {
    let [job] = <[ClaimedJob; 1]>::try_from(jobs).expect("one job");
    job
}

/// A claim that waited on its runtime's lock (another process's claim held
/// it, or a server cut from the database did) grants a whole lease from the
/// moment it got the lock, as the fence judges a lease at its lock:
/// measured from the claim's start, a claim that waited longer than a lease
/// granted leases expired before the worker had them (the network soak saw
/// 29, ended by the next claim 34 ms later).
#[tokio::test(flavor = "multi_thread")]
async fn a_claim_that_waited_on_the_runtime_lock_grants_a_whole_lease_from_the_grant() {
    let bot = Arc::new(Bot::start().await);
    bot.ask("granted late").await;
    let mut holder = bot.hold_runtime().await;
    let claim = spawn_claim(&bot);
    let mut watcher = bot
        .base
        .watch_until_someone_waits("the claim to wait on the runtime lock")
        .await;
    // A second of the claim's wait (of at most two) passes.
    wait_for(
        &mut watcher,
        "a second's wait",
        "SELECT bool_and(query_start < clock_timestamp() - interval '1 second') AS flag \
         FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
    )
    .await;
    execute(&mut holder, "COMMIT").await;
    let released = bot
        .base
        .query_n("SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS n")
        .await;
    let job = the_job(claim.await.expect("join").expect("the claim"));
    let expires = bot
        .base
        .query_n(&format!(
            "SELECT (extract(epoch FROM lease_expires_at) * 1000)::bigint AS n FROM jobs WHERE id = '{}'",
            job.job_id
        ))
        .await;
    let lease = i64::try_from(LONG_LEASE_MS).expect("lease");
    assert!(
        expires >= released + lease - 200,
        "the lease ends {} ms after the lock was let go, not a whole lease ({lease} ms)",
        expires - released
    );
}

/// A claim waits for its runtime's row at most a third of the lease it
/// grants, then answers "busy, retry" (503): the worker counts a lease from
/// its request, and a grant after a longer wait left it too little of the
/// lease, or none (the network soak's slow links lost leases so).
#[tokio::test(flavor = "multi_thread")]
async fn a_claim_waits_for_its_runtime_a_third_of_the_lease_then_answers_busy() {
    let bot = Arc::new(Bot::start().await);
    bot.ask("busy").await;
    let mut holder = bot.hold_runtime().await;
    let answer = tokio::time::timeout(Duration::from_millis(LONG_LEASE_MS / 2), spawn_claim(&bot))
        .await
        .expect("the claim answers within half the lease")
        .expect("join");
    assert!(
        matches!(answer, Err(StoreError::Contention(_))),
        "busy, retry: {answer:?}"
    );
    execute(&mut holder, "ROLLBACK").await;
    assert!(
        spawn_claim(&bot).await.expect("join").is_ok(),
        "the retry claims"
    );
}

/// A server cut from PostgreSQL while its claim held the runtime's row
/// holds up that runtime's claims through other servers only until
/// PostgreSQL ends the cut session, idle in its transaction:
/// `idle_in_transaction_session_timeout` is 3 s (`SESSION_LIMITS`). With a
/// claim's lock wait at most a third of its lease, claims retried meanwhile
/// answer "busy, retry", and one goes through once the session is ended, so
/// a takeover comes within the lease and about 3 s (with 15 s, the network
/// soak's takeovers came 12–18 s after a 3 s lease; with 5 s, 8–9 s).
#[tokio::test(flavor = "multi_thread")]
async fn a_runtime_lock_left_by_a_cut_server_holds_up_claims_for_three_seconds_at_most() {
    let bot = Arc::new(Bot::start().await);
    bot.ask("taken over").await;
    let runtime = bot.runtime;
    // The cut server's session, with the limits every pooled connection
    // runs under: its transaction took the runtime's row and nothing more
    // comes from it.
    let limits: Vec<String> = relayger_store::SESSION_LIMITS
        .iter()
        .map(|(name, value)| format!("SET {name} = '{value}';"))
        .collect();
    let _cut = bot
        .base
        .hold_lock(&format!(
            "{} SELECT id FROM runtimes WHERE id = '{runtime}' FOR NO KEY UPDATE",
            limits.join(" ")
        ))
        .await;
    let claimed = tokio::time::timeout(Duration::from_millis(4500), async {
        loop {
            match spawn_claim(&bot).await.expect("join") {
                Ok(jobs) => break the_job(jobs),
                Err(StoreError::Contention(_)) => continue,
                Err(other) => panic!("a claim failed: {other:?}"),
            }
        }
    })
    .await
    .expect("a claim goes through once PostgreSQL ends the idle session");
    assert_eq!(claimed.attempt, 1);
}

/// A claim judges the leases it may take over by the clock after its
/// runtime's lock, as the fence judges one after the job's: a lease that
/// ran out while the claim waited for the lock is ended by that claim (its
/// job pending again, for the next grant after its backoff), not left held
/// until the next claim.
#[tokio::test(flavor = "multi_thread")]
async fn a_claim_ends_a_lease_that_ran_out_while_it_waited_for_the_runtime() {
    let bot = Arc::new(Bot::start().await);
    bot.ask("taken over at once").await;
    let held = bot.claim_one().await;
    let mut holder = bot.hold_runtime().await;
    let claim = spawn_claim(&bot);
    let mut watcher = bot
        .base
        .watch_until_someone_waits("the claim to wait on the runtime lock")
        .await;
    wait_for(
        &mut watcher,
        "the held lease to run out",
        &format!(
            "SELECT lease_expires_at < clock_timestamp() AS flag FROM jobs WHERE id = '{}'",
            held.job_id
        ),
    )
    .await;
    execute(&mut holder, "COMMIT").await;
    claim.await.expect("join").expect("the claim");
    assert_eq!(
        bot.base
            .query_n(&format!(
                "SELECT count(*) AS n FROM attempts WHERE job_id = '{}' AND ended = 'expired'",
                held.job_id
            ))
            .await,
        1,
        "the claim that waited ended the lease that ran out meanwhile"
    );
}
