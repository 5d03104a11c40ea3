//! Sealed messages through the real server: it stores ciphertext it cannot
//! read, checks the recipient set, and only members' keys open it. (A server
//! that rewrites a stored envelope is relayger-store's `sealed` test.)

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

    // What the server holds and hands out holds no plaintext (nor its
    // base64): the whole envelope, as a member reads it.
    let (status, stored) = server
        .get_raw(
            &format!("/v1/rooms/{room}/messages/{}", binding.message_id),
            &bob.token,
        )
        .await;
    assert!(status.is_success(), "{status}: {stored}");
    assert!(!stored.contains(PLAINTEXT));
    assert!(!stored.contains("vault"));
    assert!(!stored.contains(&base64::engine::general_purpose::STANDARD.encode(PLAINTEXT)));

    // Its delivery reads like any other question's: states only.
    let delivery = server
        .get(
            &format!("/v1/rooms/{room}/messages/{}/delivery", binding.message_id),
            &alice.token,
        )
        .await
        .ok();
    assert_eq!(delivery["state"], "queued", "{delivery}");
    assert_eq!(delivery["recipients"][0]["number"], bob.number);
    assert_eq!(delivery["recipients"][0]["listeners"], 0);
    assert!(!delivery.to_string().contains(PLAINTEXT));

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
