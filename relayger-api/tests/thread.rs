//! Threads: only the root and its reply chain, paged by seq, packed into a
//! byte budget that covers the whole HTTP body.

use crate::common;

use std::collections::BTreeSet;

use common::{TestServer, User};
use serde_json::{Value, json};

async fn setup() -> (TestServer, User, User, String) {
    let server = TestServer::start().await;
    let (alice, bob, room) = server
        .befriended_pair(("alice", "agent"), ("bob", "agent"))
        .await;
    (server, alice, bob, room)
}

fn id(message: &Value) -> String {
    message["messageId"].as_str().expect("id").to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_thread_is_its_root_and_reply_chain_only_and_pages_exactly_once() {
    let (server, alice, bob, room) = setup().await;
    // Topic A: a root with a branching chain; topic B interleaved in the room.
    let root = server
        .send(
            &alice,
            json!({"roomId": room, "text": "A: root", "ask": true}),
        )
        .await;
    let other = server
        .send(&bob, json!({"roomId": room, "text": "B: another topic"}))
        .await;
    let mut expected = vec![id(&root)];
    let mut parent = id(&root);
    for i in 0..12 {
        let from = if i % 2 == 0 { &bob } else { &alice };
        let reply = server
            .send(
                from,
                json!({"roomId": room, "text": format!("A: reply {i}"), "replyTo": parent}),
            )
            .await;
        expected.push(id(&reply));
        // A reply on topic B between every reply on topic A.
        server
            .send(
                &bob,
                json!({"roomId": room, "text": format!("B: reply {i}"), "replyTo": id(&other)}),
            )
            .await;
        if i != 5 {
            parent = id(&reply);
        }
    }

    // Asking from any message of topic A gives the whole of topic A.
    let last = expected.last().expect("last").clone();
    for start in [&expected[0], &expected[6], &last] {
        let page = server
            .get(
                &format!("/v1/rooms/{room}/messages/{start}/thread?limit=100"),
                &alice.token,
            )
            .await
            .ok();
        let ids: Vec<String> = page["messages"]
            .as_array()
            .expect("list")
            .iter()
            .map(id)
            .collect();
        assert_eq!(
            ids, expected,
            "root + reply chain in seq order, no other topic"
        );
        assert_eq!(page["next"], Value::Null);
    }

    // Paging with --after returns every message exactly once.
    let mut seen = Vec::new();
    let mut after = 0;
    loop {
        let page = server
            .get(
                &format!("/v1/rooms/{room}/messages/{last}/thread?after={after}&limit=5"),
                &bob.token,
            )
            .await
            .ok();
        let messages = page["messages"].as_array().expect("list");
        assert!(messages.len() <= 5);
        seen.extend(messages.iter().map(id));
        match page["next"].as_i64() {
            Some(next) => {
                assert_eq!(
                    next,
                    messages.last().expect("last")["seq"].as_i64().expect("seq")
                );
                after = next;
            }
            None => break,
        }
    }
    assert_eq!(seen, expected);
    assert_eq!(seen.iter().collect::<BTreeSet<_>>().len(), seen.len());
}

#[tokio::test(flavor = "multi_thread")]
async fn the_byte_budget_holds_for_every_budget_from_512_to_65536() {
    let (server, alice, bob, room) = setup().await;
    let root = server
        .send(&alice, json!({"roomId": room, "text": "root"}))
        .await;
    let mut parent = id(&root);
    // Envelopes of very different sizes, multi-byte text and characters that
    // JSON must escape included.
    for i in 0..40usize {
        let size = (i * 37) % 300 + 1;
        let text: String = "é\"\\ž\n".chars().cycle().take(size).collect();
        let reply = server
            .send(
                &bob,
                json!({"roomId": room, "text": text, "replyTo": parent}),
            )
            .await;
        parent = id(&reply);
    }
    let mut budgets: Vec<usize> = (512..=65_536).step_by(509).collect();
    budgets.extend([512, 513, 600, 1000, 4096, 8191, 8192, 8193, 65_535, 65_536]);
    for max_bytes in budgets {
        let (status, body) = server
            .get_raw(
                &format!("/v1/rooms/{room}/messages/{parent}/thread?maxBytes={max_bytes}"),
                &alice.token,
            )
            .await;
        assert_eq!(status.as_u16(), 200, "{max_bytes}: {body}");
        assert!(
            body.len() <= max_bytes,
            "{} bytes for a budget of {max_bytes}",
            body.len()
        );
        let page: Value = serde_json::from_str(&body).expect("valid JSON");
        assert!(!page["messages"].as_array().expect("list").is_empty());
    }
    // Without maxBytes the default budget of 8192 applies.
    let (_, body) = server
        .get_raw(
            &format!("/v1/rooms/{room}/messages/{parent}/thread"),
            &alice.token,
        )
        .await;
    assert!(body.len() <= 8192);
}

#[tokio::test(flavor = "multi_thread")]
async fn one_oversized_message_is_413_context_item_too_large() {
    let (server, alice, _bob, room) = setup().await;
    let big = server
        .send(&alice, json!({"roomId": room, "text": "x".repeat(2000)}))
        .await;
    let reply = server
        .get(
            &format!("/v1/rooms/{room}/messages/{}/thread?maxBytes=512", id(&big)),
            &alice.token,
        )
        .await;
    reply.err(413, "context_item_too_large");
    // The single-message endpoint has no byte filter.
    let whole = server
        .get(
            &format!("/v1/rooms/{room}/messages/{}", id(&big)),
            &alice.token,
        )
        .await
        .ok();
    assert_eq!(whole["text"].as_str().expect("text").len(), 2000);
}

#[tokio::test(flavor = "multi_thread")]
async fn out_of_range_budgets_and_limits_are_400() {
    let (server, alice, _bob, room) = setup().await;
    let root = id(&server
        .send(&alice, json!({"roomId": room, "text": "root"}))
        .await);
    for query in [
        "maxBytes=511",
        "maxBytes=65537",
        "limit=0",
        "limit=101",
        "after=-1",
        "maxBytes=abc",
        "bogus=1",
    ] {
        server
            .get(
                &format!("/v1/rooms/{room}/messages/{root}/thread?{query}"),
                &alice.token,
            )
            .await
            .err(400, "invalid_argument");
    }
}
