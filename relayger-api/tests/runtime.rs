//! The runtime over real HTTP and PostgreSQL: registration, claims racing,
//! fencing, idempotent finishes, budgets, active hours, notes, stats.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::{TestServer, User};
use serde_json::{Value, json};

struct Setup {
    server: Arc<TestServer>,
    asker: User,
    agent: User,
    room: String,
}

async fn setup_with(server: TestServer) -> Setup {
    let (asker, agent, room) = server
        .befriended_pair(("asker", "person"), ("agent", "agent"))
        .await;
    Setup {
        server: Arc::new(server),
        asker,
        agent,
        room,
    }
}

async fn setup() -> Setup {
    setup_with(TestServer::start().await).await
}

impl Setup {
    async fn runtime(&self, name: &str, policy: Value) -> String {
        let reply = self
            .server
            .post(
                "/v1/runtimes",
                &self.agent.token,
                json!({"name": name, "from": "now", "policy": policy}),
            )
            .await
            .ok();
        reply["id"].as_str().expect("id").to_owned()
    }

    async fn ask(&self, text: &str) -> String {
        self.server
            .send(
                &self.asker,
                json!({"roomId": self.room, "text": text, "ask": true}),
            )
            .await["messageId"]
            .as_str()
            .expect("id")
            .to_owned()
    }

    async fn claim(&self, runtime: &str, max_jobs: u32) -> common::Reply {
        self.server
            .claim_jobs(&self.agent.token, runtime, max_jobs)
            .await
    }

    async fn claim_one(&self, runtime: &str) -> Value {
        let body = self.claim(runtime, 1).await.ok();
        assert_eq!(body["jobs"].as_array().expect("jobs").len(), 1, "{body}");
        body["jobs"][0].clone()
    }

    async fn finish(&self, runtime: &str, job: &Value, result: Value) -> common::Reply {
        self.server
            .finish_job(&self.agent.token, runtime, job, result)
            .await
    }

    async fn replies(&self) -> Vec<Value> {
        let thread = self.server.get("/v1/inbox", &self.asker.token).await.ok();
        thread["rooms"]
            .as_array()
            .expect("rooms")
            .iter()
            .flat_map(|r| r["messages"].as_array().expect("messages").clone())
            .filter(|m| m["byRuntime"] == true)
            .collect()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn registration_reattaches_conflicts_and_limits_at_eight() {
    let s = setup().await;
    let first = s
        .server
        .post(
            "/v1/runtimes",
            &s.agent.token,
            json!({"name": "reply-worker", "from": "now"}),
        )
        .await;
    assert_eq!(first.status.as_u16(), 201);
    assert_eq!(first.body["version"], 1);
    assert_eq!(
        first.body["policy"]["maxCallsPerHour"], 60,
        "defaults filled"
    );
    let again = s
        .server
        .post(
            "/v1/runtimes",
            &s.agent.token,
            json!({"name": "reply-worker", "from": "now"}),
        )
        .await;
    assert_eq!(again.status.as_u16(), 200);
    assert_eq!(again.body["id"], first.body["id"]);

    let conflict = s
        .server
        .post(
            "/v1/runtimes",
            &s.agent.token,
            json!({"name": "reply-worker", "from": "beginning"}),
        )
        .await;
    conflict.err(409, "runtime_configuration_conflict");
    assert_eq!(
        conflict.body["error"]["details"]["from"], "now",
        "the stored configuration is shown"
    );
    s.server
        .post(
            "/v1/runtimes",
            &s.agent.token,
            json!({"name": "reply-worker", "from": "now", "policy": {"concurrency": 2}}),
        )
        .await
        .err(409, "runtime_configuration_conflict");

    for i in 1..8 {
        s.server
            .post(
                "/v1/runtimes",
                &s.agent.token,
                json!({"name": format!("w{i}")}),
            )
            .await
            .ok();
    }
    s.server
        .post("/v1/runtimes", &s.agent.token, json!({"name": "ninth"}))
        .await
        .err(409, "runtime_limit");
    // Deleting frees a name.
    let id = first.body["id"].as_str().expect("id");
    s.server
        .delete(&format!("/v1/runtimes/{id}"), &s.agent.token)
        .await
        .ok();
    s.server
        .post("/v1/runtimes", &s.agent.token, json!({"name": "ninth"}))
        .await
        .ok();
    // A person cannot register a runtime; bad policies name the field.
    s.server
        .post("/v1/runtimes", &s.asker.token, json!({"name": "x"}))
        .await
        .err(403, "forbidden");
    let bad = s
        .server
        .post(
            "/v1/runtimes",
            &s.agent.token,
            json!({"name": "y", "policy": {"maxCallsPerHours": 5}}),
        )
        .await;
    assert_eq!(bad.status.as_u16(), 400);
    assert!(
        bad.body["error"]["message"]
            .as_str()
            .expect("message")
            .contains("maxCallsPerHours")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn from_now_skips_history_and_triggers_pick_questions() {
    let s = setup().await;
    s.ask("before the worker").await;
    let runtime = s.runtime("w", json!({})).await;
    let idle = s.claim(&runtime, 1).await.ok();
    assert!(
        idle["jobs"].as_array().expect("jobs").is_empty(),
        "history before --from now is not replayed"
    );
    s.server
        .send(
            &s.asker,
            json!({"roomId": s.room, "text": "report uploaded"}),
        )
        .await;
    let question = s.ask("hello from relayger").await;
    let job = s.claim_one(&runtime).await;
    assert_eq!(job["message"]["messageId"], question.as_str());
    assert_eq!(job["attempt"], 1);
    assert_eq!(job["leaseMs"], 30000);
    assert_eq!(job["handlerTimeoutMs"], 20000);
    assert_eq!(job["version"].as_str().expect("version").len(), 20);

    // A runtime registered from the beginning pages through history.
    let from_start = s
        .server
        .post(
            "/v1/runtimes",
            &s.agent.token,
            json!({"name": "historian", "from": "beginning"}),
        )
        .await
        .ok()["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let jobs = s.claim(&from_start, 10).await.ok();
    assert_eq!(
        jobs["jobs"].as_array().expect("jobs").len(),
        1,
        "concurrency 1 caps the claim"
    );
    assert_eq!(jobs["jobs"][0]["message"]["text"], "before the worker");
}

#[tokio::test(flavor = "multi_thread")]
async fn two_claimers_race_for_one_job_a_hundred_times() {
    let s = setup().await;
    let runtime = s.runtime("race", json!({"maxCallsPerHour": 1000})).await;
    let second_token = s
        .server
        .post(
            "/v1/tokens",
            &s.agent.token,
            json!({"scopes": ["read", "write"]}),
        )
        .await
        .ok();
    let second_token = second_token["secret"].as_str().expect("secret").to_owned();
    for round in 0..100 {
        s.ask(&format!("question {round}")).await;
        let claim = |token: String| {
            let server = s.server.clone();
            let path = format!("/v1/runtimes/{runtime}/claim");
            tokio::spawn(async move { server.post(&path, &token, json!({})).await.ok() })
        };
        let (a, b) = (claim(s.agent.token.clone()), claim(second_token.clone()));
        let (a, b) = (a.await.expect("task"), b.await.expect("task"));
        let granted: Vec<&Value> = [&a, &b]
            .iter()
            .flat_map(|r| r["jobs"].as_array().expect("jobs").iter())
            .collect();
        assert_eq!(granted.len(), 1, "round {round}: exactly one lease");
        s.finish(&runtime, granted[0], json!({"reply": "ok"}))
            .await
            .ok();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrency_two_with_four_claimers_never_exceeds_two_leases() {
    let s = setup().await;
    let runtime = s.runtime("pair", json!({"concurrency": 2})).await;
    for i in 0..10 {
        s.ask(&format!("q{i}")).await;
    }
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let server = s.server.clone();
        let token = s.agent.token.clone();
        let path = format!("/v1/runtimes/{runtime}/claim");
        tasks.push(tokio::spawn(async move {
            server.post(&path, &token, json!({"maxJobs": 2})).await.ok()
        }));
    }
    let mut granted = 0;
    for task in tasks {
        granted += task.await.expect("task")["jobs"]
            .as_array()
            .expect("jobs")
            .len();
    }
    assert_eq!(granted, 2);
    let inspect = s
        .server
        .get(&format!("/v1/runtimes/{runtime}"), &s.agent.token)
        .await
        .ok();
    assert_eq!(inspect["activeLeases"], 2);
    assert_eq!(inspect["jobs"]["pending"], 8);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_expired_owner_cannot_heartbeat_or_finish_and_the_next_claim_has_a_greater_version() {
    let s = setup_with(TestServer::start_with_lease(1000).await).await;
    let runtime = s.runtime("fenced", json!({})).await;
    s.ask("will you finish?").await;
    let job = s.claim_one(&runtime).await;
    let job_path = format!(
        "/v1/runtimes/{runtime}/jobs/{}",
        job["jobId"].as_str().expect("id")
    );
    let lease = json!({"owner": job["owner"], "version": job["version"]});
    s.server
        .post(
            &format!("{job_path}/heartbeat"),
            &s.agent.token,
            lease.clone(),
        )
        .await
        .ok();
    // A heartbeat with a wrong owner is refused even while the lease lives.
    s.server
        .post(
            &format!("{job_path}/heartbeat"),
            &s.agent.token,
            json!({"owner": "0".repeat(32), "version": job["version"]}),
        )
        .await
        .err(409, "lease_lost");

    // Let the lease run out (the lease itself is what is tested here).
    tokio::time::sleep(Duration::from_millis(1300)).await;
    s.server
        .post(
            &format!("{job_path}/heartbeat"),
            &s.agent.token,
            lease.clone(),
        )
        .await
        .err(409, "lease_lost");
    s.finish(&runtime, &job, json!({"reply": "too late"}))
        .await
        .err(409, "lease_lost");
    let retaken = s.claim(&runtime, 1).await.ok();
    let retaken = if retaken["jobs"].as_array().expect("jobs").is_empty() {
        // The expired attempt backs off for a second before the retry.
        tokio::time::sleep(Duration::from_millis(1100)).await;
        s.claim_one(&runtime).await
    } else {
        retaken["jobs"][0].clone()
    };
    assert!(retaken["version"].as_str().expect("v") > job["version"].as_str().expect("v"));
    assert_eq!(
        retaken["jobKey"], job["jobKey"],
        "the job key is stable across owners"
    );
    assert_eq!(retaken["attempt"], 2);
    s.finish(&runtime, &job, json!({"reply": "stale owner"}))
        .await
        .err(409, "lease_lost");
    s.finish(&runtime, &retaken, json!({"reply": "fresh owner"}))
        .await
        .ok();
    assert_eq!(s.replies().await.len(), 1);

    // configure fences an expired owner: a new question, claimed, left to expire.
    s.ask("second").await;
    let stale = s.claim_one(&runtime).await;
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let version = s
        .server
        .get(&format!("/v1/runtimes/{runtime}"), &s.agent.token)
        .await
        .ok()["version"]
        .clone();
    s.server
        .post(
            &format!("/v1/runtimes/{runtime}/configure"),
            &s.agent.token,
            json!({"version": version, "policy": {"concurrency": 2}}),
        )
        .await
        .ok();
    s.finish(&runtime, &stale, json!({"reply": "fenced"}))
        .await
        .err(409, "lease_lost");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_finish_retried_five_times_makes_one_reply_and_a_different_result_is_refused() {
    let s = setup().await;
    let runtime = s.runtime("idem", json!({})).await;
    let question = s.ask("once please").await;
    let job = s.claim_one(&runtime).await;
    let result = json!({"reply": "ONCE PLEASE", "usage": {"modelCalls": 0, "inputTokens": 0, "outputTokens": 0}});
    let first = s.finish(&runtime, &job, result.clone()).await.ok();
    assert_eq!(first["outcome"], "replied");
    for _ in 0..4 {
        // Same result, keys in another order: same fingerprint.
        let reordered = json!({"usage": {"outputTokens": 0, "inputTokens": 0, "modelCalls": 0}, "reply": "ONCE PLEASE"});
        assert_eq!(s.finish(&runtime, &job, reordered).await.ok(), first);
    }
    s.finish(&runtime, &job, json!({"reply": "something else"}))
        .await
        .err(409, "fingerprint_mismatch");
    let replies = s.replies().await;
    assert_eq!(replies.len(), 1);
    assert_eq!(replies[0]["replyTo"], question.as_str());
    assert_eq!(replies[0]["text"], "ONCE PLEASE");
    s.finish(&runtime, &job, json!({"reply": "a", "skip": "b"}))
        .await
        .err(422, "unprocessable_entity");
}

/// One entry of a `POST …/finishes` body for `job`.
fn batch_entry(job: &Value, result: Value) -> Value {
    json!({"jobId": job["jobId"], "owner": job["owner"], "version": job["version"], "result": result})
}

#[tokio::test(flavor = "multi_thread")]
async fn a_batch_finish_answers_each_job_on_its_own_in_one_request() {
    let s = setup().await;
    let runtime = s.runtime("batch", json!({"concurrency": 4})).await;
    for text in ["retried", "stale", "fresh", "malformed"] {
        s.ask(text).await;
    }
    let claimed = s.claim(&runtime, 4).await.ok();
    let jobs = claimed["jobs"].as_array().expect("jobs").clone();
    assert_eq!(jobs.len(), 4, "{claimed}");
    let (retried, stale, fresh, malformed) = (&jobs[0], &jobs[1], &jobs[2], &jobs[3]);
    let first = s
        .finish(&runtime, retried, json!({"reply": "first"}))
        .await
        .ok();
    let mut stale_entry = batch_entry(stale, json!({"reply": "from a stale owner"}));
    stale_entry["owner"] = json!("0".repeat(32));
    let finishes = json!({"finishes": [
        batch_entry(retried, json!({"reply": "first"})),
        stale_entry,
        batch_entry(fresh, json!({"reply": "fresh"})),
        batch_entry(malformed, json!({"reply": "a", "skip": "b"})),
    ]});
    let path = format!("/v1/runtimes/{runtime}/finishes");
    let answered = s
        .server
        .post(&path, &s.agent.token, finishes.clone())
        .await
        .ok();
    let results = answered["results"].as_array().expect("results");
    assert_eq!(results.len(), 4, "{answered}");
    for (result, job) in results.iter().zip(&jobs) {
        assert_eq!(result["jobId"], job["jobId"], "in the request's order");
    }
    assert_eq!(
        results[0]["finished"], first,
        "the retry gets the first answer"
    );
    assert!(results[0].get("error").is_none());
    assert_eq!(results[1]["error"]["code"], "lease_lost", "{answered}");
    assert!(results[1].get("finished").is_none());
    assert_eq!(results[2]["finished"]["outcome"], "replied", "{answered}");
    let fresh_reply = results[2]["finished"]["replyMessageId"].clone();
    assert!(fresh_reply.is_string());
    assert_eq!(results[3]["error"]["code"], "unprocessable_entity");

    let replies = s.replies().await;
    let mut texts: Vec<&str> = replies
        .iter()
        .map(|m| m["text"].as_str().expect("text"))
        .collect();
    texts.sort_unstable();
    assert_eq!(texts, ["first", "fresh"], "the stale owner wrote nothing");
    let fresh_message = replies
        .iter()
        .find(|m| m["text"] == "fresh")
        .expect("fresh reply");
    assert_eq!(fresh_message["messageId"], fresh_reply);
    assert_eq!(fresh_message["replyTo"], fresh["message"]["messageId"]);

    // The same batch again: every job gets the same answer, nothing new.
    let again = s.server.post(&path, &s.agent.token, finishes).await.ok();
    assert_eq!(again, answered);
    assert_eq!(s.replies().await.len(), 2);
    // The refused jobs are still claimed: their owners finish them.
    s.finish(&runtime, stale, json!({"skip": "late"}))
        .await
        .ok();
    s.finish(&runtime, malformed, json!({"reply": "mended"}))
        .await
        .ok();
    let inspected = s
        .server
        .get(&format!("/v1/runtimes/{runtime}"), &s.agent.token)
        .await
        .ok();
    assert_eq!(inspected["jobs"]["handled"], 3, "{inspected}");
    assert_eq!(inspected["jobs"]["skipped"], 1, "{inspected}");

    // Request-wide problems are the request's answer.
    s.server
        .post(&path, &s.agent.token, json!({"finishes": []}))
        .await
        .err(422, "unprocessable_entity");
    let twice = json!({"finishes": [batch_entry(fresh, json!({})), batch_entry(fresh, json!({}))]});
    s.server
        .post(&path, &s.agent.token, twice)
        .await
        .err(400, "invalid_argument");
    let other = s.server.register("other", "agent").await;
    s.server
        .post(
            &path,
            &other.token,
            json!({"finishes": [batch_entry(fresh, json!({"reply": "not mine"}))]}),
        )
        .await
        .err(404, "not_found");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stale_note_version_rolls_back_the_reply_too() {
    let s = setup().await;
    let runtime = s.runtime("notes", json!({})).await;
    let question = s.ask("remember this").await;
    let job = s.claim_one(&runtime).await;
    let stale = json!({"reply": "noted", "note": {"key": "decision", "text": "x", "version": 3, "sourceMessageIds": [question]}});
    s.finish(&runtime, &job, stale)
        .await
        .err(409, "version_conflict");
    assert!(s.replies().await.is_empty(), "no reply was committed");
    let inspect = s
        .server
        .get(&format!("/v1/runtimes/{runtime}"), &s.agent.token)
        .await
        .ok();
    assert_eq!(inspect["jobs"]["claimed"], 1, "the job is still claimed");
    let good = json!({"reply": "noted", "note": {"key": "decision", "text": "x", "version": 0, "sourceMessageIds": [question]}});
    s.finish(&runtime, &job, good).await.ok();
    assert_eq!(s.replies().await.len(), 1);
    let notes = s
        .server
        .get(
            &format!("/v1/runtimes/{runtime}/notes/{}", s.room),
            &s.agent.token,
        )
        .await
        .ok();
    assert_eq!(notes["notes"][0]["key"], "decision");
    assert_eq!(notes["notes"][0]["version"], 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn notes_are_shared_by_the_agents_tokens_and_private_from_everyone_else() {
    let s = setup().await;
    let runtime = s.runtime("memory", json!({})).await;
    let source = s.ask("context").await;
    let path = format!("/v1/runtimes/{runtime}/notes/{}/decision", s.room);
    let note = s
        .server
        .request(reqwest::Method::PUT, &path, Some(&s.agent.token), Some(json!({"version": 0, "text": "Decision from the last conversation", "sourceMessageIds": [source]})))
        .await
        .ok();
    assert_eq!(note["version"], 1);
    let other_token = s
        .server
        .post("/v1/tokens", &s.agent.token, json!({"scopes": ["read"]}))
        .await
        .ok();
    let list_path = format!("/v1/runtimes/{runtime}/notes/{}", s.room);
    let seen = s
        .server
        .get(&list_path, other_token["secret"].as_str().expect("secret"))
        .await
        .ok();
    assert_eq!(
        seen["notes"][0]["text"],
        "Decision from the last conversation"
    );
    // The asker (another identity) cannot see the runtime's notes.
    s.server
        .get(&list_path, &s.asker.token)
        .await
        .err(404, "not_found");
    // A source from another room is refused; an update needs the version.
    s.server
        .request(
            reqwest::Method::PUT,
            &path,
            Some(&s.agent.token),
            Some(json!({"version": 0, "text": "again"})),
        )
        .await
        .err(409, "version_conflict");
    s.server
        .request(
            reqwest::Method::PUT,
            &path,
            Some(&s.agent.token),
            Some(json!({"version": 1, "text": "x", "sourceMessageIds": [uuid::Uuid::now_v7()]})),
        )
        .await
        .err(400, "invalid_argument");
    // Once the contact ends, the notes of that room cannot be read.
    s.server
        .delete(&format!("/v1/contacts/{}", s.asker.number), &s.agent.token)
        .await
        .ok();
    s.server
        .get(&list_path, &s.agent.token)
        .await
        .err(404, "not_found");
}

#[tokio::test(flavor = "multi_thread")]
async fn failures_dead_letter_at_max_attempts_and_stats_add_up() {
    let s = setup().await;
    let runtime = s.runtime("flaky", json!({"maxAttempts": 2})).await;
    s.ask("this fails").await;
    let first = s.claim_one(&runtime).await;
    let failed = s
        .finish(&runtime, &first, json!({"error": "model_unavailable", "usage": {"modelCalls": 1, "inputTokens": 10, "outputTokens": 0}}))
        .await
        .ok();
    assert_eq!(failed["outcome"], "failed");
    assert!(failed["retryAt"].is_string());
    tokio::time::sleep(Duration::from_millis(1100)).await; // the 1 s retry backoff
    let second = s.claim_one(&runtime).await;
    assert_eq!(second["attempt"], 2);
    let dead = s
        .finish(&runtime, &second, json!({"error": "model_unavailable"}))
        .await
        .ok();
    assert_eq!(dead["outcome"], "dead_letter");
    let letters = s
        .server
        .get(
            &format!("/v1/runtimes/{runtime}/dead-letters"),
            &s.agent.token,
        )
        .await
        .ok();
    assert_eq!(letters["jobs"][0]["reason"], "model_unavailable");
    assert!(
        s.claim(&runtime, 1).await.ok()["jobs"]
            .as_array()
            .expect("jobs")
            .is_empty(),
        "never revived automatically"
    );

    // A third question: answered with reported usage; a fourth: claimed and released.
    s.ask("works").await;
    let ok = s.claim_one(&runtime).await;
    s.finish(
        &runtime,
        &ok,
        json!({"reply": "fine", "usage": {"modelCalls": 2, "inputTokens": 30, "outputTokens": 7}}),
    )
    .await
    .ok();
    s.ask("released").await;
    let released = s.claim_one(&runtime).await;
    s.server
        .post(
            &format!(
                "/v1/runtimes/{runtime}/jobs/{}/release",
                released["jobId"].as_str().expect("id")
            ),
            &s.agent.token,
            json!({"owner": released["owner"], "version": released["version"]}),
        )
        .await
        .ok();
    let again = s.claim_one(&runtime).await;
    assert_eq!(
        again["jobId"], released["jobId"],
        "released jobs are pending again at once"
    );
    assert_eq!(
        again["attempt"], 1,
        "a release does not count as an attempt"
    );

    let stats = s
        .server
        .get(&format!("/v1/runtimes/{runtime}/stats"), &s.agent.token)
        .await
        .ok();
    assert_eq!(stats["claims"], 5);
    assert_eq!(stats["attempts"], 5);
    assert_eq!(stats["finishedAttempts"], 3);
    assert_eq!(
        stats["unfinishedAttempts"], 2,
        "the released and the running attempt"
    );
    assert_eq!(stats["unreportedAttempts"], 3, "usage unknown is not zero");
    assert_eq!(
        stats["reported"],
        json!({"modelCalls": 3, "inputTokens": 40, "outputTokens": 7})
    );
    assert_eq!(stats["jobs"]["dead"], 1);

    // A manual retry revives the dead letter.
    let job_id = letters["jobs"][0]["jobId"].as_str().expect("id");
    s.server
        .post(
            &format!("/v1/runtimes/{runtime}/jobs/{job_id}/retry"),
            &s.agent.token,
            json!({}),
        )
        .await
        .ok();
    let log = s
        .server
        .get(
            &format!("/v1/runtimes/{runtime}/log?limit=500"),
            &s.agent.token,
        )
        .await
        .ok();
    let records = log["records"].as_array().expect("records");
    assert!(records.len() <= 100);
    assert_eq!(records[0]["kind"], "retried", "newest first");
    assert!(
        records
            .windows(2)
            .all(|w| w[0]["id"].as_i64() > w[1]["id"].as_i64())
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_hourly_budget_leaves_work_pending_with_a_retry_time_and_configure_keeps_it() {
    let s = setup().await;
    let runtime = s.runtime("budget", json!({"maxCallsPerHour": 3})).await;
    for i in 0..5 {
        s.ask(&format!("q{i}")).await;
    }
    for _ in 0..3 {
        let job = s.claim_one(&runtime).await;
        s.finish(&runtime, &job, json!({"reply": "ok"})).await.ok();
    }
    let idle = s.claim(&runtime, 1).await.ok();
    assert!(idle["jobs"].as_array().expect("jobs").is_empty());
    let retry_at = idle["retryAt"]
        .as_str()
        .expect("a retry time when the budget refills");
    assert!(retry_at.ends_with('Z'));
    let version = s
        .server
        .get(&format!("/v1/runtimes/{runtime}"), &s.agent.token)
        .await
        .ok()["version"]
        .clone();
    let configured = s
        .server
        .post(
            &format!("/v1/runtimes/{runtime}/configure"),
            &s.agent.token,
            json!({"version": version, "policy": {"maxCallsPerHour": 4}}),
        )
        .await
        .ok();
    assert_eq!(configured["version"], 2);
    assert_eq!(configured["jobs"]["pending"], 2, "pending jobs are kept");
    // The three units already spent still count: only one more this hour.
    let job = s.claim_one(&runtime).await;
    s.finish(&runtime, &job, json!({"reply": "ok"})).await.ok();
    assert!(
        s.claim(&runtime, 1).await.ok()["jobs"]
            .as_array()
            .expect("jobs")
            .is_empty()
    );
    // An old version is refused.
    s.server
        .post(
            &format!("/v1/runtimes/{runtime}/configure"),
            &s.agent.token,
            json!({"version": 1, "policy": {}}),
        )
        .await
        .err(409, "version_conflict");
}

#[tokio::test(flavor = "multi_thread")]
async fn outside_active_hours_nothing_is_claimed_and_the_retry_is_the_window_start() {
    let s = setup().await;
    // A one-minute window twelve hours away from now.
    let now = time::OffsetDateTime::now_utc();
    let start = now + time::Duration::hours(12);
    let end = start + time::Duration::minutes(1);
    let window = format!(
        "{:02}:{:02}-{:02}:{:02}",
        start.hour(),
        start.minute(),
        end.hour(),
        end.minute()
    );
    let runtime = s
        .runtime("night", json!({"activeHoursUTC": [window]}))
        .await;
    s.ask("are you awake?").await;
    let idle = s.claim(&runtime, 1).await.ok();
    assert!(idle["jobs"].as_array().expect("jobs").is_empty());
    let retry_at = idle["retryAt"].as_str().expect("retry at the window start");
    let expected = format!("T{:02}:{:02}:00Z", start.hour(), start.minute());
    assert!(
        retry_at.ends_with(&expected),
        "{retry_at} should end with {expected}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_active_lease_makes_configure_and_delete_busy() {
    let s = setup().await;
    let runtime = s.runtime("busy", json!({})).await;
    s.ask("hold this").await;
    let _job = s.claim_one(&runtime).await;
    s.server
        .post(
            &format!("/v1/runtimes/{runtime}/configure"),
            &s.agent.token,
            json!({"version": 1, "policy": {}}),
        )
        .await
        .err(409, "runtime_busy");
    s.server
        .delete(&format!("/v1/runtimes/{runtime}"), &s.agent.token)
        .await
        .err(409, "runtime_busy");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_scan_touches_only_changed_rooms_among_ten_thousand() {
    use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
    let s = setup().await;
    // 10,000 more rooms the agent is in, made directly in the database.
    let mut conn = AsyncPgConnection::establish(s.server.db.url())
        .await
        .expect("connect");
    diesel::sql_query(format!(
        "WITH r AS (
             INSERT INTO rooms (id, kind, name, created_by, last_seq)
             SELECT gen_random_uuid(), 'group', 'room ' || g, '{agent}', 0 FROM generate_series(1, 10000) g
             RETURNING id)
         INSERT INTO room_members (room_id, identity_id) SELECT id, '{agent}' FROM r",
        agent = s.agent.id
    ))
    .execute(&mut conn)
    .await
    .expect("rooms");
    let runtime = s.runtime("wide", json!({})).await;
    let question = s.ask("needle").await;

    #[derive(diesel::QueryableByName)]
    struct Count {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        n: i64,
    }
    let dirty: Count = diesel::sql_query(format!(
        "SELECT count(*) AS n FROM runtime_dirty_rooms WHERE runtime_id = '{runtime}'"
    ))
    .get_result(&mut conn)
    .await
    .expect("dirty");
    assert_eq!(
        dirty.n, 1,
        "only the room that changed is marked for the scan"
    );
    let job = s.claim_one(&runtime).await;
    assert_eq!(job["message"]["messageId"], question.as_str());
    let dirty: Count = diesel::sql_query(format!(
        "SELECT count(*) AS n FROM runtime_dirty_rooms WHERE runtime_id = '{runtime}'"
    ))
    .get_result(&mut conn)
    .await
    .expect("dirty");
    assert_eq!(dirty.n, 0);
    // The scan's plan reads the runtime's marks by index, not every checkpoint.
    #[derive(diesel::QueryableByName)]
    struct Plan {
        #[diesel(sql_type = diesel::sql_types::Text, column_name = "QUERY PLAN")]
        line: String,
    }
    let plan: Vec<Plan> = diesel::sql_query(format!(
        "EXPLAIN SELECT room_id FROM runtime_dirty_rooms WHERE runtime_id = '{runtime}' ORDER BY marked_at LIMIT 33"
    ))
    .load(&mut conn)
    .await
    .expect("explain");
    let plan: String = plan
        .into_iter()
        .map(|p| p.line)
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        !plan.contains("runtime_checkpoints") && !plan.contains("room_members"),
        "{plan}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn another_identity_cannot_touch_the_runtime() {
    let s = setup().await;
    let runtime = s.runtime("private", json!({})).await;
    let stranger = s.server.register("stranger", "agent").await;
    for path in ["", "/log", "/stats", "/dead-letters"] {
        s.server
            .get(&format!("/v1/runtimes/{runtime}{path}"), &stranger.token)
            .await
            .err(404, "not_found");
        s.server
            .get(&format!("/v1/runtimes/{runtime}{path}"), &s.asker.token)
            .await
            .err(404, "not_found");
    }
    s.server
        .post(
            &format!("/v1/runtimes/{runtime}/claim"),
            &stranger.token,
            json!({}),
        )
        .await
        .err(404, "not_found");
    let read_only = s
        .server
        .post("/v1/tokens", &s.agent.token, json!({"scopes": ["read"]}))
        .await
        .ok();
    s.server
        .post(
            &format!("/v1/runtimes/{runtime}/claim"),
            read_only["secret"].as_str().expect("secret"),
            json!({}),
        )
        .await
        .err(403, "forbidden");
}

#[tokio::test(flavor = "multi_thread")]
async fn lost_access_rolls_back_a_finish_and_skips_the_rest() {
    let s = setup().await;
    let runtime = s.runtime("revoked", json!({"concurrency": 2})).await;
    s.ask("first").await;
    s.ask("second").await;
    let job = s.claim_one(&runtime).await;
    // The contact ends while the handler runs.
    s.server
        .delete(&format!("/v1/contacts/{}", s.agent.number), &s.asker.token)
        .await
        .ok();
    s.finish(&runtime, &job, json!({"reply": "too late"}))
        .await
        .err(403, "forbidden");
    let messages = s.server.count("messages").await;
    assert_eq!(messages, 2, "no reply was written");
    // The other pending job is skipped for lost access, never replayed.
    let version = s
        .server
        .get(&format!("/v1/runtimes/{runtime}"), &s.agent.token)
        .await
        .ok();
    assert_eq!(version["jobs"]["claimed"], 1);
    let idle = s.claim(&runtime, 1).await.ok();
    assert!(idle["jobs"].as_array().expect("jobs").is_empty());
    let inspect = s
        .server
        .get(&format!("/v1/runtimes/{runtime}"), &s.agent.token)
        .await
        .ok();
    assert_eq!(inspect["jobs"]["skipped"], 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_message_through_one_server_wakes_a_runtime_socket_on_another() {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let s = setup().await;
    let runtime = s.runtime("woken", json!({})).await;
    let (b_url, _stop) = s.server.sibling().await;
    let mut request = format!(
        "{}/v1/runtimes/{runtime}/socket",
        b_url.replacen("http://", "ws://", 1)
    )
    .into_client_request()
    .expect("request");
    request.headers_mut().insert(
        "authorization",
        format!("Bearer {}", s.agent.token).parse().expect("header"),
    );
    let (mut socket, _) = tokio_tungstenite::connect_async(request)
        .await
        .expect("connect");
    s.ask("wake the worker").await;
    let frame = common::next_frame(&mut socket, Duration::from_secs(10))
        .await
        .expect("signal");
    assert_eq!(frame, r#"{"event":"inbox_changed"}"#);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_room_joined_later_is_scanned_from_its_first_message() {
    let s = setup().await;
    let runtime = s.runtime("joiner", json!({})).await;
    // A group the agent is not in yet already holds a question.
    let friend = s.server.register("friend", "person").await;
    s.server.befriend(&s.asker, &friend).await;
    let group = s
        .server
        .post(
            "/v1/rooms",
            &s.asker.token,
            json!({"name": "later", "members": [friend.number]}),
        )
        .await
        .ok()["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let old = s
        .server
        .send(
            &s.asker,
            json!({"roomId": group, "text": "asked before you came", "ask": true}),
        )
        .await;
    assert!(
        s.claim(&runtime, 1).await.ok()["jobs"]
            .as_array()
            .expect("jobs")
            .is_empty()
    );
    // The agent joins: no new message is needed for the old question to be found.
    s.server
        .post(
            &format!("/v1/rooms/{group}/members"),
            &s.asker.token,
            json!({"number": s.agent.number}),
        )
        .await
        .ok();
    let job = s.claim_one(&runtime).await;
    assert_eq!(job["message"]["messageId"], old["messageId"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_question_sent_while_a_claim_scans_its_room_is_never_lost() {
    let s = setup().await;
    let runtime = s
        .runtime(
            "racer",
            json!({"concurrency": 64, "maxCallsPerHour": 10000}),
        )
        .await;
    let mut answered = 0;
    for round in 0..40 {
        // A plain message marks the room; then a claim and a question race.
        s.server
            .send(
                &s.asker,
                json!({"roomId": s.room, "text": format!("note {round}")}),
            )
            .await;
        let claim = {
            let server = s.server.clone();
            let token = s.agent.token.clone();
            let path = format!("/v1/runtimes/{runtime}/claim");
            tokio::spawn(
                async move { server.post(&path, &token, json!({"maxJobs": 8})).await.ok() },
            )
        };
        let question = s.ask(&format!("question {round}")).await;
        let mut seen: Vec<Value> = claim.await.expect("task")["jobs"]
            .as_array()
            .expect("jobs")
            .clone();
        seen.extend(
            s.claim(&runtime, 8).await.ok()["jobs"]
                .as_array()
                .expect("jobs")
                .clone(),
        );
        assert!(
            seen.iter()
                .any(|j| j["message"]["messageId"] == question.as_str()),
            "round {round}: the question was not scanned"
        );
        for job in &seen {
            s.finish(&runtime, job, json!({"reply": "ok"})).await.ok();
            answered += 1;
        }
    }
    assert_eq!(answered, 40);
}
