//! Contacts, sending and reading over real HTTP against real PostgreSQL.

use crate::common;

use std::collections::BTreeSet;

use common::{TestServer, User};
use serde_json::json;

/// A send from `from` to `to` reusing the message id `id` with other text
/// is refused as a conflict.
async fn changed_retry_conflicts(server: &TestServer, from: &User, to: &User, id: &str) {
    server
        .try_send(
            from,
            json!({"to": to.number, "messageId": id, "text": "different"}),
        )
        .await
        .err(409, "conflict");
}

#[tokio::test(flavor = "multi_thread")]
async fn two_agents_become_contacts_and_messages_get_seq_1_2_3() {
    let (server, [alice, bob]) =
        TestServer::with_users([("alice", "agent"), ("bob", "agent")]).await;

    // Alice asks; Bob sees one pending request (also in the header) and accepts.
    server.ask_contact(&alice, &bob).await.ok();
    let requests = server.get("/v1/contacts/requests", &bob.token).await;
    assert_eq!(requests.headers["relayger-contact-requests"], "1");
    let requests = requests.ok();
    assert_eq!(requests["count"], 1);
    assert_eq!(requests["incoming"][0]["number"], alice.number.as_str());
    let contact = server.answer_contact(&bob, &alice, "accept").await.ok();
    let room = contact["roomId"].as_str().expect("room").to_owned();
    assert_eq!(
        server.get("/v1/contacts/requests", &bob.token).await.ok()["count"],
        0
    );

    let mut ids = Vec::new();
    for (i, text) in [
        "hello from relayger",
        "report uploaded",
        "What is the status?",
    ]
    .iter()
    .enumerate()
    {
        let sent = server
            .send(
                &alice,
                json!({"to": bob.number, "text": text, "ask": i != 1}),
            )
            .await;
        assert_eq!(sent["seq"], i as i64 + 1);
        assert_eq!(sent["conversationId"], room.as_str());
        assert_eq!(sent["sender"]["number"], alice.number.as_str());
        assert!(sent["createdAt"].as_str().expect("time").ends_with('Z'));
        ids.push(sent["messageId"].as_str().expect("id").to_owned());
    }
    for reader in [&alice, &bob] {
        let read = async |path: String| server.get(&path, &reader.token).await.ok();
        let message = read(format!("/v1/rooms/{room}/messages/{}", ids[0])).await;
        assert_eq!(message["text"], "hello from relayger");
        assert_eq!(message["ask"], true);
        assert_eq!(message["byRuntime"], false);
        let thread = read(format!("/v1/rooms/{room}/messages/{}/thread", ids[1])).await;
        assert_eq!(thread["messages"][0]["text"], "report uploaded");
        assert_eq!(thread["next"], serde_json::Value::Null);
    }

    // The mailbox: Bob has three unacknowledged messages, Alice none of her own.
    let inbox = server.get("/v1/inbox", &bob.token).await.ok();
    assert_eq!(
        inbox["rooms"][0]["messages"]
            .as_array()
            .expect("messages")
            .len(),
        3
    );
    assert!(
        server.get("/v1/inbox", &alice.token).await.ok()["rooms"]
            .as_array()
            .expect("rooms")
            .is_empty()
    );
    let acked = server
        .post(
            &format!("/v1/rooms/{room}/ack"),
            &bob.token,
            json!({"seq": 2}),
        )
        .await
        .ok();
    assert_eq!(acked["ackedSeq"], 2);
    let inbox = server.get("/v1/inbox", &bob.token).await.ok();
    assert_eq!(
        inbox["rooms"][0]["messages"]
            .as_array()
            .expect("messages")
            .len(),
        1
    );
    // The cursor never moves backwards, and cannot pass the last seq.
    assert_eq!(
        server
            .post(
                &format!("/v1/rooms/{room}/ack"),
                &bob.token,
                json!({"seq": 1})
            )
            .await
            .ok()["ackedSeq"],
        2
    );
    server
        .post(
            &format!("/v1/rooms/{room}/ack"),
            &bob.token,
            json!({"seq": 4}),
        )
        .await
        .err(400, "invalid_argument");
}

#[tokio::test(flavor = "multi_thread")]
async fn fifty_concurrent_senders_get_gapless_unique_seqs() {
    let (server, [host]) = TestServer::with_users([("host", "person")]).await;
    let mut members = Vec::new();
    for i in 0..49 {
        let member = server.register(&format!("member {i}"), "agent").await;
        server.befriend(&host, &member).await;
        members.push(member);
    }
    let numbers: Vec<&str> = members.iter().map(|m| m.number.as_str()).collect();
    let room = server
        .create_room(&host, "crowd", json!(numbers))
        .await
        .ok();
    assert_eq!(room["members"].as_array().expect("members").len(), 50);
    let room_id = room["id"].as_str().expect("id").to_owned();

    let server = std::sync::Arc::new(server);
    let mut senders = Vec::new();
    for sender in members.iter().cloned().chain([host.clone()]) {
        let server = server.clone();
        let room_id = room_id.clone();
        senders.push(tokio::spawn(async move {
            server
                .send(
                    &sender,
                    json!({"roomId": room_id, "text": format!("from {}", sender.number)}),
                )
                .await["seq"]
                .as_i64()
                .expect("seq")
        }));
    }
    let mut seqs = BTreeSet::new();
    for sender in senders {
        assert!(seqs.insert(sender.await.expect("task")), "duplicate seq");
    }
    assert_eq!(
        seqs,
        (1..=50).collect::<BTreeSet<i64>>(),
        "exactly 1..=50, no gaps"
    );
    let room = server
        .get(&format!("/v1/rooms/{room_id}"), &host.token)
        .await
        .ok();
    assert_eq!(room["lastSeq"], 50);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_retried_send_with_the_same_message_id_is_stored_once() {
    let server = TestServer::start().await;
    let (alice, bob, _) = server
        .befriended_pair(("alice", "agent"), ("bob", "agent"))
        .await;
    let id = uuid::Uuid::now_v7().to_string();
    let body = json!({"to": bob.number, "messageId": id, "text": "once"});
    let first = server
        .post("/v1/messages", &alice.token, body.clone())
        .await;
    assert_eq!(first.status.as_u16(), 201);
    let again = server.post("/v1/messages", &alice.token, body).await;
    assert_eq!(
        again.status.as_u16(),
        200,
        "an identical retry returns the stored message"
    );
    assert_eq!(again.body["seq"], first.body["seq"]);
    changed_retry_conflicts(&server, &alice, &bob, &id).await;
    // The pair's room, the only one, holds the one message.
    let room = first.body["conversationId"].as_str().expect("room");
    assert_eq!(server.last_seq(&alice, room).await, 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn contact_lifecycle_decline_withdraw_block_remove() {
    let (server, [alice, bob]) =
        TestServer::with_users([("alice", "person"), ("bob", "person")]).await;

    // Decline, then withdraw.
    server.ask_contact(&alice, &bob).await.ok();
    let declined = server.answer_contact(&bob, &alice, "decline").await.ok();
    assert_eq!(declined["state"], "declined");
    server.ask_contact(&alice, &bob).await.ok();
    let withdrawn = server
        .delete(
            &format!("/v1/contacts/requests/{}", bob.number),
            &alice.token,
        )
        .await
        .ok();
    assert_eq!(withdrawn["state"], "withdrawn");
    server
        .answer_contact(&bob, &alice, "accept")
        .await
        .err(404, "not_found");

    // Accept, talk, block: both lose the room.
    let room = server.befriend(&alice, &bob).await;
    server
        .send(&alice, json!({"roomId": room, "text": "hi"}))
        .await;
    server.block(&bob, &alice).await.ok();
    for user in [&alice, &bob] {
        server
            .get(&format!("/v1/rooms/{room}"), &user.token)
            .await
            .err(404, "not_found");
        assert!(
            server.get("/v1/contacts", &user.token).await.ok()["contacts"]
                .as_array()
                .expect("list")
                .is_empty()
        );
    }
    server
        .try_send(&alice, json!({"to": bob.number, "text": "still there?"}))
        .await
        .err(404, "not_found");
    server.ask_contact(&alice, &bob).await.err(403, "forbidden");

    // Unblock and accept again: the same direct room reopens with its history.
    server
        .delete(&format!("/v1/contacts/{}/block", alice.number), &bob.token)
        .await
        .ok();
    let reopened = server.befriend(&alice, &bob).await;
    assert_eq!(reopened, room);
    assert_eq!(
        server
            .get(&format!("/v1/rooms/{room}"), &bob.token)
            .await
            .ok()["lastSeq"],
        1
    );

    // Remove ends access again.
    server
        .delete(&format!("/v1/contacts/{}", bob.number), &alice.token)
        .await
        .ok();
    server
        .get(&format!("/v1/rooms/{room}"), &bob.token)
        .await
        .err(404, "not_found");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_owner_answers_requests_for_its_agent() {
    let (server, [owner, stranger]) =
        TestServer::with_users([("owner", "person"), ("stranger", "person")]).await;
    let agent = server.create_agent(&owner.token, "helper").await;
    assert_eq!(agent.status.as_u16(), 201);
    let agent = agent.ok();
    assert_eq!(agent["identity"]["kind"], "agent");
    assert_eq!(agent["identity"]["ownerNumber"], owner.number.as_str());
    let agent_number = agent["identity"]["number"]
        .as_str()
        .expect("number")
        .to_owned();

    server
        .post(
            "/v1/contacts/requests",
            &stranger.token,
            json!({"number": agent_number}),
        )
        .await
        .ok();
    let pending = server
        .get(
            &format!("/v1/contacts/requests?as={agent_number}"),
            &owner.token,
        )
        .await
        .ok();
    assert_eq!(pending["count"], 1);
    // Someone else's agent cannot be answered for.
    server
        .post(
            &format!("/v1/contacts/requests/{}/accept", stranger.number),
            &stranger.token,
            json!({"as": agent_number}),
        )
        .await
        .err(403, "forbidden");
    let contact = server
        .post(
            &format!("/v1/contacts/requests/{}/accept", stranger.number),
            &owner.token,
            json!({"as": agent_number}),
        )
        .await
        .ok();
    assert_eq!(contact["number"], stranger.number.as_str());
    let agent_token = agent["token"]["secret"].as_str().expect("token");
    let contacts = server.get("/v1/contacts", agent_token).await.ok();
    assert_eq!(contacts["contacts"][0]["number"], stranger.number.as_str());
    // An agent cannot create agents.
    server
        .create_agent(agent_token, "x")
        .await
        .err(403, "forbidden");
}

#[tokio::test(flavor = "multi_thread")]
async fn group_rooms_take_only_contacts_and_members_can_leave() {
    let (server, [host, friend, stranger]) = TestServer::with_users([
        ("host", "person"),
        ("friend", "agent"),
        ("stranger", "agent"),
    ])
    .await;
    server.befriend(&host, &friend).await;
    server
        .create_room(&host, "team", json!([stranger.number]))
        .await
        .err(403, "forbidden");
    let room = server
        .create_room(&host, "team", json!([friend.number]))
        .await
        .ok();
    let room_id = room["id"].as_str().expect("id");
    assert_eq!(room["kind"], "group");
    server
        .send(&friend, json!({"roomId": room_id, "text": "hello team"}))
        .await;
    server
        .post(
            &format!("/v1/rooms/{room_id}/leave"),
            &friend.token,
            json!({}),
        )
        .await
        .ok();
    server
        .try_send(&friend, json!({"roomId": room_id, "text": "gone"}))
        .await
        .err(404, "not_found");
    server.add_member(&host, room_id, &friend).await.ok();
    server
        .send(&friend, json!({"roomId": room_id, "text": "back"}))
        .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn retried_and_refused_sends_leave_no_seq_gap() {
    let (server, [alice, bob, carol]) =
        TestServer::with_users([("alice", "agent"), ("bob", "agent"), ("carol", "agent")]).await;
    server.befriend(&alice, &bob).await;
    let id = uuid::Uuid::now_v7().to_string();
    let body = json!({"to": bob.number, "messageId": id, "text": "once"});
    // The same message id sent eight times at once: one is stored.
    let sends = (0..8).map(|_| server.post("/v1/messages", &alice.token, body.clone()));
    let replies = futures_util::future::join_all(sends).await;
    let created = replies.iter().filter(|r| r.status.as_u16() == 201).count();
    assert_eq!(created, 1, "one creates it");
    for reply in &replies {
        assert!(matches!(reply.status.as_u16(), 200 | 201), "{}", reply.body);
        assert_eq!(reply.body["messageId"], id.as_str());
        assert_eq!(reply.body["seq"], 1);
    }
    let room = replies[0].body["conversationId"]
        .as_str()
        .expect("room")
        .to_owned();
    // Refused sends into the room write nothing either.
    changed_retry_conflicts(&server, &alice, &bob, &id).await;
    server
        .try_send(&carol, json!({"roomId": room, "text": "not a member"}))
        .await
        .err(404, "not_found");
    server
        .try_send(
            &alice,
            json!({"roomId": room, "text": "reply", "replyTo": uuid::Uuid::now_v7()}),
        )
        .await
        .err(404, "not_found");
    let next = server
        .send(&alice, json!({"roomId": room, "text": "next"}))
        .await;
    assert_eq!(next["seq"], 2, "the next message follows without a gap");
    // The pair's room, the only one, holds the two messages.
    assert_eq!(server.last_seq(&alice, &room).await, 2);
}
