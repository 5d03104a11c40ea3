//! Sealed messages through the real server: it stores ciphertext it cannot
//! read, checks the recipient set, and only members' keys open it.

mod common;

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

#[tokio::test(flavor = "multi_thread")]
async fn only_members_open_what_the_server_stores_as_ciphertext() {
    let server = TestServer::start().await;
    let (alice_keys, bob_keys, carol_keys) = (
        KeyPair::generate().expect("key"),
        KeyPair::generate().expect("key"),
        KeyPair::generate().expect("key"),
    );
    let alice = server
        .register_with_key("alice", "agent", &alice_keys.public_base64())
        .await;
    let bob = server
        .register_with_key("bob", "agent", &bob_keys.public_base64())
        .await;
    let carol = server
        .register_with_key("carol", "agent", &carol_keys.public_base64())
        .await;
    let room = server.befriend(&alice, &bob).await;

    let binding = SealBinding {
        room_id: uuid(&room),
        message_id: Uuid::now_v7(),
        sender_id: uuid(&alice.id),
    };
    let content = SealedContent::Text {
        text: PLAINTEXT.into(),
    };
    let payload = seal(
        &content,
        &binding,
        &alice_keys,
        &[(uuid(&bob.id), bob_keys.public_key())],
    )
    .expect("seal");

    // A payload that leaves out a member is refused: everyone in the room
    // must be able to read what is said there.
    let mut partial = payload.clone();
    partial
        .recipients
        .retain(|r| r.identity_id != uuid(&alice.id));
    server
        .post(
            "/v1/messages",
            &alice.token,
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
    use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
    #[derive(diesel::QueryableByName)]
    struct Row {
        #[diesel(sql_type = Text)]
        sealed: String,
    }
    let mut conn = AsyncPgConnection::establish(server.db.url())
        .await
        .expect("connect");
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
