//! The dashboard's reads of a runtime's work over HTTP: the last hour
//! minute by minute, a filtered page of jobs, one job in full; bad input is
//! refused with the error envelope, another agent's runtime is not found.

use crate::common;

use common::bot::Bot;
use serde_json::{Value, json};

fn sum(minutes: &Value, field: &str) -> u64 {
    minutes
        .as_array()
        .expect("minutes")
        .iter()
        .map(|m| m[field].as_u64().expect("a count"))
        .sum()
}

#[tokio::test(flavor = "multi_thread")]
async fn activity_jobs_and_a_job_in_full_over_http() {
    let bot = Bot::start().await;
    let server = &bot.server;
    let token = &bot.agent.token;
    let (alice, alice_room) = bot.contact("alice").await;
    let (bob, bob_room) = bot.contact("bob").await;
    let runtime = bot
        .runtime("dashboard", "now", json!({"maxAttempts": 1}))
        .await;
    let failed_question = bot.ask(&bob, &bob_room, "will it rain?").await;
    bot.ask(&alice, &alice_room, "what is the plan?").await;
    let claimed = bot.claim(&runtime, 1).await.ok();
    let failed = claimed["jobs"][0].clone();
    assert_eq!(failed["message"]["messageId"], failed_question.as_str());
    server
        .finish_job(
            token,
            &runtime,
            &failed,
            json!({"error": "the model is unavailable"}),
        )
        .await
        .ok();
    let answered = bot.claim(&runtime, 1).await.ok()["jobs"][0].clone();
    bot.finish(&runtime, &answered).await;

    let base = format!("/v1/runtimes/{runtime}");
    let activity = server.get(&format!("{base}/activity"), token).await.ok();
    let minutes = &activity["minutes"];
    assert_eq!(minutes.as_array().expect("minutes").len(), 60, "{activity}");
    assert_eq!(sum(minutes, "claimed"), 2, "{activity}");
    assert_eq!(sum(minutes, "answered"), 1, "{activity}");
    assert_eq!(sum(minutes, "failed"), 1, "{activity}");
    assert_eq!(sum(minutes, "replies"), 1, "{activity}");
    assert!(
        minutes
            .as_array()
            .expect("minutes")
            .iter()
            .any(|m| m["latencyMedianMs"].is_u64()),
        "{activity}"
    );

    let by_bob = server
        .get(&format!("{base}/jobs?sender={}", bob.number), token)
        .await
        .ok();
    assert_eq!(
        by_bob["jobs"].as_array().expect("jobs").len(),
        1,
        "{by_bob}"
    );
    assert_eq!(by_bob["jobs"][0]["question"]["text"], "will it rain?");
    assert_eq!(by_bob["jobs"][0]["job"]["state"], "dead");
    let first = server
        .get(&format!("{base}/jobs?limit=1"), token)
        .await
        .ok();
    let next = first["next"].as_str().expect("a next cursor");
    let second = server
        .get(&format!("{base}/jobs?limit=1&after={next}"), token)
        .await
        .ok();
    assert_eq!(second["jobs"][0]["question"]["text"], "will it rain?");
    assert!(second.get("next").is_none(), "{second}");

    let detail = server
        .get(
            &format!("{base}/jobs/{}", failed["jobId"].as_str().expect("id")),
            token,
        )
        .await
        .ok();
    assert_eq!(detail["question"]["text"], "will it rain?");
    assert_eq!(detail["job"]["state"], "dead");
    assert_eq!(detail["attempts"][0]["error"], "the model is unavailable");
    assert_eq!(detail["attempts"][0]["outcome"], "failed");
    assert!(detail["attempts"][0]["durationMs"].is_u64(), "{detail}");
    let by_key = server
        .get(
            &format!("{base}/jobs/{}", answered["jobKey"].as_str().expect("key")),
            token,
        )
        .await
        .ok();
    assert_eq!(by_key["reply"]["text"], "ok");

    // Bad input: 400 with the envelope, and nothing changes.
    for query in [
        "limit=0",
        "limit=101",
        "state=lost",
        "sender=abc",
        "since=yesterday",
        "until=2026-12-07%2011:00:00Z",
        "since=2026-12-07T11:00:00Z&until=2026-12-07T10:00:00Z",
        "room=not-a-uuid",
        "after=not-a-uuid",
        "colour=blue",
    ] {
        let reply = server.get(&format!("{base}/jobs?{query}"), token).await;
        reply.err(400, "invalid_argument");
    }
    server
        .get(&format!("{base}/jobs/not-a-job"), token)
        .await
        .err(400, "invalid_argument");
    server
        .get(&format!("{base}/jobs/{}", uuid::Uuid::nil()), token)
        .await
        .err(404, "not_found");

    // Another agent (and the askers) reach none of it.
    let other = server.register("other", "agent").await;
    for who in [&other, &alice] {
        for path in [
            format!("{base}/activity"),
            format!("{base}/jobs"),
            format!("{base}/jobs/{}", failed["jobId"].as_str().expect("id")),
        ] {
            server.get(&path, &who.token).await.err(404, "not_found");
        }
    }
}
