//! Finishes: idempotent retries, batches, and what rolls a finish back.
//! (A finish rolled back by lost access is relayger-store's `finishes`
//! test: no one can read the closed room over HTTP.)

use super::*;

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
    let inspected = s.inspect(&runtime).await;
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
    let inspect = s.inspect(&runtime).await;
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
