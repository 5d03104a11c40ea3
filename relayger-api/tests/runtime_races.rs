//! Registrations, joins and scans racing sends and each other never strand
//! a message: each test holds one transaction at a store pause point, runs
//! the other one against it, and then checks that the message is either
//! before the runtime's checkpoint or claimable.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{TestServer, User};
use relayger_store::pause::PausePoint;
use relayger_store::test_support::Paused;
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use uuid::Uuid;

const WAIT: Duration = Duration::from_secs(10);

struct World {
    server: Arc<TestServer>,
    agent: User,
    asker: User,
    friend: User,
}

impl World {
    async fn new() -> World {
        let (server, [agent, asker, friend]) = TestServer::with_users([
            ("agent", "agent"),
            ("asker", "person"),
            ("friend", "person"),
        ])
        .await;
        server.befriend(&asker, &agent).await;
        server.befriend(&asker, &friend).await;
        World {
            server: Arc::new(server),
            agent,
            asker,
            friend,
        }
    }

    /// A group of the asker and the friend (the agent is not in it yet).
    async fn group(&self) -> String {
        self.server
            .create_room(&self.asker, "group", json!([self.friend.number]))
            .await
            .ok()["id"]
            .as_str()
            .expect("id")
            .to_owned()
    }

    fn spawn_post(&self, path: String, token: &str, body: Value) -> JoinHandle<Value> {
        let server = Arc::clone(&self.server);
        let token = token.to_owned();
        tokio::spawn(async move { server.post(&path, &token, body).await.ok() })
    }

    fn spawn_register(&self, name: &str, from: &str) -> JoinHandle<Value> {
        self.spawn_post(
            "/v1/runtimes".to_owned(),
            &self.agent.token.clone(),
            json!({"name": name, "from": from}),
        )
    }

    fn spawn_add_agent(&self, room: &str) -> JoinHandle<Value> {
        self.spawn_post(
            format!("/v1/rooms/{room}/members"),
            &self.asker.token.clone(),
            json!({"number": self.agent.number}),
        )
    }

    async fn ask(&self, room: &str, text: &str) -> Value {
        self.server
            .send(
                &self.asker,
                json!({"roomId": room, "text": text, "ask": true}),
            )
            .await
    }

    /// The message ids of every job one claim can grant now.
    async fn claimable(&self, runtime: &str) -> Vec<String> {
        let body = self
            .server
            .claim_jobs(&self.agent.token, runtime, 16)
            .await
            .ok();
        body["jobs"]
            .as_array()
            .expect("jobs")
            .iter()
            .map(|job| job["message"]["messageId"].as_str().expect("id").to_owned())
            .collect()
    }

    /// Backends of the test database waiting for a row lock.
    async fn lock_waiters(&self) -> i64 {
        self.server
            .query_n(
                "SELECT count(*) AS n FROM pg_stat_activity
                 WHERE datname = current_database() AND wait_event_type = 'Lock'",
            )
            .await
    }

    /// Waits until `task` has finished or is blocked on a row lock that the
    /// held transaction owns (polling PostgreSQL: a lock wait sends no signal).
    async fn finished_or_blocked<T>(&self, task: &JoinHandle<T>) {
        let started = Instant::now();
        while !task.is_finished() && self.lock_waiters().await == 0 {
            assert!(started.elapsed() < WAIT, "neither finished nor blocked");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The runtime's checkpoint in `room` (0 when it has none).
    async fn checkpoint(&self, runtime: &str, room: &str) -> i64 {
        let (runtime, room) = (uuid(runtime), uuid(room));
        self.server
            .query_n(&format!(
                "SELECT COALESCE(max(seq), 0) AS n FROM runtime_checkpoints
                 WHERE runtime_id = '{runtime}' AND room_id = '{room}'"
            ))
            .await
    }
}

fn id(value: &Value, field: &str) -> String {
    value[field].as_str().expect(field).to_owned()
}

fn uuid(text: &str) -> Uuid {
    text.parse().expect("uuid")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_from_now_registration_racing_a_send_leaves_the_question_before_its_checkpoint_or_claimable()
 {
    let w = World::new().await;
    let room = w.server.befriend(&w.friend, &w.agent).await;
    // The registration has read the room's last seq (0) and is held there.
    let mut held = Paused::arm(PausePoint::RegisterAfterRooms, uuid(&w.agent.id));
    let registration = w.spawn_register("racer", "now");
    held.reached(WAIT).await;
    let send = {
        let server = Arc::clone(&w.server);
        let friend = w.friend.clone();
        let room = room.clone();
        tokio::spawn(async move {
            server
                .send(
                    &friend,
                    json!({"roomId": room, "text": "sent while registering", "ask": true}),
                )
                .await
        })
    };
    w.finished_or_blocked(&send).await;
    held.release();
    let runtime = id(&registration.await.expect("registration"), "id");
    let message = send.await.expect("send");
    let seq = message["seq"].as_i64().expect("seq");
    let claimable = w.claimable(&runtime).await;
    let checkpoint = w.checkpoint(&runtime, &room).await;
    assert!(
        checkpoint >= seq || claimable.contains(&id(&message, "messageId")),
        "stranded: seq {seq} is after the checkpoint {checkpoint} and not claimable ({claimable:?})"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_join_held_before_commit_while_a_runtime_registers_leaves_the_room_claimable() {
    let w = World::new().await;
    let group = w.group().await;
    let old = w.ask(&group, "asked before the agent came").await;
    let mut held = Paused::arm(PausePoint::JoinBeforeCommit, uuid(&w.agent.id));
    let join = w.spawn_add_agent(&group);
    held.reached(WAIT).await;
    let registration = w.spawn_register("historian", "beginning");
    w.finished_or_blocked(&registration).await;
    held.release();
    join.await.expect("join");
    let runtime = id(&registration.await.expect("registration"), "id");
    assert_eq!(w.claimable(&runtime).await, vec![id(&old, "messageId")]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_registration_held_after_reading_rooms_while_the_agent_joins_leaves_the_room_claimable() {
    let w = World::new().await;
    let group = w.group().await;
    let old = w.ask(&group, "asked before the agent came").await;
    let mut held = Paused::arm(PausePoint::RegisterAfterRooms, uuid(&w.agent.id));
    let registration = w.spawn_register("historian", "beginning");
    held.reached(WAIT).await;
    let join = w.spawn_add_agent(&group);
    w.finished_or_blocked(&join).await;
    held.release();
    let runtime = id(&registration.await.expect("registration"), "id");
    join.await.expect("join");
    assert_eq!(w.claimable(&runtime).await, vec![id(&old, "messageId")]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rejoin_while_a_scan_finds_the_agent_gone_leaves_the_room_claimable() {
    let w = World::new().await;
    let group = w.group().await;
    w.spawn_add_agent(&group).await.expect("join");
    let runtime = id(
        &w.spawn_register("rejoiner", "now").await.expect("reg"),
        "id",
    );
    // A message marks the group for the runtime; the agent then leaves, and
    // a question comes while it is away (which marks nothing for it).
    w.server
        .send(&w.asker, json!({"roomId": group, "text": "hello"}))
        .await;
    w.server
        .post(
            &format!("/v1/rooms/{group}/leave"),
            &w.agent.token,
            json!({}),
        )
        .await
        .ok();
    let question = w.ask(&group, "asked while the agent was away").await;
    // The claim's scan has seen "not a member" and is held there.
    let mut held = Paused::arm(PausePoint::ScanAfterMembership, uuid(&runtime));
    let claim = w.spawn_post(
        format!("/v1/runtimes/{runtime}/claim"),
        &w.agent.token.clone(),
        json!({"maxJobs": 16}),
    );
    held.reached(WAIT).await;
    let rejoin = w.spawn_add_agent(&group);
    w.finished_or_blocked(&rejoin).await;
    held.release();
    let mut seen: Vec<String> = claim.await.expect("claim")["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .map(|job| id(&job["message"], "messageId"))
        .collect();
    rejoin.await.expect("rejoin");
    seen.extend(w.claimable(&runtime).await);
    assert_eq!(seen, vec![id(&question, "messageId")]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reply_that_waited_for_a_join_is_written_once_with_its_room_locked_first() {
    let w = World::new().await;
    // A group of the asker and the agent; the friend joins while the reply
    // waits for the room.
    let group = w
        .server
        .create_room(&w.asker, "group", json!([w.agent.number]))
        .await
        .ok()["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let runtime = id(
        &w.spawn_register("replier", "beginning")
            .await
            .expect("registration"),
        "id",
    );
    let question = w.ask(&group, "asked before the friend came").await;
    let claimed = w.server.claim_jobs(&w.agent.token, &runtime, 1).await.ok();
    let job = &claimed["jobs"][0];
    let mut held = Paused::arm(PausePoint::JoinBeforeCommit, uuid(&w.friend.id));
    let join = w.spawn_post(
        format!("/v1/rooms/{group}/members"),
        &w.asker.token,
        json!({"number": w.friend.number}),
    );
    held.reached(WAIT).await;
    let finish = w.spawn_post(
        format!("/v1/runtimes/{runtime}/jobs/{}/finish", id(job, "jobId")),
        &w.agent.token,
        json!({"owner": job["owner"], "version": job["version"],
               "result": {"reply": "answered while the friend joined"}}),
    );
    w.finished_or_blocked(&finish).await;
    assert!(
        !finish.is_finished(),
        "the reply did not wait for the room the join holds"
    );
    held.release();
    join.await.expect("join");
    // The members changed while the reply waited: its first try rolled back
    // whole, and the second, with the room locked first, committed.
    let finished = finish.await.expect("finish");
    assert_eq!(finished["outcome"], "replied", "{finished}");
    let seq = question["seq"].as_i64().expect("seq");
    assert_eq!(
        w.server.last_seq(&group).await,
        seq + 1,
        "a seq was skipped"
    );
    let question_id = uuid(&id(&question, "messageId"));
    assert_eq!(
        w.server
            .query_n(&format!(
                "SELECT count(*) AS n FROM messages WHERE reply_to = '{question_id}' AND by_runtime"
            ))
            .await,
        1
    );
    // A job's completion is the attempt that completed it.
    assert_eq!(
        w.server
            .count("attempts WHERE outcome IN ('replied', 'skipped', 'handled')")
            .await,
        1
    );
}
