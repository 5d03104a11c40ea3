//! A sealed note is bound to its envelope: a server that rewrites what it
//! stores (here: statements written straight to its database) turns the
//! note unopenable for every reader, and putting the envelope back opens
//! it again.

use relayger_core::sealed::{KeyPair, OpenError, SealBinding, SealedContent, open, seal};
use relayger_core::wire::IdentityKind;
use relayger_store::{MessageBody, NewMessage, Store};
use relayger_testdb::TestDatabase;
use uuid::Uuid;

use crate::support::{User, befriend, execute, register_with_key, send};

/// An agent registered with a fresh key pair.
async fn keyed(store: &Store, name: &str) -> (User, KeyPair) {
    let keys = KeyPair::generate().expect("key");
    let user = register_with_key(store, name, IdentityKind::Agent, keys.public_key()).await;
    (user, keys)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_rewrites_ask_deadline_or_reply_to_makes_the_note_unopenable() {
    let db = TestDatabase::create().await;
    let store = db.store().await;
    let (alice, alice_keys) = keyed(&store, "alice").await;
    let (bob, bob_keys) = keyed(&store, "bob").await;
    let room = befriend(&store, &alice, &bob).await;
    let other_id = send(&store, &alice, room, "another thread", false)
        .await
        .message_id;

    // A note sealed by Alice for Bob (and herself).
    let binding = SealBinding {
        room_id: room,
        message_id: Uuid::now_v7(),
        sender_id: alice.id(),
        ask: false,
        deadline: None,
        reply_to: None,
    };
    let content = SealedContent::Text {
        text: "just a note".into(),
    };
    let payload = seal(
        &content,
        &binding,
        &alice_keys,
        &[(bob.id(), bob_keys.public_key())],
    )
    .expect("seal");
    assert_eq!(payload.version, 2);
    let note = NewMessage {
        to: None,
        room_id: Some(room),
        message_id: Some(binding.message_id),
        body: MessageBody::Sealed(payload),
        ask: false,
        deadline: None,
        reply_to: None,
    };
    store
        .send_message(&alice.caller(), note, |_, _| Ok(()))
        .await
        .expect("send the note");

    let mut conn = crate::support::connect(&db).await;
    let readers = [(&bob, &bob_keys), (&alice, &alice_keys)];
    let id = binding.message_id;
    let rewrites = [
        (
            "ask",
            format!("UPDATE messages SET ask = true WHERE id = '{id}'"),
        ),
        (
            "deadline",
            format!(
                "UPDATE messages SET ask = true, deadline = now() + interval '1 day' WHERE id = '{id}'"
            ),
        ),
        (
            "replyTo",
            format!("UPDATE messages SET reply_to = '{other_id}' WHERE id = '{id}'"),
        ),
    ];
    let restore = format!(
        "UPDATE messages SET ask = false, deadline = NULL, reply_to = NULL WHERE id = '{id}'"
    );
    for (what, rewrite) in &rewrites {
        execute(&mut conn, rewrite).await;
        for (reader, keys) in &readers {
            let envelope = store
                .message(&reader.caller(), room, id)
                .await
                .expect("envelope");
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
                    reader.id(),
                    keys,
                ),
                Err(OpenError::CannotOpen),
                "{what} rewritten, read by {}",
                reader.id()
            );
        }
        execute(&mut conn, &restore).await;
        let envelope = store
            .message(&bob.caller(), room, id)
            .await
            .expect("envelope");
        assert_eq!(
            open(
                envelope.sealed.as_ref().expect("sealed"),
                &SealBinding::of_envelope(&envelope),
                &alice_keys.public_key(),
                bob.id(),
                &bob_keys,
            ),
            Ok(content.clone()),
            "restored after {what}"
        );
    }
}
