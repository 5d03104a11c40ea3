//! A thread is read in pages cut in SQL: the store loads no more of a long
//! thread than one page can hold, plus one.

use relayger_core::thread_budget::MAX_THREAD_MAX_BYTES;
use relayger_core::wire::IdentityKind;
use relayger_store::{MessageBody, NewMessage};
use relayger_testdb::TestDatabase;
use uuid::Uuid;

use crate::support::{befriend, register};

const PER_ROOM: usize = 100;
/// 8 KiB of text: 100 of them are far past one page.
const TEXT_BYTES: usize = 8 * 1024;

#[tokio::test(flavor = "multi_thread")]
async fn a_thread_of_a_hundred_large_messages_loads_one_page_and_one_more() {
    let db = TestDatabase::create().await;
    let store = db.store().await;
    let reader = register(&store, "reader", IdentityKind::Person).await;
    let writer = register(&store, "writer", IdentityKind::Person).await;
    befriend(&store, &writer, &reader).await;
    let room = store
        .create_room(&writer.caller(), "room".to_owned(), vec![reader.number()])
        .await
        .expect("the group")
        .id;
    // 100 messages, each a reply to the one before: one thread.
    let mut last: Option<Uuid> = None;
    for _ in 0..PER_ROOM {
        let message = NewMessage {
            to: None,
            room_id: Some(room),
            message_id: None,
            body: MessageBody::Text("x".repeat(TEXT_BYTES)),
            ask: false,
            deadline: None,
            reply_to: last,
        };
        let (sent, _) = store
            .send_message(&writer.caller(), message, |_, _| Ok(()))
            .await
            .expect("send");
        last = Some(sent.message_id);
    }
    let last_id = last.expect("a message");

    // What one page can hold: 7 envelopes of a bit over 8 KiB in 64 KiB.
    let fits = MAX_THREAD_MAX_BYTES / (TEXT_BYTES + 300);
    let loaded = store
        .thread(
            &reader.caller(),
            room,
            last_id,
            0,
            PER_ROOM,
            MAX_THREAD_MAX_BYTES,
        )
        .await
        .expect("thread");
    assert_eq!(
        loaded.len(),
        fits + 1,
        "the store loads what fits and one more (of {PER_ROOM})"
    );
}
