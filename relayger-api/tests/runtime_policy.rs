//! The policy at claim time and the runtime log, over real HTTP and
//! PostgreSQL: allowedSenders and allowedRooms turn pending jobs into skips
//! (also after a configure), final jobs are never replayed, and log pages
//! are clamped and never short because of rooms the agent left.

use crate::common;

use std::collections::HashSet;

use common::bot::Bot;
use serde_json::{Value, json};

fn ids(jobs: &Value) -> Vec<String> {
    jobs["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .map(|job| job["message"]["messageId"].as_str().expect("id").to_owned())
        .collect()
}

fn skip_reasons(log: &[Value]) -> Vec<(String, String)> {
    log.iter()
        .filter(|r| r["kind"] == "skipped")
        .map(|r| {
            (
                r["messageId"].as_str().expect("message").to_owned(),
                r["detail"]["reason"].as_str().expect("reason").to_owned(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_configure_turns_pending_jobs_of_refused_senders_and_rooms_into_skips_and_never_replays_final_jobs()
 {
    let bot = Bot::start().await;
    let (alice, alice_room) = bot.contact("alice").await;
    let (bob, bob_room) = bot.contact("bob").await;
    let runtime = bot
        .runtime(
            "gate",
            "now",
            json!({"concurrency": 8, "maxCallsPerHour": 100}),
        )
        .await;
    // One answered under the open policy, then four wait as pending jobs.
    let answered = bot.ask(&alice, &alice_room, "answered first").await;
    let first = bot.claim(&runtime, 1).await.ok();
    assert_eq!(ids(&first), vec![answered.clone()]);
    bot.finish(&runtime, &first["jobs"][0]).await;
    let from_alice = bot.ask(&alice, &alice_room, "alice waits").await;
    let from_bob = bot.ask(&bob, &bob_room, "bob waits").await;
    let pending = bot.inspect(&runtime).await;
    assert_eq!(pending["jobs"]["pending"], 0, "not scanned yet: {pending}");

    // Only bob may be answered: alice's pending job becomes a skip at claim.
    let bob_number = bob.number.clone();
    bot.configure(
        &runtime,
        json!({"concurrency": 8, "allowedSenders": [bob_number]}),
    )
    .await;
    let claim = bot.claim(&runtime, 8).await.ok();
    assert_eq!(ids(&claim), vec![from_bob.clone()]);
    bot.finish(&runtime, &claim["jobs"][0]).await;
    assert_eq!(
        skip_reasons(&bot.log(&runtime, None).await),
        vec![(from_alice.clone(), "sender_not_allowed".to_owned())]
    );

    // Only alice's room: a new question from bob is skipped for the room.
    let late_bob = bot.ask(&bob, &bob_room, "bob again").await;
    let late_alice = bot.ask(&alice, &alice_room, "alice again").await;
    bot.configure(
        &runtime,
        json!({"concurrency": 8, "allowedRooms": [alice_room]}),
    )
    .await;
    let claim = bot.claim(&runtime, 8).await.ok();
    assert_eq!(ids(&claim), vec![late_alice.clone()]);
    bot.finish(&runtime, &claim["jobs"][0]).await;
    let skips: HashSet<(String, String)> = skip_reasons(&bot.log(&runtime, None).await)
        .into_iter()
        .collect();
    assert!(
        skips.contains(&(late_bob.clone(), "room_not_allowed".to_owned())),
        "{skips:?}"
    );

    // Back to the open policy: nothing handled or skipped comes back.
    bot.configure(&runtime, json!({"concurrency": 8})).await;
    let claim = bot.claim(&runtime, 8).await.ok();
    assert!(ids(&claim).is_empty(), "replayed: {claim}");
    let view = bot.inspect(&runtime).await;
    assert_eq!(view["jobs"]["handled"], 3, "{view}");
    assert_eq!(view["jobs"]["skipped"], 2, "{view}");
    assert_eq!(view["jobs"]["pending"], 0, "{view}");
    assert_eq!(view["version"], 4, "{view}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_log_page_holds_at_most_a_hundred_records_newest_first() {
    let bot = Bot::start().await;
    let (stranger, room) = bot.contact("stranger").await;
    let (friend, _) = bot.contact("friend").await;
    let runtime = bot
        .runtime("chatty", "now", json!({"allowedSenders": [friend.number]}))
        .await;
    for i in 0..120 {
        bot.ask(&stranger, &room, &format!("spam {i}")).await;
    }
    // One claim skips every one of them (121 records with the registration).
    let mut claims = 0;
    while bot.claim(&runtime, 1).await.ok()["morePending"] == true {
        claims += 1;
        assert!(claims < 10, "the skips never ended");
    }
    for limit in [None, Some(100), Some(101), Some(5000)] {
        let page = bot.log(&runtime, limit).await;
        assert_eq!(page.len(), 100, "limit {limit:?}");
        let record_ids: Vec<i64> = page.iter().map(|r| r["id"].as_i64().expect("id")).collect();
        assert!(record_ids.windows(2).all(|w| w[0] > w[1]), "newest first");
    }
    assert_eq!(bot.log(&runtime, Some(7)).await.len(), 7);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_log_page_is_never_short_because_of_records_from_a_room_the_agent_left() {
    let bot = Bot::start().await;
    let (asker, direct) = bot.contact("asker").await;
    let (friend, _) = bot.contact("friend").await;
    bot.server.befriend(&asker, &friend).await;
    let group = bot
        .server
        .create_room(&asker, "group", json!([friend.number, bot.agent.number]))
        .await
        .ok()["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let runtime = bot
        .runtime(
            "leaver",
            "now",
            json!({"concurrency": 8, "maxCallsPerHour": 100}),
        )
        .await;
    // Older records in the direct room, newer ones in the group.
    for room in [&direct, &group] {
        for i in 0..4 {
            bot.ask(&asker, room, &format!("question {i}")).await;
        }
        let claim = bot.claim(&runtime, 8).await.ok();
        for job in claim["jobs"].as_array().expect("jobs") {
            bot.finish(&runtime, job).await;
        }
    }
    bot.server
        .post(
            &format!("/v1/rooms/{group}/leave"),
            &bot.agent.token,
            json!({}),
        )
        .await
        .ok();
    // The newest eight records are the group's: a page of five still holds
    // five records, all of rooms the agent can read.
    let page = bot.log(&runtime, Some(5)).await;
    assert_eq!(page.len(), 5, "{page:?}");
    assert!(
        page.iter().all(|r| r["conversationId"] != group.as_str()),
        "{page:?}"
    );
    assert!(page.iter().any(|r| r["conversationId"] == direct.as_str()));
}
