//! No answer tells whether a message id exists in a room the caller cannot
//! see: a message id is unique within its room, so a send reusing an id of
//! another room answers exactly like a fresh id (text or sealed), while a
//! retry in the same room stays idempotent and leaves no seq gap; replies
//! and reads naming a message of another room answer like a message that
//! does not exist. A runtime in both rooms gets a job for each message.

use crate::common;

use common::{TestServer, User};
use relayger_core::sealed::{KeyPair, SealBinding, SealedContent, seal};
use serde_json::{Value, json};
use uuid::Uuid;

fn uuid(text: &str) -> Uuid {
    text.parse().expect("uuid")
}

/// The answer without what differs between any two messages.
fn shape(mut envelope: Value) -> Value {
    for field in ["messageId", "createdAt", "text"] {
        envelope[field] = Value::Null;
    }
    envelope
}

#[tokio::test(flavor = "multi_thread")]
async fn a_message_id_used_in_an_unseen_room_answers_like_a_fresh_one() {
    let server = TestServer::start().await;
    let keys: Vec<KeyPair> = (0..4).map(|_| KeyPair::generate().expect("key")).collect();
    let mut users: Vec<User> = Vec::new();
    for (name, key) in ["alice", "bob", "carol", "dave"].iter().zip(&keys) {
        users.push(
            server
                .register_with_key(name, "person", &key.public_base64())
                .await,
        );
    }
    let (alice, bob, carol, dave) = (&users[0], &users[1], &users[2], &users[3]);
    let seen = server.befriend(alice, bob).await;
    let unseen_by_carol = seen;
    let room = server.befriend(carol, dave).await;

    // Alice's messages in a room Carol is not in.
    let taken = Uuid::now_v7();
    server
        .send(
            alice,
            json!({"roomId": unseen_by_carol, "messageId": taken, "text": "private"}),
        )
        .await;
    let taken_parent = server
        .send(
            alice,
            json!({"roomId": unseen_by_carol, "text": "a parent"}),
        )
        .await["messageId"]
        .as_str()
        .expect("id")
        .to_owned();

    // Carol sends with the taken id and with a fresh one: the same answer.
    let reused = server
        .try_send(
            carol,
            json!({"roomId": room, "messageId": taken, "text": "mine"}),
        )
        .await;
    assert_eq!(reused.status.as_u16(), 201, "{}", reused.body);
    let reused = reused.body;
    assert_eq!(reused["messageId"], taken.to_string());
    assert_eq!(reused["seq"], 1);
    let fresh = server
        .try_send(
            carol,
            json!({"roomId": room, "messageId": Uuid::now_v7(), "text": "mine"}),
        )
        .await;
    assert_eq!(fresh.status.as_u16(), 201, "{}", fresh.body);
    let mut expected = shape(reused.clone());
    expected["seq"] = json!(2);
    assert_eq!(shape(fresh.body), expected);

    // A retry in the same room is idempotent (200, the stored message) and
    // takes no seq: the next send is 3.
    let retry = server
        .try_send(
            carol,
            json!({"roomId": room, "messageId": taken, "text": "mine"}),
        )
        .await;
    assert_eq!(retry.status.as_u16(), 200, "{}", retry.body);
    assert_eq!(retry.body, reused);
    // A different message under an id used in this room is a conflict
    // (the room is Carol's own, so this tells her nothing new).
    server
        .try_send(
            carol,
            json!({"roomId": room, "messageId": taken, "text": "other"}),
        )
        .await
        .err(409, "conflict");

    // Sealed (the locked path): an id taken elsewhere seals and sends like a
    // fresh one, and an identical retry answers 200 without a new seq.
    let sealed_send = |message_id: Uuid| {
        let binding = SealBinding {
            room_id: uuid(&room),
            message_id,
            sender_id: uuid(&carol.id),
            ask: false,
            deadline: None,
            reply_to: None,
        };
        let payload = seal(
            &SealedContent::Text {
                text: "sealed".into(),
            },
            &binding,
            &keys[2],
            &[(uuid(&dave.id), keys[3].public_key())],
        )
        .expect("seal");
        json!({"roomId": room, "messageId": message_id, "sealed": payload})
    };
    let taken_sealed = server
        .send(
            alice,
            json!({"roomId": unseen_by_carol, "text": "another private one"}),
        )
        .await["messageId"]
        .as_str()
        .map(uuid)
        .expect("id");
    let body = sealed_send(taken_sealed);
    let sealed = server
        .post("/v1/messages", &carol.token, body.clone())
        .await;
    assert_eq!(sealed.status.as_u16(), 201, "{}", sealed.body);
    assert_eq!(sealed.body["seq"], 3);
    let again = server.post("/v1/messages", &carol.token, body).await;
    assert_eq!(again.status.as_u16(), 200, "{}", again.body);
    assert_eq!(again.body, sealed.body);
    let fresh_sealed = server
        .post("/v1/messages", &carol.token, sealed_send(Uuid::now_v7()))
        .await;
    assert_eq!(fresh_sealed.status.as_u16(), 201, "{}", fresh_sealed.body);
    assert_eq!(fresh_sealed.body["seq"], 4, "no seq gap");

    // Alice's messages are untouched: hers in her room, Carol's in Carol's.
    let hers = server
        .get(
            &format!("/v1/rooms/{unseen_by_carol}/messages/{taken}"),
            &alice.token,
        )
        .await
        .ok();
    assert_eq!(hers["text"], "private");
    let carols = server
        .get(&format!("/v1/rooms/{room}/messages/{taken}"), &dave.token)
        .await
        .ok();
    assert_eq!(carols["text"], "mine");

    // A reply to a message of another room, or a read of one through her
    // own room, answers exactly like a message that does not exist.
    let nowhere = Uuid::now_v7();
    let reply = |parent: String| json!({"roomId": room, "text": "re", "replyTo": parent});
    let to_taken = server
        .post("/v1/messages", &carol.token, reply(taken_parent.clone()))
        .await;
    let to_nothing = server
        .post("/v1/messages", &carol.token, reply(nowhere.to_string()))
        .await;
    to_taken.err(404, "not_found");
    assert_eq!(
        to_taken.body.to_string().replace(&taken_parent, "ID"),
        to_nothing
            .body
            .to_string()
            .replace(&nowhere.to_string(), "ID")
    );
    for path in ["", "/thread"] {
        // (a parent Carol may not see, one that does not exist): the same
        // answer, in her room and in the room she is not in (as a room
        // that does not exist).
        let pairs = [
            (
                format!("/v1/rooms/{room}/messages/{taken_parent}{path}"),
                format!("/v1/rooms/{room}/messages/{nowhere}{path}"),
            ),
            (
                format!("/v1/rooms/{unseen_by_carol}/messages/{taken_parent}{path}"),
                format!("/v1/rooms/{nowhere}/messages/{nowhere}{path}"),
            ),
        ];
        for (hidden, missing) in pairs {
            let hidden = server.get(&hidden, &carol.token).await;
            let missing = server.get(&missing, &carol.token).await;
            hidden.err(404, "not_found");
            assert_eq!(hidden.body, missing.body, "{path}");
        }
    }
    // Nothing of the refused replies was written: Carol's room is at 4.
    let last_seq = server.last_seq(carol, &room).await;
    assert_eq!(last_seq, 4);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_runtime_in_two_rooms_gets_a_job_for_each_message_of_one_id() {
    let (server, [agent, alice, carol]) =
        TestServer::with_users([("agent", "agent"), ("alice", "person"), ("carol", "person")])
            .await;
    let alice_room = server.befriend(&alice, &agent).await;
    let carol_room = server.befriend(&carol, &agent).await;
    let runtime = server
        .post(
            "/v1/runtimes",
            &agent.token,
            json!({"name": "both", "from": "beginning"}),
        )
        .await
        .ok()["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let id = Uuid::now_v7();
    for (user, room) in [(&alice, &alice_room), (&carol, &carol_room)] {
        let sent = server
            .try_send(
                user,
                json!({"roomId": room, "messageId": id, "text": "a question?", "ask": true}),
            )
            .await;
        assert_eq!(sent.status.as_u16(), 201, "{}", sent.body);
    }
    // Concurrency 1 (the default): claim, answer, claim again.
    let mut jobs: Vec<Value> = Vec::new();
    for _ in 0..2 {
        let claimed = server.claim_jobs(&agent.token, &runtime, 1).await.ok();
        let job = claimed["jobs"][0].clone();
        assert_eq!(job["message"]["messageId"], id.to_string(), "{claimed}");
        let finished = server
            .finish_job(&agent.token, &runtime, &job, json!({"reply": "answered"}))
            .await
            .ok();
        assert!(finished.is_object(), "{finished}");
        jobs.push(job);
    }
    let idle = server.claim_jobs(&agent.token, &runtime, 1).await.ok();
    assert!(idle["jobs"].as_array().expect("jobs").is_empty(), "{idle}");
    let mut rooms: Vec<&str> = jobs
        .iter()
        .map(|j| j["message"]["conversationId"].as_str().expect("room"))
        .collect();
    rooms.sort();
    let mut expected = vec![alice_room.as_str(), carol_room.as_str()];
    expected.sort();
    assert_eq!(rooms, expected);
    assert_ne!(jobs[0]["jobKey"], jobs[1]["jobKey"]);
    // Each asker got its own answer, in its own room.
    for (asker, room) in [(&alice, &alice_room), (&carol, &carol_room)] {
        let thread = server
            .get(
                &format!("/v1/rooms/{room}/messages/{id}/thread"),
                &asker.token,
            )
            .await
            .ok();
        let replies = thread["messages"]
            .as_array()
            .expect("messages")
            .iter()
            .filter(|m| m["replyTo"] == id.to_string())
            .count();
        assert_eq!(replies, 1, "{room}: {thread}");
    }
}
