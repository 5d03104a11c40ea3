//! Claim liveness over real HTTP and PostgreSQL: refusals never delay a
//! real question, `morePending` tells a worker to claim again at once, and
//! every claim response carries the contact-request count a token may see.

use crate::common;

use std::time::{Duration, Instant};

use common::bot::Bot;
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// Whether a worker that got this idle or partial answer claims again at
/// once: `morePending`, or a `retryAt` that is already due (one second of
/// leeway for the two clocks of this one machine).
fn claims_again_at_once(body: &Value) -> bool {
    if body["morePending"] == true {
        return true;
    }
    body["retryAt"].as_str().is_some_and(|at| {
        let at = OffsetDateTime::parse(at, &Rfc3339).expect("retryAt is RFC 3339");
        at <= OffsetDateTime::now_utc() + Duration::from_secs(1)
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn three_hundred_refused_questions_do_not_delay_an_allowed_one() {
    let bot = Bot::start().await;
    let (stranger, stranger_room) = bot.contact("stranger").await;
    let (friend, friend_room) = bot.contact("friend").await;
    for i in 0..300 {
        bot.ask(&stranger, &stranger_room, &format!("spam {i}"))
            .await;
    }
    let question = bot.ask(&friend, &friend_room, "a real question").await;
    let runtime = bot
        .runtime(
            "gatekeeper",
            "beginning",
            json!({"allowedSenders": [friend.number]}),
        )
        .await;

    // Claim as a worker with one slot does: again at once while the server
    // says so, otherwise it would wait for a signal that never comes.
    let started = Instant::now();
    let mut claims = 0;
    let answered = loop {
        let body = bot.claim(&runtime, 1).await.ok();
        claims += 1;
        if let Some(job) = body["jobs"].as_array().expect("jobs").first() {
            assert_eq!(job["message"]["messageId"], question.as_str(), "{job}");
            bot.finish(&runtime, job).await;
            break started.elapsed();
        }
        assert!(
            claims_again_at_once(&body),
            "claim {claims} left the allowed question pending and told the worker to wait: {body}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "still unanswered after {claims} claims"
        );
    };
    assert!(
        answered < Duration::from_secs(2),
        "answered after {answered:?} and {claims} claims"
    );
    // The worker, free again, drains the rest of the refusals and goes idle.
    loop {
        let body = bot.claim(&runtime, 1).await.ok();
        assert!(body["jobs"].as_array().expect("jobs").is_empty(), "{body}");
        if !claims_again_at_once(&body) {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "never idle");
    }
    let runtime_view = bot
        .server
        .get(&format!("/v1/runtimes/{runtime}"), &bot.agent.token)
        .await
        .ok();
    assert_eq!(runtime_view["jobs"]["skipped"], 300, "{runtime_view}");
    assert_eq!(runtime_view["jobs"]["pending"], 0, "{runtime_view}");
    assert_eq!(runtime_view["jobs"]["handled"], 1, "{runtime_view}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_claim_that_filled_every_free_slot_or_hit_the_concurrency_cap_says_nothing_more_is_pending()
 {
    let bot = Bot::start().await;
    let (asker, room) = bot.contact("asker").await;
    let runtime = bot
        .runtime(
            "narrow",
            "now",
            json!({"concurrency": 2, "maxCallsPerHour": 1000}),
        )
        .await;
    for i in 0..6 {
        bot.ask(&asker, &room, &format!("question {i}")).await;
    }
    // Asked for one, got one: the worker has no free slot to claim with.
    let one = bot.claim(&runtime, 1).await.ok();
    assert_eq!(one["jobs"].as_array().expect("jobs").len(), 1);
    assert_eq!(one["morePending"], false, "{one}");
    // Asked for ten, the concurrency cap let one more through: claiming
    // again would only spin.
    let capped = bot.claim(&runtime, 10).await.ok();
    assert_eq!(capped["jobs"].as_array().expect("jobs").len(), 1);
    assert_eq!(capped["morePending"], false, "{capped}");
    let full = bot.claim(&runtime, 1).await.ok();
    assert!(full["jobs"].as_array().expect("jobs").is_empty());
    assert!(
        !claims_again_at_once(&full),
        "a runtime at its concurrency cap must not be told to claim again now: {full}"
    );
    // A slot frees: the next claim finds the waiting questions.
    let job = one["jobs"][0].clone();
    bot.finish(&runtime, &job).await;
    let next = bot.claim(&runtime, 1).await.ok();
    assert_eq!(next["jobs"].as_array().expect("jobs").len(), 1, "{next}");
}

#[tokio::test(flavor = "multi_thread")]
async fn every_claim_carries_the_contact_request_count_only_for_a_token_that_may_see_contacts() {
    let bot = Bot::start().await;
    let (asker, room) = bot.contact("asker").await;
    let runtime = bot
        .runtime("public", "now", json!({"concurrency": 4}))
        .await;
    let newcomer = bot.server.register("newcomer", "person").await;
    bot.server
        .post(
            "/v1/contacts/requests",
            &newcomer.token,
            json!({"number": bot.agent.number}),
        )
        .await
        .ok();
    let header = |reply: &common::Reply| {
        reply
            .headers
            .get("relayger-contact-requests")
            .map(|v| v.to_str().expect("ascii").to_owned())
    };

    // A claim that grants a job (a busy worker) carries the count too.
    bot.ask(&asker, &room, "a long job").await;
    let busy = bot.claim(&runtime, 1).await;
    assert_eq!(header(&busy), Some("1".to_owned()), "{:?}", busy.headers);
    assert_eq!(busy.body["jobs"].as_array().expect("jobs").len(), 1);
    let idle = bot.claim(&runtime, 1).await;
    assert!(idle.body["jobs"].as_array().expect("jobs").is_empty());
    assert_eq!(header(&idle), Some("1".to_owned()));

    // No contacts scope, or restricted to a room: no count, busy or idle.
    let token = async |body: Value| {
        bot.server
            .post("/v1/tokens", &bot.agent.token, body)
            .await
            .ok()["secret"]
            .as_str()
            .expect("secret")
            .to_owned()
    };
    let no_contacts = token(json!({"scopes": ["read", "write"]})).await;
    let room_bound =
        token(json!({"scopes": ["read", "write", "contacts"], "roomIds": [room]})).await;
    for secret in [&no_contacts, &room_bound] {
        bot.ask(&asker, &room, "another job").await;
        let busy = bot.server.claim_jobs(secret, &runtime, 1).await;
        assert_eq!(
            busy.body["jobs"].as_array().expect("jobs").len(),
            1,
            "{}",
            busy.body
        );
        assert_eq!(header(&busy), None);
        let idle = bot.server.claim_jobs(secret, &runtime, 1).await;
        assert!(idle.body["jobs"].as_array().expect("jobs").is_empty());
        assert_eq!(header(&idle), None);
    }
}
