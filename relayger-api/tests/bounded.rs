//! Responses stay bounded whatever the data: with 50 rooms holding 100
//! large messages each (every room one long thread), the inbox, the room
//! list and a thread come in pages of at most their budget, the store loads
//! no more of a thread than one page can hold, and following `next` reaches
//! everything exactly once. Contact requests and tokens are paged the same
//! way, and a sealed payload's sizes are refused before anything is read.

use crate::common;

use std::collections::HashSet;

use common::{TestServer, User};
use relayger_core::inbox_budget::{DEFAULT_MESSAGES, MAX_BYTES, MAX_MESSAGES, MAX_PER_ROOM};
use relayger_core::paging;
use relayger_core::thread_budget::MAX_THREAD_MAX_BYTES;
use relayger_core::wire::MAX_ROOM_MEMBERS;
use relayger_store::Caller;
use serde_json::{Value, json};
use uuid::Uuid;

const ROOMS: usize = 50;
const PER_ROOM: usize = 100;
/// 8 KiB of text: 50 × 100 of them are 40 MiB, far past one page.
const TEXT_BYTES: usize = 8 * 1024;

#[tokio::test(flavor = "multi_thread")]
async fn fifty_rooms_of_a_hundred_large_messages_come_in_bounded_pages() {
    let (server, [reader, writer]) =
        TestServer::with_users([("reader", "person"), ("writer", "person")]).await;
    server.befriend(&writer, &reader).await;
    for i in 0..ROOMS {
        server
            .create_room(&writer, &format!("room {i}"), json!([reader.number]))
            .await
            .ok();
    }
    // 100 messages in every group room, written in SQL for speed (each with
    // its seq, the room's last_seq moved to match), each a reply to the one
    // before: every room is one thread of 100 messages.
    server
        .execute(&format!(
            "INSERT INTO messages (id, room_id, seq, sender_id, text, ask, by_runtime, created_at, reply_to) \
             SELECT md5(r.id::text || s)::uuid, r.id, s, r.created_by, repeat('x', {TEXT_BYTES}), false, false, now(), \
                    CASE WHEN s > 1 THEN md5(r.id::text || (s - 1))::uuid END \
             FROM rooms r CROSS JOIN generate_series(1, {PER_ROOM}) s WHERE r.kind = 'group'"
        ))
        .await;
    server
        .execute(&format!(
            "UPDATE rooms SET last_seq = {PER_ROOM} WHERE kind = 'group'"
        ))
        .await;

    rooms_come_in_bounded_pages(&server, &reader).await;
    threads_come_in_bounded_pages(&server, &reader).await;

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

/// The room list: pages of at most the page size (each room with its
/// members), together every room exactly once.
async fn rooms_come_in_bounded_pages(server: &TestServer, reader: &User) {
    for bad in ["0", "101", "x"] {
        server
            .get(&format!("/v1/rooms?limit={bad}"), &reader.token)
            .await
            .err(400, "invalid_argument");
    }
    for limit in [None, Some(7), Some(paging::ROOMS.max)] {
        let mut seen: HashSet<String> = HashSet::new();
        let mut after: Option<String> = None;
        let mut pages = 0;
        loop {
            let query: Vec<String> = limit
                .map(|limit| format!("limit={limit}"))
                .into_iter()
                .chain(after.iter().map(|after| format!("after={after}")))
                .collect();
            let path = format!("/v1/rooms?{}", query.join("&"));
            let (status, body) = server.get_raw(&path, &reader.token).await;
            assert!(status.is_success(), "{status}: {body}");
            let page: Value = serde_json::from_str(&body).expect("JSON");
            pages += 1;
            let rooms = page["rooms"].as_array().expect("rooms");
            let size = limit.unwrap_or(paging::ROOMS.default) as usize;
            assert!(
                rooms.len() <= size,
                "{} rooms in a page of {size}",
                rooms.len()
            );
            // Two members each: about 600 bytes a room, nothing of the content.
            assert!(body.len() <= size * 1024, "a page of {} bytes", body.len());
            for room in rooms {
                assert!(
                    seen.insert(room["id"].as_str().expect("id").to_owned()),
                    "a room came twice"
                );
                assert_eq!(room["members"].as_array().expect("members").len(), 2);
            }
            match page["next"].as_str() {
                Some(next) => {
                    assert_eq!(rooms.len(), size, "only a full page has a next");
                    after = Some(next.to_owned());
                }
                None => break,
            }
        }
        // 50 groups and the direct room.
        assert_eq!(seen.len(), ROOMS + 1, "every room exactly once");
        let size = limit.unwrap_or(paging::ROOMS.default) as usize;
        assert_eq!(pages, (ROOMS + 1).div_ceil(size), "{limit:?}");
    }
}

/// A thread of 100 messages of 8 KiB: each page fits its byte budget, the
/// store loads at most one message more than fits, and following `next`
/// returns the whole thread in seq order.
async fn threads_come_in_bounded_pages(server: &TestServer, reader: &User) {
    let room = server
        .query_n("SELECT count(*) AS n FROM rooms WHERE kind = 'group'")
        .await;
    assert_eq!(room, ROOMS as i64);
    let list = server
        .get(
            &format!("/v1/rooms?limit={}", paging::ROOMS.max),
            &reader.token,
        )
        .await
        .ok();
    let group = list["rooms"]
        .as_array()
        .expect("rooms")
        .iter()
        .find(|r| r["kind"] == "group")
        .expect("a group")["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let room_id: Uuid = group.parse().expect("uuid");
    // The last message: its thread is the whole room.
    let last_id: Uuid = server
        .query_text(&format!(
            "SELECT id::text AS t FROM messages WHERE room_id = '{group}' AND seq = {PER_ROOM}"
        ))
        .await
        .parse()
        .expect("uuid");

    // What one page can hold: 7 envelopes of a bit over 8 KiB in 64 KiB.
    let fits = MAX_THREAD_MAX_BYTES / (TEXT_BYTES + 300);
    let store = server.db.store().await;
    let caller = Caller {
        identity_id: reader.id.parse().expect("uuid"),
        token_id: reader.token_id.parse().expect("uuid"),
        rooms: None,
    };
    let loaded = store
        .thread(&caller, room_id, last_id, 0, 100, MAX_THREAD_MAX_BYTES)
        .await
        .expect("thread");
    assert_eq!(
        loaded.len(),
        fits + 1,
        "the store loads what fits and one more (of {PER_ROOM})"
    );

    let mut seqs = Vec::new();
    let mut after = 0;
    loop {
        let (status, body) = server
            .get_raw(
                &format!(
                    "/v1/rooms/{group}/messages/{last_id}/thread?after={after}&maxBytes={MAX_THREAD_MAX_BYTES}"
                ),
                &reader.token,
            )
            .await;
        assert!(status.is_success(), "{status}: {body}");
        assert!(body.len() <= MAX_THREAD_MAX_BYTES, "{} bytes", body.len());
        let page: Value = serde_json::from_str(&body).expect("JSON");
        let messages = page["messages"].as_array().expect("messages");
        assert_eq!(messages.len().min(fits), messages.len());
        seqs.extend(messages.iter().map(|m| m["seq"].as_i64().expect("seq")));
        match page["next"].as_i64() {
            Some(next) => {
                assert_eq!(messages.len(), fits, "a page is as full as it can be");
                after = next;
            }
            None => break,
        }
    }
    assert_eq!(seqs, (1..=PER_ROOM as i64).collect::<Vec<_>>());

    // A message of a room the reader is not in answers like no message.
    let outsider = server.register("outsider", "person").await;
    let foreign = server
        .get(
            &format!("/v1/rooms/{group}/messages/{last_id}/thread"),
            &outsider.token,
        )
        .await;
    foreign.err(404, "not_found");
}

/// Identities made in SQL (registration is rate-limited per address):
/// `count` persons numbered from `first`, named `prefix N`.
async fn many_identities(server: &TestServer, first: u64, count: u64, prefix: &str) {
    server
        .execute(&format!(
            "INSERT INTO identities (id, number, kind, display_name) \
             SELECT gen_random_uuid(), ({first} + s)::text, 'person', '{prefix} ' || s \
             FROM generate_series(1, {count}) s"
        ))
        .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn contact_requests_and_tokens_come_in_pages() {
    const REQUESTS: usize = 230;
    const TOKENS: usize = 240;
    let (server, [target]) = TestServer::with_users([("target", "person")]).await;
    // Incoming requests from many identities, and a few outgoing ones.
    many_identities(&server, 500_000_000, REQUESTS as u64, "asker").await;
    server
        .execute(&format!(
            "INSERT INTO contact_requests (id, requester_id, target_id, state) \
             SELECT gen_random_uuid(), id, '{}', 'pending' FROM identities WHERE number LIKE '5%'",
            target.id
        ))
        .await;
    for i in 0..3 {
        let other = server.register(&format!("asked {i}"), "person").await;
        server.ask_contact(&target, &other).await.ok();
    }
    for bad in ["0", "501", "x"] {
        server
            .get(&format!("/v1/contacts/requests?limit={bad}"), &target.token)
            .await
            .err(400, "invalid_argument");
    }
    let mut seen: HashSet<String> = HashSet::new();
    let (mut incoming, mut outgoing, mut pages) = (0, 0, 0);
    let mut after: Option<String> = None;
    loop {
        let path = match &after {
            Some(after) => format!("/v1/contacts/requests?after={after}"),
            None => "/v1/contacts/requests".to_owned(),
        };
        let reply = server.get(&path, &target.token).await;
        assert_eq!(
            reply.headers["relayger-contact-requests"],
            REQUESTS.to_string().as_str()
        );
        let page = reply.ok();
        pages += 1;
        // The count is every incoming request, on every page.
        assert_eq!(page["count"], REQUESTS);
        let (i, o) = (
            page["incoming"].as_array().expect("incoming"),
            page["outgoing"].as_array().expect("outgoing"),
        );
        assert!(i.len() + o.len() <= paging::CONTACT_REQUESTS.default as usize);
        incoming += i.len();
        outgoing += o.len();
        for request in i.iter().chain(o) {
            assert!(seen.insert(request["id"].as_str().expect("id").to_owned()));
        }
        match page["next"].as_str() {
            Some(next) => after = Some(next.to_owned()),
            None => break,
        }
    }
    assert_eq!((incoming, outgoing), (REQUESTS, 3));
    assert_eq!(
        pages,
        (REQUESTS + 3).div_ceil(paging::CONTACT_REQUESTS.default as usize)
    );

    // Tokens: the registration's and many more, newest first.
    server
        .execute(&format!(
            "INSERT INTO tokens (id, identity_id, secret_hash, scopes, created_at) \
             SELECT gen_random_uuid(), '{}', sha256(('t' || s)::bytea), ARRAY['read'], now() - s * interval '1 second' \
             FROM generate_series(1, {TOKENS}) s",
            target.id
        ))
        .await;
    for bad in ["0", "501", "x"] {
        server
            .get(&format!("/v1/tokens?limit={bad}"), &target.token)
            .await
            .err(400, "invalid_argument");
    }
    let mut seen: Vec<String> = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let path = match &after {
            Some(after) => format!("/v1/tokens?limit=64&after={after}"),
            None => "/v1/tokens?limit=64".to_owned(),
        };
        let page = server.get(&path, &target.token).await.ok();
        let tokens = page["tokens"].as_array().expect("tokens");
        assert!(tokens.len() <= 64);
        seen.extend(
            tokens
                .iter()
                .map(|t| t["id"].as_str().expect("id").to_owned()),
        );
        match page["next"].as_str() {
            Some(next) => after = Some(next.to_owned()),
            None => break,
        }
    }
    assert_eq!(seen.len(), TOKENS + 1);
    assert_eq!(seen.iter().collect::<HashSet<_>>().len(), TOKENS + 1);
    // Newest first: token ids are time-ordered, so the pages run down.
    let ids: Vec<Uuid> = seen.iter().map(|id| id.parse().expect("uuid")).collect();
    assert!(ids.windows(2).all(|w| w[0] > w[1]), "newest first");
    assert!(seen.contains(&target.token_id));
}

#[tokio::test(flavor = "multi_thread")]
async fn sealed_sizes_are_refused_before_anything_is_read() {
    let server = TestServer::start().await;
    let (a, b, room) = server
        .befriended_pair(("a", "person"), ("b", "person"))
        .await;
    let entry = |id: String, ciphertext: String| json!({"identityId": id, "enc": "A".repeat(43) + "=", "ciphertext": ciphertext});
    let sealed = |recipients: Vec<Value>| {
        json!({
            "roomId": room,
            "messageId": Uuid::now_v7(),
            "sealed": {
                "version": 1,
                "suite": relayger_core::wire::SEALED_SUITE,
                "recipients": recipients,
            },
        })
    };
    // More entries than a room can have members.
    let many: Vec<Value> = (0..=MAX_ROOM_MEMBERS)
        .map(|_| entry(Uuid::now_v7().to_string(), "AAAA".repeat(6)))
        .collect();
    let reply = server.try_send(&a, sealed(many)).await;
    reply.err(400, "invalid_argument");
    assert!(
        reply.body["error"]["message"]
            .as_str()
            .expect("message")
            .contains(&MAX_ROOM_MEMBERS.to_string()),
        "{}",
        reply.body
    );
    // One ciphertext longer than the largest possible.
    let long = "AAAA".repeat(relayger_core::sealed::MAX_CIPHERTEXT_BYTES.div_ceil(3) + 1);
    let reply = server
        .try_send(
            &a,
            sealed(vec![
                entry(a.id.clone(), long),
                entry(b.id.clone(), "AAAA".repeat(6)),
            ]),
        )
        .await;
    reply.err(413, "payload_too_large");
    // A too-long enc.
    let mut bad_enc = entry(a.id.clone(), "AAAA".repeat(6));
    bad_enc["enc"] = json!("A".repeat(200));
    let reply = server
        .try_send(
            &a,
            sealed(vec![bad_enc, entry(b.id.clone(), "AAAA".repeat(6))]),
        )
        .await;
    reply.err(413, "payload_too_large");
    // Nothing changed.
    assert_eq!(server.count("messages").await, 0);
    let last_seq = server.last_seq(&room).await;
    assert_eq!(last_seq, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_room_holds_at_most_its_member_cap() {
    let (server, [owner, friend, late]) = TestServer::with_users([
        ("owner", "person"),
        ("friend", "person"),
        ("late", "person"),
    ])
    .await;
    server.befriend(&owner, &friend).await;
    server.befriend(&owner, &late).await;
    let room = server
        .create_room(&owner, "full", json!([friend.number]))
        .await
        .ok()["id"]
        .as_str()
        .expect("id")
        .to_owned();
    // Fill the room to the cap in SQL.
    let filler = MAX_ROOM_MEMBERS as u64 - 2;
    many_identities(&server, 600_000_000, filler, "filler").await;
    server
        .execute(&format!(
            "INSERT INTO room_members (room_id, identity_id) \
             SELECT '{room}', id FROM identities WHERE number LIKE '6%'"
        ))
        .await;
    let reply = server.add_member(&owner, &room, &late).await;
    reply.err(409, "conflict");
    let members = server
        .query_n(&format!(
            "SELECT count(*) AS n FROM room_members WHERE room_id = '{room}' AND left_at IS NULL"
        ))
        .await;
    assert_eq!(members, MAX_ROOM_MEMBERS as i64);
}
