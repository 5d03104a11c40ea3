//! Responses stay bounded whatever the data: an inbox of 50 rooms holding
//! 100 large messages each comes in pages of at most the page budget, and
//! following `next` (and acknowledging) reaches every message exactly once.

mod common;

use std::collections::HashSet;

use common::TestServer;
use relayger_core::inbox_budget::{DEFAULT_MESSAGES, MAX_BYTES, MAX_MESSAGES, MAX_PER_ROOM};
use serde_json::{Value, json};

const ROOMS: usize = 50;
const PER_ROOM: usize = 100;
/// 8 KiB of text: 50 × 100 of them are 40 MiB, far past one page.
const TEXT_BYTES: usize = 8 * 1024;

#[tokio::test(flavor = "multi_thread")]
async fn fifty_rooms_of_a_hundred_large_messages_come_in_bounded_pages() {
    let server = TestServer::start().await;
    let reader = server.register("reader", "person").await;
    let writer = server.register("writer", "person").await;
    server.befriend(&writer, &reader).await;
    for i in 0..ROOMS {
        server
            .post(
                "/v1/rooms",
                &writer.token,
                json!({"name": format!("room {i}"), "members": [reader.number]}),
            )
            .await
            .ok();
    }
    // 100 messages in every group room, written in SQL for speed (each with
    // its seq, the room's last_seq moved to match).
    server
        .execute(&format!(
            "INSERT INTO messages (id, room_id, seq, sender_id, text, ask, by_runtime, created_at) \
             SELECT gen_random_uuid(), r.id, s, r.created_by, repeat('x', {TEXT_BYTES}), false, false, now() \
             FROM rooms r CROSS JOIN generate_series(1, {PER_ROOM}) s WHERE r.kind = 'group'"
        ))
        .await;
    server
        .execute(&format!(
            "UPDATE rooms SET last_seq = {PER_ROOM} WHERE kind = 'group'"
        ))
        .await;

    // A bad limit is refused.
    for bad in ["0", "501", "x"] {
        server
            .get(&format!("/v1/inbox?limit={bad}"), &reader.token)
            .await
            .err(400, "invalid_argument");
    }

    // Walk the inbox: pages by `next`, acknowledging what each page showed.
    let mut seen: HashSet<String> = HashSet::new();
    let mut pages = 0;
    loop {
        let mut after: Option<String> = None;
        let mut any = false;
        loop {
            let path = match &after {
                Some(room) => format!("/v1/inbox?after={room}"),
                None => "/v1/inbox".to_owned(),
            };
            let (status, body) = server.get_raw(&path, &reader.token).await;
            assert!(status.is_success(), "{status}: {body}");
            // The page's whole body stays near the content budget.
            assert!(
                body.len() <= MAX_BYTES + 256 * 1024,
                "a page of {} bytes",
                body.len()
            );
            let page: Value = serde_json::from_str(&body).expect("JSON");
            pages += 1;
            let rooms = page["rooms"].as_array().expect("rooms");
            let count: usize = rooms
                .iter()
                .map(|r| r["messages"].as_array().expect("messages").len())
                .sum();
            assert!(count <= DEFAULT_MESSAGES as usize, "{count} messages");
            for room in rooms {
                let messages = room["messages"].as_array().expect("messages");
                assert!(messages.len() <= MAX_PER_ROOM as usize);
                for message in messages {
                    assert!(
                        seen.insert(message["messageId"].as_str().expect("id").to_owned()),
                        "a message came twice: {}",
                        message["messageId"]
                    );
                }
                if let Some(last) = messages.last() {
                    any = true;
                    server
                        .post(
                            &format!("/v1/rooms/{}/ack", room["roomId"].as_str().expect("room")),
                            &reader.token,
                            json!({"seq": last["seq"]}),
                        )
                        .await
                        .ok();
                }
            }
            match page["next"].as_str() {
                Some(next) => after = Some(next.to_owned()),
                None => break,
            }
            assert!(pages < 1000, "the walk does not end");
        }
        if !any {
            break;
        }
    }
    assert_eq!(seen.len(), ROOMS * PER_ROOM, "every message exactly once");
    // Bytes, not the count, bounded each page: ~127 of these fit 1 MiB.
    assert!(
        pages >= ROOMS * PER_ROOM * TEXT_BYTES / MAX_BYTES,
        "{pages} pages"
    );

    // The most a caller may ask for is still bounded by bytes.
    let big = server
        .get(&format!("/v1/inbox?limit={MAX_MESSAGES}"), &reader.token)
        .await
        .ok();
    assert!(big["rooms"].as_array().expect("rooms").is_empty(), "{big}");
}
