//! A block reaches group rooms: nobody puts two identities that blocked one
//! another in a room together, and a runtime skips the messages of a sender
//! its agent blocked (`sender_blocked`). (A block racing a first accept is
//! relayger-store's `races_tests`: it holds the accept at a pause point.)

use crate::common;

use common::TestServer;
use common::bot::Bot;
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn nobody_puts_two_who_blocked_each_other_in_a_room_together() {
    let (server, [alice, bob, carol]) =
        TestServer::with_users([("alice", "person"), ("bob", "person"), ("carol", "person")]).await;
    server.befriend(&carol, &alice).await;
    server.befriend(&carol, &bob).await;
    // Either direction counts: bob blocks alice.
    server.block(&bob, &alice).await.ok();
    // The rooms each of the three is in, as their room lists show them.
    let rooms = async || {
        let mut ids = Vec::new();
        for user in [&alice, &bob, &carol] {
            let list = server.get("/v1/rooms?limit=100", &user.token).await.ok();
            ids.extend(
                list["rooms"]
                    .as_array()
                    .expect("rooms")
                    .iter()
                    .map(|room| room["id"].as_str().expect("id").to_owned()),
            );
        }
        ids.sort();
        ids
    };
    let rooms_before = rooms().await;

    // Carol, a contact of both, cannot create a group holding the two.
    server
        .create_room(&carol, "both", json!([alice.number, bob.number]))
        .await
        .err(403, "forbidden");
    assert_eq!(rooms().await, rooms_before, "no half-made room");

    // Nor add one to a group that holds the other.
    let room = server
        .create_room(&carol, "with alice", json!([alice.number]))
        .await
        .ok()["id"]
        .as_str()
        .expect("room id")
        .to_owned();
    server
        .add_member(&carol, &room, &bob)
        .await
        .err(403, "forbidden");
    let members = server
        .get(&format!("/v1/rooms/{room}"), &carol.token)
        .await
        .ok()["members"]
        .as_array()
        .expect("members")
        .len();
    assert_eq!(members, 2, "carol and alice only");

    // After an unblock they may share a room again.
    server
        .delete(&format!("/v1/contacts/{}/block", alice.number), &bob.token)
        .await
        .ok();
    server.add_member(&carol, &room, &bob).await.ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_runtime_skips_the_questions_of_a_sender_its_agent_blocked_in_a_shared_group() {
    let bot = Bot::start().await;
    let (carol, _) = bot.contact("carol").await;
    let (bob, _) = bot.contact("bob").await;
    bot.server.befriend(&carol, &bob).await;
    let group = bot
        .server
        .create_room(&carol, "team", json!([bot.agent.number, bob.number]))
        .await
        .ok()["id"]
        .as_str()
        .expect("room id")
        .to_owned();
    let runtime = bot.runtime("team-bot", "now", json!({})).await;

    // The agent blocks bob; the three still share the group.
    bot.server.block(&bot.agent, &bob).await.ok();
    let from_bob = bot.ask(&bob, &group, "bob asks").await;
    let from_carol = bot.ask(&carol, &group, "carol asks").await;

    let claim = bot.claim(&runtime, 8).await.ok();
    let granted: Vec<&str> = claim["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .map(|job| job["message"]["messageId"].as_str().expect("message id"))
        .collect();
    assert_eq!(granted, [from_carol.as_str()], "{claim}");
    let log = bot.log(&runtime, None).await;
    assert!(
        log.iter().any(|r| r["messageId"] == from_bob.as_str()
            && r["kind"] == "skipped"
            && r["detail"]["reason"] == "sender_blocked"),
        "{log:?}"
    );
}
