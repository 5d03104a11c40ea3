//! Responses stay bounded whatever the data: with 50 rooms holding 100
//! large messages each (every room one long thread), the inbox, the room
//! list and a thread come in pages of at most their budget, and following
//! `next` reaches everything exactly once (that the store loads no more of a
//! thread than one page can hold is relayger-store's `thread` test).
//! Contacts, contact requests and tokens are paged the same way, and a
//! sealed payload's sizes are refused before anything is read.

use crate::common;

use std::collections::HashSet;

use common::{TestServer, User};
use relayger_api::ApiConfig;
use relayger_core::inbox_budget::{DEFAULT_MESSAGES, MAX_BYTES, MAX_MESSAGES, MAX_PER_ROOM};
use relayger_core::paging;
use relayger_core::thread_budget::MAX_THREAD_MAX_BYTES;
use relayger_core::wire::MAX_ROOM_MEMBERS;
use serde_json::{Value, json};
use uuid::Uuid;

const ROOMS: usize = 50;
const PER_ROOM: usize = 100;
/// 8 KiB of text: 50 × 100 of them are 40 MiB, far past one page.
const TEXT_BYTES: usize = 8 * 1024;

/// A server without rate limits: the tests below make thousands of
/// messages, hundreds of identities and tokens through the API.
async fn unlimited_server() -> TestServer {
    TestServer::start_config(ApiConfig {
        token_rate: None,
        address_rate: None,
        ..ApiConfig::default()
    })
    .await
}

/// `PER_ROOM` messages of `TEXT_BYTES` sent to `room` by `writer`, each a
/// reply to the one before: the room is one thread. The last one's id.
async fn one_long_thread(server: &TestServer, writer: &User, room: &str) -> String {
    let text = "x".repeat(TEXT_BYTES);
    let mut last: Option<String> = None;
    for _ in 0..PER_ROOM {
        let mut body = json!({"roomId": room, "text": text});
        if let Some(previous) = &last {
            body["replyTo"] = json!(previous);
        }
        let sent = server.send(writer, body).await;
        last = Some(sent["messageId"].as_str().expect("id").to_owned());
    }
    last.expect("a message")
}

#[tokio::test(flavor = "multi_thread")]
async fn fifty_rooms_of_a_hundred_large_messages_come_in_bounded_pages() {
    let server = unlimited_server().await;
    let [reader, writer] = server
        .register_all([("reader", "person"), ("writer", "person")])
        .await;
    server.befriend(&writer, &reader).await;
    let mut groups = Vec::with_capacity(ROOMS);
    for i in 0..ROOMS {
        let created = server
            .create_room(&writer, &format!("room {i}"), json!([reader.number]))
            .await
            .ok();
        groups.push(created["id"].as_str().expect("id").to_owned());
    }
    // 100 messages in every group room, each a reply to the one before:
    // every room is one thread of 100 messages (the rooms written at once).
    let last_ids = futures_util::future::join_all(
        groups
            .iter()
            .map(|room| one_long_thread(&server, &writer, room)),
    )
    .await;

    rooms_come_in_bounded_pages(&server, &reader).await;
    threads_come_in_bounded_pages(&server, &reader, &groups[0], &last_ids[0]).await;

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

/// A thread of 100 messages of 8 KiB (the group `group`, whose last
/// message is `last_id`): each page fits its byte budget, and following
/// `next` returns the whole thread in seq order.
async fn threads_come_in_bounded_pages(
    server: &TestServer,
    reader: &User,
    group: &str,
    last_id: &str,
) {
    let list = server
        .get(
            &format!("/v1/rooms?limit={}", paging::ROOMS.max),
            &reader.token,
        )
        .await
        .ok();
    let groups = list["rooms"]
        .as_array()
        .expect("rooms")
        .iter()
        .filter(|r| r["kind"] == "group")
        .count();
    assert_eq!(groups, ROOMS);
    // The last message's seq: its thread is the whole room.
    let last = server
        .get(
            &format!("/v1/rooms/{group}/messages/{last_id}"),
            &reader.token,
        )
        .await
        .ok();
    assert_eq!(last["seq"], PER_ROOM, "{last}");

    // What one page can hold: 7 envelopes of a bit over 8 KiB in 64 KiB.
    let fits = MAX_THREAD_MAX_BYTES / (TEXT_BYTES + 300);

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

/// `count` persons registered (on a server without an address rate),
/// named `prefix N`.
async fn many_identities(server: &TestServer, count: usize, prefix: &str) -> Vec<User> {
    let mut registered = Vec::with_capacity(count);
    for n in 1..=count {
        registered.push(server.register(&format!("{prefix} {n}"), "person").await);
    }
    registered
}

/// The items (under `key`) of every page of `path` (which ends in `?` or
/// a query), following `next` from the first page.
async fn every_page(server: &TestServer, path: &str, user: &User, key: &str) -> Vec<Vec<Value>> {
    let mut pages = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page_path = match &after {
            Some(after) => format!("{path}&after={after}"),
            None => path.to_owned(),
        };
        let page = server.get(&page_path, &user.token).await.ok();
        pages.push(page[key].as_array().expect("items").clone());
        match page["next"].as_str() {
            Some(next) => after = Some(next.to_owned()),
            None => return pages,
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn contacts_come_in_pages() {
    const CONTACTS: usize = 120;
    let server = unlimited_server().await;
    let bot = server.register("bot", "person").await;
    for asker in many_identities(&server, CONTACTS, "stranger").await {
        server.ask_contact(&asker, &bot).await.ok();
        server.answer_contact(&bot, &asker, "accept").await.ok();
    }
    for bad in ["0", "501", "x"] {
        server
            .get(&format!("/v1/contacts?limit={bad}"), &bot.token)
            .await
            .err(400, "invalid_argument");
    }
    let first = server.get("/v1/contacts?limit=5", &bot.token).await.ok();
    assert_eq!(first["contacts"].as_array().expect("contacts").len(), 5);
    assert!(first["next"].is_string(), "{first}");
    let pages = every_page(&server, "/v1/contacts?", &bot, "contacts").await;
    let mut seen: HashSet<String> = HashSet::new();
    for contacts in &pages {
        assert!(contacts.len() <= paging::CONTACTS.default as usize);
        for contact in contacts {
            assert!(seen.insert(contact["number"].as_str().expect("number").to_owned()));
        }
    }
    assert_eq!(seen.len(), CONTACTS);
    assert_eq!(
        pages.len(),
        CONTACTS.div_ceil(paging::CONTACTS.default as usize)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn contact_requests_and_tokens_come_in_pages() {
    const REQUESTS: usize = 230;
    const TOKENS: usize = 240;
    let server = unlimited_server().await;
    let target = server.register("target", "person").await;
    // Incoming requests from many identities, and a few outgoing ones.
    for asker in many_identities(&server, REQUESTS, "asker").await {
        server.ask_contact(&asker, &target).await.ok();
    }
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
    for _ in 0..TOKENS {
        server
            .post("/v1/tokens", &target.token, json!({"scopes": ["read"]}))
            .await
            .ok();
    }
    for bad in ["0", "501", "x"] {
        server
            .get(&format!("/v1/tokens?limit={bad}"), &target.token)
            .await
            .err(400, "invalid_argument");
    }
    let pages = every_page(&server, "/v1/tokens?limit=64", &target, "tokens").await;
    let mut seen: Vec<String> = Vec::new();
    for tokens in &pages {
        assert!(tokens.len() <= 64);
        seen.extend(
            tokens
                .iter()
                .map(|t| t["id"].as_str().expect("id").to_owned()),
        );
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
    // Nothing changed: the room holds no message, and the next one takes
    // the room's first seq.
    let inbox = server.get("/v1/inbox", &b.token).await.ok();
    assert!(
        inbox["rooms"]
            .as_array()
            .expect("rooms")
            .iter()
            .all(|room| room["messages"].as_array().expect("messages").is_empty()),
        "{inbox}"
    );
    let next = server
        .send(&a, json!({"roomId": room, "text": "the first message"}))
        .await;
    assert_eq!(next["seq"], 1, "{next}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_room_holds_at_most_its_member_cap() {
    let server = unlimited_server().await;
    let [owner, friend, late] = server
        .register_all([
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
    // Fill the room to the cap.
    for filler in many_identities(&server, MAX_ROOM_MEMBERS - 2, "filler").await {
        server.befriend(&owner, &filler).await;
        server.add_member(&owner, &room, &filler).await.ok();
    }
    let reply = server.add_member(&owner, &room, &late).await;
    reply.err(409, "conflict");
    let full = server
        .get(&format!("/v1/rooms/{room}"), &owner.token)
        .await
        .ok();
    let members = full["members"].as_array().expect("members").len();
    assert_eq!(members, MAX_ROOM_MEMBERS, "{full}");
}

/// Dead letters come newest first in pages that continue after `next`: a
/// runtime's failures are answered a page at a time however many there are.
#[tokio::test(flavor = "multi_thread")]
async fn dead_letters_come_in_pages() {
    const DEAD: usize = 7;
    let bot = common::bot::Bot::start().await;
    let (asker, room) = bot.contact("asker").await;
    let runtime = bot
        .runtime(
            "failing",
            "now",
            json!({"maxAttempts": 1, "concurrency": 8}),
        )
        .await;
    for n in 0..DEAD {
        bot.ask(&asker, &room, &format!("question {n}")).await;
    }
    let mut jobs = Vec::new();
    while jobs.len() < DEAD {
        let claimed = bot.claim(&runtime, 8).await.ok();
        let granted = claimed["jobs"].as_array().expect("jobs");
        assert!(!granted.is_empty(), "{claimed}");
        jobs.extend(granted.iter().cloned());
    }
    // Failed one after another, so each is newer than the one before.
    let mut failed = Vec::new();
    for job in &jobs {
        let answer = bot
            .server
            .finish_job(&bot.agent.token, &runtime, job, json!({"error": "boom"}))
            .await
            .ok();
        assert_eq!(answer["outcome"], "dead_letter", "{answer}");
        failed.push(job["jobId"].as_str().expect("id").to_owned());
    }
    let path = format!("/v1/runtimes/{runtime}/dead-letters");
    for bad in ["0", "501", "x"] {
        bot.server
            .get(&format!("{path}?limit={bad}"), &bot.agent.token)
            .await
            .err(400, "invalid_argument");
    }
    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    let mut pages = 0;
    loop {
        let url = match &after {
            Some(after) => format!("{path}?limit=3&after={after}"),
            None => format!("{path}?limit=3"),
        };
        let page = bot.server.get(&url, &bot.agent.token).await.ok();
        let jobs = page["jobs"].as_array().expect("jobs");
        assert!(jobs.len() <= 3, "{page}");
        seen.extend(
            jobs.iter()
                .map(|j| j["jobId"].as_str().expect("id").to_owned()),
        );
        pages += 1;
        match page["next"].as_str() {
            Some(next) => {
                assert_eq!(Some(next), seen.last().map(String::as_str), "{page}");
                after = Some(next.to_owned());
            }
            None => break,
        }
    }
    assert_eq!(pages, DEAD.div_ceil(3));
    failed.reverse();
    assert_eq!(seen, failed, "every dead letter once, newest first");
    // Without a limit, one page holds them all and says no more follow.
    let all = bot.server.get(&path, &bot.agent.token).await.ok();
    assert_eq!(all["jobs"].as_array().expect("jobs").len(), DEAD);
    assert!(all.get("next").is_none(), "{all}");
}

/// A room's notes come newest first in pages of at most 20 that continue
/// after `next`, the key of a page's last note.
#[tokio::test(flavor = "multi_thread")]
async fn notes_come_in_pages() {
    const NOTES: usize = 25;
    let bot = common::bot::Bot::start().await;
    let (_asker, room) = bot.contact("asker").await;
    let runtime = bot.runtime("noting", "now", json!({})).await;
    let mut written = Vec::new();
    for n in 0..NOTES {
        let key = format!("note-{n:02}");
        bot.server
            .request(
                reqwest::Method::PUT,
                &format!("/v1/runtimes/{runtime}/notes/{room}/{key}"),
                Some(&bot.agent.token),
                Some(json!({"version": 0, "text": format!("note {n}")})),
            )
            .await
            .ok();
        written.push(key);
    }
    let path = format!("/v1/runtimes/{runtime}/notes/{room}");
    let mut seen = Vec::new();
    let mut url = format!("{path}?limit=10");
    let mut pages = 0;
    loop {
        let page = bot.server.get(&url, &bot.agent.token).await.ok();
        let notes = page["notes"].as_array().expect("notes");
        assert!(notes.len() <= 10, "{page}");
        seen.extend(
            notes
                .iter()
                .map(|n| n["key"].as_str().expect("key").to_owned()),
        );
        pages += 1;
        match page["next"].as_str() {
            Some(next) => {
                assert_eq!(Some(next), seen.last().map(String::as_str), "{page}");
                url = format!("{path}?limit=10&after={next}");
            }
            None => break,
        }
    }
    assert_eq!(pages, NOTES.div_ceil(10));
    written.reverse();
    assert_eq!(seen, written, "every note once, newest first");
    // The default page is the documented 20, and says more follow.
    let first = bot.server.get(&path, &bot.agent.token).await.ok();
    assert_eq!(first["notes"].as_array().expect("notes").len(), 20);
    assert!(first["next"].is_string(), "{first}");
}
