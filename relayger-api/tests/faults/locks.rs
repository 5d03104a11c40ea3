//! Finishes that wait on locks past their lease, and concurrent writers of
//! one room.

use super::*;

/// Sends one lease write (`heartbeat`, `release` or `finish`, with
/// `result` for a finish) for a claimed job while another transaction holds
/// the job's row lock, lets the lease run out while the write waits, then
/// lets it through: its status and body.
async fn lease_write_after_waiting_past_the_lease(
    bot: &Bot,
    job: &Value,
    write: &str,
) -> (u16, Value) {
    let job_id = job["jobId"].as_str().expect("job id").to_owned();
    let mut holder = bot
        .base
        .server
        .hold_lock(&format!(
            "SELECT id FROM jobs WHERE id = '{job_id}' FOR UPDATE"
        ))
        .await;
    let mut body = Bot::finish_body(job, json!({"reply": "late"}));
    if write != "finish" {
        body.as_object_mut().expect("object").remove("result");
    }
    let request = reqwest::Client::new()
        .post(format!(
            "{}/v1/runtimes/{}/jobs/{job_id}/{write}",
            bot.base.server.base_url, bot.runtime
        ))
        .bearer_auth(&bot.base.agent.token)
        .json(&body);
    let sent = tokio::spawn(async move {
        let response = request.send().await.expect("answered");
        let status = response.status().as_u16();
        (status, response.json().await.expect("a JSON body"))
    });
    let mut watcher = watch_until_someone_waits(
        &bot.base.server,
        &format!("the {write} to wait on the job lock"),
    )
    .await;
    // The write began well inside its lease; the lease now runs out while
    // it waits.
    wait_for(
        &mut watcher,
        "the lease to expire",
        &format!(
            "SELECT lease_expires_at < clock_timestamp() AS flag FROM jobs WHERE id = '{job_id}'"
        ),
    )
    .await;
    execute(&mut holder, "COMMIT").await;
    sent.await.expect("join")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_finish_that_waited_on_the_job_lock_past_its_lease_is_refused() {
    let bot = Bot::on(TestServer::start_with_lease(1000).await, json!({})).await;
    bot.ask("slow lock").await;
    let job = bot.claim_one().await;

    let (status, body) = lease_write_after_waiting_past_the_lease(&bot, &job, "finish").await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "lease_lost", "{body}");
    assert_eq!(bot.base.server.count("messages WHERE by_runtime").await, 0);
}

/// One fence with one clock: a heartbeat and a release that waited for the
/// job's row lock until the lease ran out are refused exactly like a finish
/// in that position, and write nothing (the lease is not renewed, the job
/// is not released).
#[tokio::test(flavor = "multi_thread")]
async fn a_heartbeat_or_release_that_waited_on_the_job_lock_past_its_lease_is_refused_like_a_finish()
 {
    let bot = Bot::on(TestServer::start_with_lease(1000).await, json!({})).await;
    for write in ["heartbeat", "release"] {
        bot.ask(&format!("slow lock for a {write}")).await;
        let job = bot.claim_one().await;
        let job_id = job["jobId"].as_str().expect("job id").to_owned();
        let (status, body) = lease_write_after_waiting_past_the_lease(&bot, &job, write).await;
        assert_eq!(status, 409, "{write}: {body}");
        assert_eq!(body["error"]["code"], "lease_lost", "{write}: {body}");
        assert_eq!(
            bot.base
                .server
                .count(&format!(
                    "jobs WHERE id = '{job_id}' AND state = 'claimed' \
                     AND lease_expires_at < clock_timestamp()"
                ))
                .await,
            1,
            "{write}: the lease stays expired and the job unreleased"
        );
        assert_eq!(
            bot.base
                .server
                .count(&format!(
                    "attempts WHERE job_id = '{job_id}' AND end_event = 'released'"
                ))
                .await,
            0,
            "{write}: nothing logged"
        );
        // The next claim ends the expired lease; the job comes back later.
        bot.claim().await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reply_and_a_note_with_the_same_key_do_not_deadlock() {
    let bot = Bot::start(json!({})).await;
    let question = bot.ask("remember").await;
    let job = bot.claim_one().await;

    // Stall the reply after it holds the room lock: its message refers to
    // the question, whose row is locked here (the foreign key waits).
    let mut holder = bot
        .base
        .server
        .hold_lock(&format!(
            "SELECT id FROM messages WHERE id = '{question}' FOR UPDATE"
        ))
        .await;
    let note = json!({"key": "decision", "text": "from the reply", "version": 0, "sourceMessageIds": [question]});
    let finish = bot.spawn_finish(&job, json!({"reply": "noted", "note": note}));
    let _watcher =
        watch_until_someone_waits(&bot.base.server, "the reply to wait with the room locked").await;

    // The operator writes the same note meanwhile: it must not wait for the
    // reply's room lock (a note only references the room).
    let put = tokio::time::timeout(
        Duration::from_secs(5),
        bot.base.server.request(
            reqwest::Method::PUT,
            &format!("/v1/runtimes/{}/notes/{}/decision", bot.runtime, bot.room),
            Some(&bot.base.agent.token),
            Some(json!({"text": "from the operator", "version": 0, "sourceMessageIds": []})),
        ),
    )
    .await
    .expect("the note waited on the reply's room lock");
    assert_eq!(put.ok()["version"], 1);

    execute(&mut holder, "COMMIT").await;
    let (status, body) = finish.await.expect("join");
    assert_eq!(status, 409, "{body}");
    assert_eq!(
        body["error"]["code"], "version_conflict",
        "the note exists now; the whole finish rolled back"
    );
    let retried = bot
        .finish(
            &job,
            json!({"reply": "noted", "note": {"key": "decision", "text": "from the reply", "version": 1, "sourceMessageIds": [question]}}),
        )
        .await
        .ok();
    assert_eq!(retried["outcome"], "replied");
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_note_creates_at_sixty_three_leave_exactly_sixty_four() {
    let bot = Bot::start(json!({})).await;
    let bot = std::sync::Arc::new(bot);
    let put = |bot: std::sync::Arc<Bot>, key: String| async move {
        bot.base
            .server
            .request(
                reqwest::Method::PUT,
                &format!("/v1/runtimes/{}/notes/{}/{key}", bot.runtime, bot.room),
                Some(&bot.base.agent.token),
                Some(json!({"text": key, "version": 0, "sourceMessageIds": []})),
            )
            .await
    };
    for i in 0..63 {
        put(bot.clone(), format!("n{i}")).await.ok();
    }

    // Hold the room so that every create has counted and inserted before
    // any of them can commit (a note's foreign key waits on the room).
    let mut holder = bot
        .base
        .server
        .hold_lock(&format!(
            "SELECT id FROM rooms WHERE id = '{}' FOR UPDATE",
            bot.room
        ))
        .await;
    let racers: Vec<_> = (0..8)
        .map(|i| tokio::spawn(put(bot.clone(), format!("race{i}"))))
        .collect();
    let mut watcher = bot.base.server.raw_connection().await;
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
        let reply = racer.await.expect("join");
        if reply.status.is_success() {
            created += 1;
        } else {
            reply.err(400, "invalid_argument");
        }
    }
    assert_eq!(created, 1, "one create fits under the cap");
    assert_eq!(bot.base.server.count("notes").await, 64);
}
