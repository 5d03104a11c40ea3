//! Sealed messages through the real binaries: the recipient opens what the
//! sender sealed, the server stores no plaintext, and whoever cannot open a
//! message sees it marked with the reason, never dropped.

use crate::cli_support;

use cli_support::{Befriended, CliTest, Party, text};
use diesel::sql_types::{BigInt, Text};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use serde_json::Value;

#[derive(diesel::QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

#[tokio::test(flavor = "multi_thread")]
async fn sealed_messages_open_for_their_recipients_only() {
    let t = CliTest::start("cli-sealed").await;
    let Befriended {
        sender_id: alice_id,
        sender_number: alice_n,
        receiver_id: bob_id,
        receiver_number: bob_n,
        room: direct,
    } = t.register_pair(Party::person("alice", "Alice"), Party::agent("bob", "Bob"));
    let carol_n = t.register_number(Party::agent("carol", "Carol"));
    t.befriend(("alice", &alice_n), ("carol", &carol_n));

    // Sent to a number: sealed for the direct room's members.
    let sent = t.json(&[
        "--profile",
        "alice",
        "send",
        &bob_n,
        "the secret plan",
        "--sealed",
        "--ask",
    ]);
    assert_eq!(sent["conversationId"], direct.as_str(), "{sent}");
    assert_eq!(sent["seq"], 1);
    assert!(
        sent["text"].is_null(),
        "no plaintext in the envelope: {sent}"
    );
    let message_id = text(&sent["messageId"]);
    assert_eq!(
        message_id.as_bytes()[14],
        b'7',
        "client-chosen UUID v7: {message_id}"
    );
    let recipients: Vec<&str> = sent["sealed"]["recipients"]
        .as_array()
        .expect("recipients")
        .iter()
        .map(|r| r["identityId"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(recipients.len(), 2, "{sent}");
    assert!(recipients.contains(&alice_id.as_str()) && recipients.contains(&bob_id.as_str()));

    // The server keeps ciphertext only.
    let mut conn = AsyncPgConnection::establish(t.database_url())
        .await
        .expect("connect");
    let plain: Count = diesel::sql_query(
        "SELECT count(*) AS n FROM messages WHERE text IS NOT NULL OR sealed::text LIKE $1",
    )
    .bind::<Text, _>("%secret plan%")
    .get_result(&mut conn)
    .await
    .expect("select");
    assert_eq!(plain.n, 0);

    // Recipient and sender open it; the authenticated sender is Alice.
    for profile in ["bob", "alice"] {
        let message = t.json(&["--profile", profile, "message", &direct, &message_id]);
        assert_eq!(message["opened"]["text"], "the secret plan", "{message}");
        assert!(message.get("openError").is_none(), "{message}");
        assert_eq!(message["sender"]["number"], alice_n.as_str());
        let thread = t.json(&["--profile", profile, "thread", &direct, &message_id]);
        assert_eq!(
            thread["messages"][0]["opened"]["text"], "the secret plan",
            "{thread}"
        );
    }
    let inbox = t.json(&["--profile", "bob", "inbox"]);
    let opened = inbox["rooms"]
        .as_array()
        .expect("rooms")
        .iter()
        .flat_map(|r| r["messages"].as_array().cloned().unwrap_or_default())
        .find(|m| m["messageId"] == message_id.as_str())
        .expect("in bob's inbox");
    assert_eq!(opened["opened"]["text"], "the secret plan", "{inbox}");
    let human = t.run(&["--profile", "bob", "message", &direct, &message_id]);
    assert!(
        human.stdout.contains("[sealed] the secret plan"),
        "{}",
        human.stdout
    );

    // A third identity is no member of the direct room: no access at all.
    let code = t.error_code(&["--profile", "carol", "message", &direct, &message_id]);
    assert!(code == "not_found" || code == "forbidden", "{code}");

    // In a group, a member who joins later sees the message, marked as one
    // it cannot open; later messages are sealed for it too.
    let group = t.json(&[
        "--profile",
        "alice",
        "rooms",
        "create",
        "--name",
        "plans",
        "--member",
        &bob_n,
    ]);
    let group = text(&group["id"]);
    let early = t.json(&[
        "--profile",
        "alice",
        "send",
        "--room",
        &group,
        "before carol",
        "--sealed",
    ]);
    let early_id = text(&early["messageId"]);
    t.json(&["--profile", "alice", "rooms", "add", &group, &carol_n]);
    let unreadable = t.json(&["--profile", "carol", "message", &group, &early_id]);
    assert!(unreadable.get("opened").is_none(), "{unreadable}");
    assert_eq!(unreadable["openError"], "not_a_recipient", "{unreadable}");
    let compact = t.run(&[
        "--profile",
        "carol",
        "--compact",
        "thread",
        &group,
        &early_id,
    ]);
    let compact: Value = serde_json::from_str(&compact.stdout).expect("compact JSON");
    assert_eq!(
        compact["messages"][0]["openError"], "not_a_recipient",
        "{compact}"
    );
    let human = t.run(&["--profile", "carol", "message", &group, &early_id]);
    assert!(
        human
            .stdout
            .contains("[sealed, cannot open: not_a_recipient]"),
        "{}",
        human.stdout
    );

    let reply = t.json(&[
        "--profile",
        "bob",
        "send",
        "--room",
        &group,
        "welcome carol",
        "--sealed",
        "--reply-to",
        &early_id,
    ]);
    assert_eq!(
        reply["sealed"]["recipients"].as_array().map(Vec::len),
        Some(3)
    );
    let reply_id = text(&reply["messageId"]);
    let thread = t.json(&["--profile", "carol", "thread", &group, &early_id]);
    let messages = thread["messages"].as_array().expect("messages");
    assert_eq!(messages.len(), 2, "{thread}");
    assert_eq!(messages[0]["openError"], "not_a_recipient");
    assert_eq!(messages[1]["messageId"], reply_id.as_str());
    assert_eq!(messages[1]["opened"]["text"], "welcome carol", "{thread}");
    assert_eq!(messages[1]["sender"]["number"], bob_n.as_str());
}
