//! What a finish answers: a retried finish gets its first outcome, and the
//! mailbox and runtime handling of one message are independent.

use super::*;

#[tokio::test(flavor = "multi_thread")]
async fn a_retried_error_finish_returns_the_original_failed_or_dead_letter_outcome() {
    let bot = Bot::start(json!({"maxAttempts": 2})).await;
    bot.ask("this fails").await;
    let first = bot.claim_one().await;
    let error = json!({"error": "model_unavailable", "usage": {"modelCalls": 1, "inputTokens": 3, "outputTokens": 0}});
    let failed = bot.finish(&first, error.clone()).await.ok();
    assert_eq!(failed["outcome"], "failed");
    assert!(failed["retryAt"].is_string(), "{failed}");
    // The first response was lost: the worker sends the same finish again.
    for _ in 0..3 {
        assert_eq!(bot.finish(&first, error.clone()).await.ok(), failed);
    }
    bot.finish(&first, json!({"error": "something else"}))
        .await
        .err(409, "fingerprint_mismatch");
    bot.finish(&first, json!({"reply": "too late"}))
        .await
        .err(409, "fingerprint_mismatch");

    // The last attempt dead-letters; its retry says so again.
    let second = bot.claim_after_backoff().await;
    assert_eq!(second["attempt"], 2);
    let dead = bot
        .finish(&second, json!({"error": "model_unavailable"}))
        .await
        .ok();
    assert_eq!(dead["outcome"], "dead_letter");
    assert_eq!(
        bot.finish(&second, json!({"error": "model_unavailable"}))
            .await
            .ok(),
        dead
    );
    // The first attempt's retry still gets its own answer, not the job's.
    assert_eq!(bot.finish(&first, error).await.ok(), failed);
    let stats = bot
        .agent_get(&format!("/v1/runtimes/{}/stats", bot.runtime))
        .await;
    assert_eq!(stats["attempts"], 2, "retries are not new attempts");
    assert_eq!(stats["jobs"]["dead"], 1);
}

/// The agent's unacknowledged messages (its mailbox) in the bot's room.
async fn agent_inbox(bot: &Bot) -> Vec<String> {
    let inbox = bot.agent_get("/v1/inbox").await;
    inbox["rooms"]
        .as_array()
        .expect("rooms")
        .iter()
        .filter(|room| room["roomId"] == bot.room.as_str())
        .flat_map(|room| room["messages"].as_array().expect("messages").clone())
        .map(|m| m["messageId"].as_str().expect("id").to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_mailbox_ack_and_runtime_handling_never_move_each_other() {
    let bot = Bot::start(json!({})).await;
    let first = bot.ask("first").await;
    let second = bot.ask("second").await;
    assert_eq!(agent_inbox(&bot).await, [first.clone(), second.clone()]);

    // Acknowledging both in the mailbox leaves both jobs to the runtime.
    let inbox = bot.agent_get("/v1/inbox").await;
    let last_seq = inbox["rooms"][0]["lastSeq"].clone();
    let acked = bot
        .base
        .server
        .post(
            &format!("/v1/rooms/{}/ack", bot.room),
            &bot.base.agent.token,
            json!({"seq": last_seq}),
        )
        .await
        .ok();
    assert_eq!(acked["ackedSeq"], last_seq);
    assert!(agent_inbox(&bot).await.is_empty());
    let job = bot.claim_one().await;
    assert_eq!(job["message"]["messageId"], first.as_str(), "{job}");
    bot.finish(&job, json!({"reply": "FIRST"})).await.ok();
    let job = bot.claim_one().await;
    assert_eq!(job["message"]["messageId"], second.as_str());
    bot.finish(&job, json!({"reply": "SECOND"})).await.ok();

    // Handling a job leaves the mailbox alone: a third question, answered by
    // the runtime, is still unacknowledged for the agent.
    let third = bot.ask("third").await;
    let job = bot.claim_one().await;
    assert_eq!(job["message"]["messageId"], third.as_str());
    bot.finish(&job, json!({"reply": "THIRD"})).await.ok();
    assert_eq!(agent_inbox(&bot).await, [third]);
}
