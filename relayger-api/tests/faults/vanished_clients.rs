//! Clients that vanish mid-request leave no transaction holding locks.

use super::*;

/// Writes one HTTP request on a raw socket and resets the connection (RST,
/// SO_LINGER 0) once the request's transaction waits on the lock that
/// a second connection takes with `lock_sql`; then waits until the database gave up the
/// vanished request's work, and lets go of the lock.
async fn vanish_mid_transaction(bot: &Bot, lock_sql: &str, path: &str, body: Value) {
    let mut holder = bot.base.server.hold_lock(lock_sql).await;
    let address = bot.base.server.base_url.trim_start_matches("http://");
    let mut socket = tokio::net::TcpStream::connect(address)
        .await
        .expect("connect");
    let body = body.to_string();
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        bot.base.agent.token,
        body.len()
    );
    socket
        .write_all(request.as_bytes())
        .await
        .expect("write the request");
    let what = format!("{path} to wait on the lock");
    let mut watcher = watch_until_someone_waits(&bot.base.server, &what).await;
    // A zero linger never blocks on drop (the deprecation is about a
    // non-zero one): the close sends RST, as a crashed client's would.
    #[allow(deprecated)]
    socket.set_linger(Some(Duration::ZERO)).expect("SO_LINGER");
    drop(socket);
    // The request is gone: its transaction must not wait on, nor later hold,
    // anything (today's failure: it holds its locks, idle in transaction).
    wait_for(
        &mut watcher,
        &format!("the vanished {path} to stop waiting"),
        NOBODY_WAITS_ON_A_LOCK,
    )
    .await;
    execute(&mut holder, "COMMIT").await;
    wait_for(
        &mut watcher,
        "no session idle in transaction",
        "SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity \
         WHERE datname = current_database() AND state LIKE 'idle in transaction%') AS flag",
    )
    .await;
}

/// A send into the bot's room answers within a second.
async fn send_commits_at_once(bot: &Bot, text: &str) {
    let sent = tokio::time::timeout(
        Duration::from_secs(1),
        bot.base.server.post(
            "/v1/messages",
            &bot.asker.token,
            json!({"roomId": bot.room, "text": text}),
        ),
    )
    .await
    .expect("a send into the room waited");
    sent.ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn claims_finishes_and_sends_whose_client_resets_leave_no_transaction_holding_locks() {
    let bot = Bot::start(json!({})).await;

    // A send that vanishes while it waits for the room.
    vanish_mid_transaction(
        &bot,
        &format!("SELECT id FROM rooms WHERE id = '{}' FOR UPDATE", bot.room),
        "/v1/messages",
        json!({"roomId": bot.room, "text": "vanishing"}),
    )
    .await;
    send_commits_at_once(&bot, "after the send").await;

    // A claim that vanishes while it waits for its runtime.
    bot.ask("a question").await;
    vanish_mid_transaction(
        &bot,
        &format!(
            "SELECT id FROM runtimes WHERE id = '{}' FOR UPDATE",
            bot.runtime
        ),
        &format!("/v1/runtimes/{}/claim", bot.runtime),
        json!({"maxJobs": 1}),
    )
    .await;
    send_commits_at_once(&bot, "after the claim").await;
    let job = bot.claim_one().await;
    assert_eq!(job["attempt"], 1, "the vanished claim granted nothing");

    // A finish that vanishes while it waits for its job.
    vanish_mid_transaction(
        &bot,
        &format!(
            "SELECT id FROM jobs WHERE id = '{}' FOR UPDATE",
            job["jobId"].as_str().expect("job id")
        ),
        &bot.finish_path(&job),
        Bot::finish_body(&job, json!({"reply": "vanished"})),
    )
    .await;
    send_commits_at_once(&bot, "after the finish").await;
    let done = bot.finish(&job, json!({"reply": "answered"})).await.ok();
    assert_eq!(done["outcome"], "replied", "the job was still claimed");
}
