//! Sealed messages through the real server: it stores ciphertext it cannot
//! read, checks the recipient set, and only members' keys open it.

use crate::common;

use base64::Engine as _;
use common::TestServer;
use relayger_core::sealed::{KeyPair, OpenError, SealBinding, SealedContent, open, seal};
use relayger_core::wire::{MessageEnvelope, SealedPayload};
use serde_json::json;
use uuid::Uuid;

const PLAINTEXT: &str = "the vault code is 4711";

fn uuid(text: &str) -> Uuid {
    text.parse().expect("uuid")
}

/// `text` sealed by Alice in `room` for Bob (and herself), `ask` as given,
/// under a new message id.
fn seal_to_bob(
    room: &str,
    (alice, alice_keys): (&common::User, &KeyPair),
    bob: &common::User,
    bob_keys: &KeyPair,
    ask: bool,
    text: &str,
) -> (SealBinding, SealedContent, SealedPayload) {
    let binding = SealBinding {
        room_id: uuid(room),
        message_id: Uuid::now_v7(),
        sender_id: uuid(&alice.id),
        ask,
        deadline: None,
        reply_to: None,
    };
    let content = SealedContent::Text { text: text.into() };
    let payload = seal(
        &content,
        &binding,
        alice_keys,
        &[(uuid(&bob.id), bob_keys.public_key())],
    )
    .expect("seal");
    (binding, content, payload)
}

/// An agent registered with a fresh key pair.
async fn keyed(server: &TestServer, name: &str) -> (common::User, KeyPair) {
    let keys = KeyPair::generate().expect("key");
    let user = server
        .register_with_key(name, "agent", &keys.public_base64())
        .await;
    (user, keys)
}

#[tokio::test(flavor = "multi_thread")]
async fn only_members_open_what_the_server_stores_as_ciphertext() {
    let server = TestServer::start().await;
    let (alice, alice_keys) = keyed(&server, "alice").await;
    let (bob, bob_keys) = keyed(&server, "bob").await;
    let (carol, carol_keys) = keyed(&server, "carol").await;
    let room = server.befriend(&alice, &bob).await;

    // Sent as a question, so `ask` is sealed as true.
    let (binding, content, payload) = seal_to_bob(
        &room,
        (&alice, &alice_keys),
        &bob,
        &bob_keys,
        true,
        PLAINTEXT,
    );

    // A payload that leaves out a member is refused: everyone in the room
    // must be able to read what is said there.
    let mut partial = payload.clone();
    partial
        .recipients
        .retain(|r| r.identity_id != uuid(&alice.id));
    server
        .try_send(
            &alice,
            json!({"roomId": room, "messageId": binding.message_id, "sealed": partial}),
        )
        .await
        .err(400, "invalid_argument");

    let sent = server
        .send(&alice, json!({"roomId": room, "messageId": binding.message_id, "sealed": payload, "ask": true}))
        .await;
    assert_eq!(sent["messageId"], binding.message_id.to_string());
    assert!(sent["text"].is_null());

    // The stored row holds no plaintext (nor its base64).
    use diesel::sql_types::Text;
    use diesel_async::RunQueryDsl;
    #[derive(diesel::QueryableByName)]
    struct Row {
        #[diesel(sql_type = Text)]
        sealed: String,
    }
    let mut conn = server.raw_connection().await;
    let stored: Row = diesel::sql_query("SELECT sealed::text AS sealed FROM messages")
        .get_result(&mut conn)
        .await
        .expect("row");
    assert!(!stored.sealed.contains(PLAINTEXT));
    assert!(!stored.sealed.contains("vault"));
    assert!(
        !stored
            .sealed
            .contains(&base64::engine::general_purpose::STANDARD.encode(PLAINTEXT))
    );

    // Bob reads the envelope and opens it, authenticating Alice as the sender.
    let envelope: MessageEnvelope = serde_json::from_value(
        server
            .get(
                &format!("/v1/rooms/{room}/messages/{}", binding.message_id),
                &bob.token,
            )
            .await
            .ok(),
    )
    .expect("envelope");
    let received: SealedPayload = envelope.sealed.clone().expect("sealed");
    assert_eq!(SealBinding::of_envelope(&envelope), binding);
    let opened = open(
        &received,
        &binding,
        &alice_keys.public_key(),
        uuid(&bob.id),
        &bob_keys,
    )
    .expect("bob opens");
    assert_eq!(opened, content);
    // Alice reads her own copy.
    open(
        &received,
        &binding,
        &alice_keys.public_key(),
        uuid(&alice.id),
        &alice_keys,
    )
    .expect("alice opens");
    // A key that is not the sender's does not authenticate.
    assert!(matches!(
        open(
            &received,
            &binding,
            &carol_keys.public_key(),
            uuid(&bob.id),
            &bob_keys
        ),
        Err(OpenError::CannotOpen)
    ));

    // Carol is not in the room: the server will not give it to her, and the
    // payload is useless to her anyway.
    server
        .get(
            &format!("/v1/rooms/{room}/messages/{}", binding.message_id),
            &carol.token,
        )
        .await
        .err(404, "not_found");
    assert!(matches!(
        open(
            &received,
            &binding,
            &alice_keys.public_key(),
            uuid(&carol.id),
            &carol_keys
        ),
        Err(OpenError::NotARecipient)
    ));

    // One flipped byte: reported as "cannot open", no panic.
    let mut tampered = received.clone();
    let recipient = tampered
        .recipients
        .iter_mut()
        .find(|r| r.identity_id == uuid(&bob.id))
        .expect("bob's copy");
    let mut bytes = base64::engine::general_purpose::STANDARD
        .decode(&recipient.ciphertext)
        .expect("b64");
    bytes[0] ^= 0x01;
    recipient.ciphertext = base64::engine::general_purpose::STANDARD.encode(bytes);
    assert!(matches!(
        open(
            &tampered,
            &binding,
            &alice_keys.public_key(),
            uuid(&bob.id),
            &bob_keys
        ),
        Err(OpenError::CannotOpen)
    ));
}

/// What the server (here: a statement written straight to its database)
/// does to a sealed note's envelope after it was sent: turning it into a
/// question, giving it a deadline or moving it into another message's
/// thread. Each makes the note unopenable for every reader (`cannot_open`),
/// and putting the envelope back makes it open again.
#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_rewrites_ask_deadline_or_reply_to_makes_the_note_unopenable() {
    use diesel_async::RunQueryDsl;

    let server = TestServer::start().await;
    let (alice, alice_keys) = keyed(&server, "alice").await;
    let (bob, bob_keys) = keyed(&server, "bob").await;
    let room = server.befriend(&alice, &bob).await;
    let other = server
        .send(&alice, json!({"roomId": room, "text": "another thread"}))
        .await;
    let other_id = uuid(other["messageId"].as_str().expect("id"));

    let (binding, content, payload) = seal_to_bob(
        &room,
        (&alice, &alice_keys),
        &bob,
        &bob_keys,
        false,
        "just a note",
    );
    assert_eq!(payload.version, 2);
    server
        .send(
            &alice,
            json!({"roomId": room, "messageId": binding.message_id, "sealed": payload}),
        )
        .await;

    let mut conn = server.raw_connection().await;
    let readers = [
        (uuid(&bob.id), &bob_keys, &bob.token),
        (uuid(&alice.id), &alice_keys, &alice.token),
    ];
    let path = format!("/v1/rooms/{room}/messages/{}", binding.message_id);
    let rewrites = [
        (
            "ask",
            "UPDATE messages SET ask = true WHERE id = $1".to_owned(),
        ),
        (
            "deadline",
            "UPDATE messages SET ask = true, deadline = now() + interval '1 day' WHERE id = $1"
                .to_owned(),
        ),
        (
            "replyTo",
            format!("UPDATE messages SET reply_to = '{other_id}' WHERE id = $1"),
        ),
    ];
    let restore = "UPDATE messages SET ask = false, deadline = NULL, reply_to = NULL WHERE id = $1";
    for (what, rewrite) in &rewrites {
        diesel::sql_query(rewrite.as_str())
            .bind::<diesel::sql_types::Uuid, _>(binding.message_id)
            .execute(&mut conn)
            .await
            .expect("rewrite");
        for (id, keys, token) in &readers {
            let envelope: MessageEnvelope =
                serde_json::from_value(server.get(&path, token).await.ok()).expect("envelope");
            assert_ne!(
                SealBinding::of_envelope(&envelope),
                binding,
                "{what} changed"
            );
            assert_eq!(
                open(
                    envelope.sealed.as_ref().expect("sealed"),
                    &SealBinding::of_envelope(&envelope),
                    &alice_keys.public_key(),
                    *id,
                    keys,
                ),
                Err(OpenError::CannotOpen),
                "{what} rewritten, read by {id}"
            );
        }
        diesel::sql_query(restore)
            .bind::<diesel::sql_types::Uuid, _>(binding.message_id)
            .execute(&mut conn)
            .await
            .expect("restore");
        let envelope: MessageEnvelope =
            serde_json::from_value(server.get(&path, &bob.token).await.ok()).expect("envelope");
        assert_eq!(
            open(
                envelope.sealed.as_ref().expect("sealed"),
                &SealBinding::of_envelope(&envelope),
                &alice_keys.public_key(),
                uuid(&bob.id),
                &bob_keys,
            ),
            Ok(content.clone()),
            "restored after {what}"
        );
    }
}
