//! Transactions racing each other, forced into one interleaving: each test
//! holds one transaction at a pause point (`pause`), runs the other against
//! it, lets the first go on and checks what committed.
//!
//! Registrations, joins and scans racing sends and each other never strand
//! a message (it is either before the runtime's checkpoint or claimable); a
//! reply that waited for a join is written once; a block racing a first
//! accept never ends with an active contact. The pause points exist only in
//! this crate's test build, so these tests call the store directly.

use std::time::{Duration, Instant};

use diesel::QueryableByName;
use diesel::sql_types::BigInt;
use diesel_async::RunQueryDsl;
use relayger_core::ErrorCode;
use relayger_core::lease::DEFAULT_LEASE_MS;
use relayger_core::policy::Policy;
use relayger_core::wire::{
    ClaimedJob, FinishOutcome, IdentityKind, JobResult, MessageEnvelope, StartFrom,
};
use tokio::task::JoinHandle;
use uuid::Uuid;

use crate::pause::PausePoint;
use crate::pause::armed::Paused;
use crate::support::{User, WAIT, befriend, register, send};
use crate::test_support::TestDatabase;
use crate::{Store, StoreError};

async fn register_runtime(store: &Store, agent: &User, name: &str, from: StartFrom) -> Uuid {
    register_runtime_with(store, agent, name, from, Policy::default()).await
}

async fn register_runtime_with(
    store: &Store,
    agent: &User,
    name: &str,
    from: StartFrom,
    policy: Policy,
) -> Uuid {
    store
        .register_runtime(&agent.0.identity, name.to_owned(), from, policy)
        .await
        .expect("register the runtime")
        .0
        .id
}

/// A policy that lets four jobs run at once.
fn four_at_once() -> Policy {
    Policy::parse(r#"{"concurrency": 4}"#).expect("policy")
}

async fn add_member(store: &Store, by: &User, room: Uuid, member: &User) {
    store
        .add_room_member(&by.caller(), room, member.number())
        .await
        .expect("add the member");
}

async fn claim(store: &Store, agent: &User, runtime: Uuid, max_jobs: u32) -> Vec<ClaimedJob> {
    store
        .claim(
            &agent.caller(),
            runtime,
            max_jobs,
            None,
            DEFAULT_LEASE_MS,
            false,
        )
        .await
        .expect("claim")
        .response
        .jobs
}

fn message_ids(jobs: &[ClaimedJob]) -> Vec<Uuid> {
    jobs.iter().map(|job| job.message.message_id).collect()
}

#[derive(QueryableByName)]
struct N {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

async fn query_n(store: &Store, sql: &str) -> i64 {
    let mut conn = store.conn().await.expect("connection");
    let row: N = diesel::sql_query(sql)
        .get_result(&mut *conn)
        .await
        .unwrap_or_else(|e| panic!("`{sql}`: {e}"));
    row.n
}

/// Backends of the test database waiting for a lock.
async fn lock_waiters(store: &Store) -> i64 {
    query_n(
        store,
        "SELECT count(*) AS n FROM pg_stat_activity
         WHERE datname = current_database() AND wait_event_type = 'Lock'",
    )
    .await
}

/// Waits until `task` has finished or is blocked on a lock that the held
/// transaction owns (polling PostgreSQL: a lock wait sends no signal).
async fn finished_or_blocked<T>(store: &Store, task: &JoinHandle<T>) {
    let started = Instant::now();
    while !task.is_finished() && lock_waiters(store).await == 0 {
        assert!(started.elapsed() < WAIT, "neither finished nor blocked");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// An agent, an asker and a friend, the asker a contact of both.
struct World {
    db: TestDatabase,
    store: Store,
    agent: User,
    asker: User,
    friend: User,
}

impl World {
    async fn new() -> World {
        let db = TestDatabase::create().await;
        let store = db.store().await;
        let agent = register(&store, "agent", IdentityKind::Agent).await;
        let asker = register(&store, "asker", IdentityKind::Person).await;
        let friend = register(&store, "friend", IdentityKind::Person).await;
        befriend(&store, &asker, &agent).await;
        befriend(&store, &asker, &friend).await;
        World {
            db,
            store,
            agent,
            asker,
            friend,
        }
    }

    /// A group of the asker and `members`.
    async fn group(&self, members: &[&User]) -> Uuid {
        self.store
            .create_room(
                &self.asker.caller(),
                "group".to_owned(),
                members.iter().map(|member| member.number()).collect(),
            )
            .await
            .expect("create the group")
            .id
    }

    async fn ask(&self, room: Uuid, text: &str) -> MessageEnvelope {
        send(&self.store, &self.asker, room, text, true).await
    }

    fn spawn_register(&self, name: &str, from: StartFrom) -> JoinHandle<Uuid> {
        let (store, agent, name) = (self.store.clone(), self.agent.clone(), name.to_owned());
        tokio::spawn(async move { register_runtime(&store, &agent, &name, from).await })
    }

    /// The asker adds `member` to `room`.
    fn spawn_add(&self, room: Uuid, member: &User) -> JoinHandle<()> {
        let (store, asker, member) = (self.store.clone(), self.asker.clone(), member.clone());
        tokio::spawn(async move { add_member(&store, &asker, room, &member).await })
    }

    /// The message ids of every job one claim can grant now.
    async fn claimable(&self, runtime: Uuid) -> Vec<Uuid> {
        message_ids(&claim(&self.store, &self.agent, runtime, 16).await)
    }

    /// The runtime's checkpoint in `room` (0 when it has none).
    async fn checkpoint(&self, runtime: Uuid, room: Uuid) -> i64 {
        query_n(
            &self.store,
            &format!(
                "SELECT COALESCE(max(seq), 0) AS n FROM runtime_checkpoints
                 WHERE runtime_id = '{runtime}' AND room_id = '{room}'"
            ),
        )
        .await
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_from_now_registration_racing_a_send_leaves_the_question_before_its_checkpoint_or_claimable()
 {
    let w = World::new().await;
    let room = befriend(&w.store, &w.friend, &w.agent).await;
    // The registration has read the room's last seq (0) and is held there.
    let mut held = Paused::arm(PausePoint::RegisterAfterRooms, w.agent.id());
    let registration = w.spawn_register("racer", StartFrom::Now);
    held.reached(WAIT).await;
    let sending = {
        let (store, friend) = (w.store.clone(), w.friend.clone());
        tokio::spawn(
            async move { send(&store, &friend, room, "sent while registering", true).await },
        )
    };
    finished_or_blocked(&w.store, &sending).await;
    held.release();
    let runtime = registration.await.expect("registration");
    let message = sending.await.expect("send");
    let claimable = w.claimable(runtime).await;
    let checkpoint = w.checkpoint(runtime, room).await;
    assert!(
        checkpoint >= message.seq || claimable.contains(&message.message_id),
        "stranded: seq {} is after the checkpoint {checkpoint} and not claimable ({claimable:?})",
        message.seq
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_join_held_before_commit_while_a_runtime_registers_leaves_the_room_claimable() {
    let w = World::new().await;
    let group = w.group(&[&w.friend]).await;
    let old = w.ask(group, "asked before the agent came").await;
    let mut held = Paused::arm(PausePoint::JoinBeforeCommit, w.agent.id());
    let join = w.spawn_add(group, &w.agent);
    held.reached(WAIT).await;
    let registration = w.spawn_register("historian", StartFrom::Beginning);
    finished_or_blocked(&w.store, &registration).await;
    held.release();
    join.await.expect("join");
    let runtime = registration.await.expect("registration");
    assert_eq!(w.claimable(runtime).await, vec![old.message_id]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_registration_held_after_reading_rooms_while_the_agent_joins_leaves_the_room_claimable() {
    let w = World::new().await;
    let group = w.group(&[&w.friend]).await;
    let old = w.ask(group, "asked before the agent came").await;
    let mut held = Paused::arm(PausePoint::RegisterAfterRooms, w.agent.id());
    let registration = w.spawn_register("historian", StartFrom::Beginning);
    held.reached(WAIT).await;
    let join = w.spawn_add(group, &w.agent);
    finished_or_blocked(&w.store, &join).await;
    held.release();
    let runtime = registration.await.expect("registration");
    join.await.expect("join");
    assert_eq!(w.claimable(runtime).await, vec![old.message_id]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rejoin_while_a_scan_finds_the_agent_gone_leaves_the_room_claimable() {
    let w = World::new().await;
    let group = w.group(&[&w.friend]).await;
    add_member(&w.store, &w.asker, group, &w.agent).await;
    let runtime = register_runtime(&w.store, &w.agent, "rejoiner", StartFrom::Now).await;
    // A message marks the group for the runtime; the agent then leaves, and
    // a question comes while it is away (which marks nothing for it).
    send(&w.store, &w.asker, group, "hello", false).await;
    w.store
        .leave_room(&w.agent.caller(), group)
        .await
        .expect("leave");
    let question = w.ask(group, "asked while the agent was away").await;
    // The claim's scan has seen "not a member" and is held there.
    let mut held = Paused::arm(PausePoint::ScanAfterMembership, runtime);
    let claiming = {
        let (store, agent) = (w.store.clone(), w.agent.clone());
        tokio::spawn(async move { claim(&store, &agent, runtime, 16).await })
    };
    held.reached(WAIT).await;
    let rejoin = w.spawn_add(group, &w.agent);
    finished_or_blocked(&w.store, &rejoin).await;
    held.release();
    let mut seen = message_ids(&claiming.await.expect("claim"));
    rejoin.await.expect("rejoin");
    seen.extend(w.claimable(runtime).await);
    assert_eq!(seen, vec![question.message_id]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reply_that_waited_for_a_join_is_written_once_with_its_room_locked_first() {
    let w = World::new().await;
    a_reply_waits_for_a_join(&w, w.store.clone()).await;
}

/// As above, finished through another instance than the one that granted
/// the job: its first try is the long way, whose reply statement raises the
/// members-changed error itself, and the retry locks the room first.
#[tokio::test(flavor = "multi_thread")]
async fn a_reply_of_another_instance_that_waited_for_a_join_is_written_once() {
    let w = World::new().await;
    let other = w.db.store().await;
    a_reply_waits_for_a_join(&w, other).await;
}

/// The agent's reply, finished through `finisher`, waits for the room
/// while the friend joins it, and is written once.
async fn a_reply_waits_for_a_join(w: &World, finisher: Store) {
    // A group of the asker and the agent; the friend joins while the reply
    // waits for the room.
    let group = w.group(&[&w.agent]).await;
    let runtime = register_runtime(&w.store, &w.agent, "replier", StartFrom::Beginning).await;
    let question = w.ask(group, "asked before the friend came").await;
    let job = claim(&w.store, &w.agent, runtime, 1)
        .await
        .into_iter()
        .next()
        .expect("the question's job");
    let mut held = Paused::arm(PausePoint::JoinBeforeCommit, w.friend.id());
    let join = w.spawn_add(group, &w.friend);
    held.reached(WAIT).await;
    let finish = {
        let (store, agent) = (finisher.clone(), w.agent.clone());
        tokio::spawn(async move {
            let result = JobResult {
                reply: Some("answered while the friend joined".to_owned()),
                ..JobResult::default()
            };
            store
                .finish(
                    &agent.caller(),
                    runtime,
                    job.job_id,
                    &job.owner,
                    job.version,
                    result,
                )
                .await
        })
    };
    finished_or_blocked(&w.store, &finish).await;
    assert!(
        !finish.is_finished(),
        "the reply did not wait for the room the join holds"
    );
    let mut published = finisher.subscribe_wakes();
    held.release();
    join.await.expect("join");
    // The members changed while the reply waited: its first try rolled back
    // whole, and the second, with the room locked first, committed.
    let finished = finish.await.expect("finish").expect("finished");
    assert_eq!(finished.outcome, FinishOutcome::Replied, "{finished:?}");
    // The reply woke the room's members as they were when it was written,
    // the friend who joined while it waited included (the join itself wakes
    // only the friend).
    let mut woken = Vec::new();
    while let Ok(wakes) = published.try_recv() {
        woken.push(wakes.identity_ids.to_vec());
    }
    assert!(
        woken
            .iter()
            .any(|ids| ids.contains(&w.asker.id()) && ids.contains(&w.friend.id())),
        "no wake of the asker and the friend together: {woken:?}"
    );
    assert_eq!(
        query_n(
            &w.store,
            &format!("SELECT last_seq AS n FROM rooms WHERE id = '{group}'")
        )
        .await,
        question.seq + 1,
        "a seq was skipped"
    );
    assert_eq!(
        query_n(
            &w.store,
            &format!(
                "SELECT count(*) AS n FROM messages WHERE reply_to = '{}' AND by_runtime",
                question.message_id
            )
        )
        .await,
        1
    );
    // A job's completion is the attempt that completed it.
    assert_eq!(
        query_n(
            &w.store,
            "SELECT count(*) AS n FROM attempts WHERE outcome IN ('replied', 'skipped', 'handled')"
        )
        .await,
        1
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_block_racing_a_first_accept_never_leaves_an_active_contact() {
    let db = TestDatabase::create().await;
    let store = db.store().await;
    let alice = register(&store, "alice", IdentityKind::Person).await;
    let bob = register(&store, "bob", IdentityKind::Person).await;
    store
        .request_contact(alice.id(), bob.number())
        .await
        .expect("request");

    // Bob's accept passes its block check and is held there.
    let mut held = Paused::arm(PausePoint::AcceptAfterBlockCheck, bob.id());
    let accept = {
        let (store, bob, alice) = (store.clone(), bob.clone(), alice.clone());
        tokio::spawn(async move { store.accept_contact(bob.id(), alice.number()).await })
    };
    held.reached(WAIT).await;
    // Alice blocks bob meanwhile.
    let block = {
        let (store, alice, bob) = (store.clone(), alice.clone(), bob.clone());
        tokio::spawn(async move { store.block_contact(alice.id(), bob.number()).await })
    };
    // The block waits on a lock the held accept has (the pair's lock, or
    // without it the request row), or is already done.
    let deadline = Instant::now() + WAIT;
    loop {
        if lock_waiters(&store).await > 0 || block.is_finished() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the block neither waited nor ended"
        );
        tokio::task::yield_now().await;
    }
    held.release();
    let (accepted, blocked) = (accept.await.expect("accept"), block.await.expect("block"));
    assert!(blocked.is_ok(), "block: {blocked:?}");
    assert!(
        matches!(
            accepted,
            Ok(_)
                | Err(StoreError::Rejected {
                    code: ErrorCode::Forbidden,
                    ..
                })
        ),
        "accept: {accepted:?}"
    );
    assert_eq!(
        query_n(
            &store,
            "SELECT count(*) AS n FROM contacts WHERE state = 'active'"
        )
        .await,
        0,
        "a contact is active after the block"
    );
    assert_eq!(query_n(&store, "SELECT count(*) AS n FROM blocks").await, 1);
}

/// A claim for another agent's runtime id is sent in one flight with the
/// ownership check: held after that flight, before its rollback, it has
/// locked none of the runtime's pending jobs, and the owner's claim takes
/// them.
#[tokio::test(flavor = "multi_thread")]
async fn a_claim_on_another_agents_runtime_locks_none_of_its_pending_jobs() {
    let w = World::new().await;
    let stranger = register(&w.store, "stranger", IdentityKind::Agent).await;
    let room = w.group(&[&w.agent]).await;
    let runtime =
        register_runtime_with(&w.store, &w.agent, "owned", StartFrom::Now, four_at_once()).await;
    let first = w.ask(room, "first").await;
    let second = w.ask(room, "second").await;
    // Both jobs made; the first claimed, the second pending.
    let claimed = claim(&w.store, &w.agent, runtime, 1).await;
    assert_eq!(message_ids(&claimed), [first.message_id]);

    let mut held = Paused::arm(PausePoint::ScanAfterMembership, runtime);
    let foreign = {
        let (store, stranger) = (w.store.clone(), stranger.clone());
        tokio::spawn(async move {
            store
                .claim(
                    &stranger.caller(),
                    runtime,
                    4,
                    None,
                    DEFAULT_LEASE_MS,
                    false,
                )
                .await
        })
    };
    held.reached(WAIT).await;
    // Every statement of its flight has run: its session waits, in its
    // transaction, for the rollback.
    let started = Instant::now();
    while query_n(
        &w.store,
        "SELECT count(*) AS n FROM pg_stat_activity
         WHERE datname = current_database() AND state = 'idle in transaction'",
    )
    .await
        == 0
    {
        assert!(
            started.elapsed() < WAIT,
            "the foreign claim's flight never finished"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let owners = claim(&w.store, &w.agent, runtime, 4).await;
    held.release();
    assert_eq!(
        message_ids(&owners),
        [second.message_id],
        "the owner's claim takes the pending job while the other agent's claim is open"
    );
    let refused = foreign.await.expect("the foreign claim");
    assert!(
        matches!(
            &refused,
            Err(StoreError::Rejected {
                code: ErrorCode::NotFound,
                ..
            })
        ),
        "{refused:?}"
    );
}

/// A claim reads its candidates without row locks (claims of one runtime
/// are serialised by the runtime's lock, and only a claim takes a job out
/// of pending). A job that nonetheless leaves pending between the claim's
/// candidates and its grant — here a writer standing in for one that would
/// not take the runtime's lock — is neither granted nor given an attempt,
/// and the claim answers only what it granted.
#[tokio::test(flavor = "multi_thread")]
async fn a_job_that_left_pending_after_the_candidates_were_read_is_not_granted() {
    let w = World::new().await;
    let room = w.group(&[&w.agent]).await;
    let runtime = register_runtime_with(
        &w.store,
        &w.agent,
        "unlocked",
        StartFrom::Now,
        four_at_once(),
    )
    .await;
    let first = w.ask(room, "first").await;
    let taken = w.ask(room, "taken elsewhere").await;
    let kept = w.ask(room, "still pending").await;
    // The three jobs made; the first claimed, the other two pending.
    let claimed = claim(&w.store, &w.agent, runtime, 1).await;
    assert_eq!(message_ids(&claimed), [first.message_id]);
    let mut held = Paused::arm(PausePoint::ScanAfterMembership, runtime);
    let claiming = {
        let (store, agent) = (w.store.clone(), w.agent.clone());
        tokio::spawn(async move { claim(&store, &agent, runtime, 4).await })
    };
    held.reached(WAIT).await;
    // The candidates are read and hold no row lock: this write does not wait.
    assert_eq!(
        query_n(
            &w.store,
            &format!(
                "WITH done AS (UPDATE jobs SET state = 'handled', updated_at = now() \
                 WHERE message_id = '{}' RETURNING 1) SELECT count(*) AS n FROM done",
                taken.message_id
            )
        )
        .await,
        1
    );
    held.release();
    let granted = claiming.await.expect("claim");
    assert_eq!(message_ids(&granted), [kept.message_id]);
    assert_eq!(
        query_n(
            &w.store,
            &format!(
                "SELECT count(*) AS n FROM jobs WHERE message_id = '{}' AND state = 'handled'",
                taken.message_id
            )
        )
        .await,
        1
    );
    assert_eq!(
        query_n(&w.store, "SELECT count(*) AS n FROM attempts").await,
        2,
        "an attempt for a job that was not granted"
    );
}
