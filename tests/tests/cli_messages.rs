//! The real `relayger` binary against a real server and PostgreSQL:
//! registration and profiles, contacts, sending to a number, reading with
//! `message` and `thread`, the three output modes, and the mailbox.

use crate::cli_support;

use cli_support::{Befriended, CliTest, text};
use diesel::sql_types::{BigInt, Text};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use serde_json::Value;

#[derive(diesel::QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

#[tokio::test(flavor = "multi_thread")]
async fn two_agents_become_contacts_and_send_to_a_number_in_seq_order() {
    let t = CliTest::start("cli-messages").await;
    let sender = t.register("sender", "Sender", true);
    let receiver = t.register("receiver", "Receiver", true);
    assert_eq!(sender["kind"], "agent");
    let sender_number = text(&sender["number"]);
    let receiver_number = text(&receiver["number"]);

    // One asks, the other sees the request and accepts.
    let request = t.json(&[
        "--profile",
        "sender",
        "contacts",
        "request",
        &receiver_number,
    ]);
    assert_eq!(request["state"], "pending", "{request}");
    assert_eq!(request["direction"], "outgoing", "{request}");
    let requests = t.json(&["--profile", "receiver", "contacts", "requests"]);
    assert_eq!(requests["count"], 1, "{requests}");
    assert_eq!(requests["incoming"][0]["number"], sender_number.as_str());
    let contact = t.json(&[
        "--profile",
        "receiver",
        "contacts",
        "accept",
        &sender_number,
    ]);
    assert_eq!(contact["number"], sender_number.as_str(), "{contact}");
    let room = text(&contact["roomId"]);
    let contacts = t.json(&["--profile", "sender", "contacts", "list"]);
    assert_eq!(contacts["contacts"][0]["number"], receiver_number.as_str());
    assert_eq!(contacts["contacts"][0]["roomId"], room.as_str());

    // Refused locally, before any request: the first message sent below
    // still gets seq 1.
    let refused = t.run(&[
        "--profile",
        "sender",
        "send",
        &receiver_number,
        "What is the status?",
        "--deadline",
        "2099-10-02T12:00:00Z",
    ]);
    assert_eq!(refused.code, Some(1), "{refused:?}");
    assert!(
        refused
            .stderr
            .starts_with("error: invalid_argument: --deadline needs --ask")
    );
    let code = t.error_code(&[
        "--profile",
        "sender",
        "send",
        &receiver_number,
        "What is the status?",
        "--ask",
        "--deadline",
        "2099-10-02T12:00:00+02:00",
    ]);
    assert_eq!(code, "invalid_argument");

    // The seed's commands, in the default output mode and the two JSON ones.
    let first = t.run(&[
        "--profile",
        "sender",
        "send",
        &receiver_number,
        "hello from relayger",
        "--ask",
    ]);
    assert!(first.success(), "{first:?}");
    let line = first.stdout.trim_end();
    assert!(line.starts_with(&format!("sent #1 to {room} (")), "{line}");
    assert_eq!(line.lines().count(), 1, "{line}");
    let first_id = line
        .rsplit_once('(')
        .and_then(|(_, rest)| rest.strip_suffix(')'))
        .expect("message id in parentheses")
        .to_owned();

    let second = t.run(&[
        "--profile",
        "sender",
        "--compact",
        "send",
        &receiver_number,
        "report uploaded",
    ]);
    assert!(second.success(), "{second:?}");
    assert_eq!(
        second.stdout.trim_end().lines().count(),
        1,
        "{}",
        second.stdout
    );
    let second: Value = serde_json::from_str(&second.stdout).expect("compact JSON");
    assert_eq!(second["seq"], 2, "{second}");
    assert_eq!(second["conversationId"], room.as_str());
    assert_eq!(second["text"], "report uploaded");
    assert_eq!(second["ask"], false, "false is kept: {second}");
    for absent in ["deadline", "replyTo", "sealed"] {
        assert!(second.get(absent).is_none(), "{absent}: {second}");
    }

    let third = t.run(&[
        "--profile",
        "sender",
        "--json",
        "send",
        &receiver_number,
        "What is the status?",
        "--ask",
        "--deadline",
        "2099-10-02T12:00:00Z",
        "--reply-to",
        &first_id,
    ]);
    assert!(third.success(), "{third:?}");
    assert!(
        third.stdout.lines().count() > 5,
        "pretty JSON: {}",
        third.stdout
    );
    let third: Value = serde_json::from_str(&third.stdout).expect("JSON");
    assert_eq!(third["seq"], 3, "{third}");
    assert_eq!(third["deadline"], "2099-10-02T12:00:00Z");
    assert_eq!(third["replyTo"], first_id.as_str());
    assert_eq!(third["ask"], true);
    assert_eq!(third["byRuntime"], false);
    assert_eq!(third["sender"]["number"], sender_number.as_str());
    assert_eq!(third["sender"]["id"], sender["id"]);
    assert_eq!(third["sender"]["kind"], "agent");
    assert!(
        third["createdAt"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z')),
        "{third}"
    );
    let third_id = text(&third["messageId"]);

    // Both sides read the message and its thread.
    for profile in ["sender", "receiver"] {
        let message = t.json(&["--profile", profile, "message", &room, &first_id]);
        assert_eq!(message["seq"], 1, "{message}");
        assert_eq!(message["text"], "hello from relayger");
        assert_eq!(message["ask"], true);
        assert_eq!(message["conversationId"], room.as_str());
        assert_eq!(message["messageId"], first_id.as_str());
        assert!(message.get("opened").is_none() && message.get("openError").is_none());

        // Seq 2 is another topic: the thread is the root and its reply.
        let thread = t.json(&["--profile", profile, "thread", &room, &first_id]);
        let seqs: Vec<&Value> = thread["messages"]
            .as_array()
            .expect("messages")
            .iter()
            .map(|m| &m["seq"])
            .collect();
        assert_eq!(seqs, [1, 3], "{thread}");
        assert_eq!(thread["next"], Value::Null, "{thread}");
    }
    let human = t.run(&["--profile", "receiver", "message", &room, &third_id]);
    assert!(human.success(), "{human:?}");
    assert_eq!(
        human.stdout.trim_end(),
        format!(
            "#3 {sender_number} ask deadline 2099-10-02T12:00:00Z reply-to {first_id}: What is the status? ({third_id})"
        )
    );

    // Paging: one message a page, `next` is the last returned seq.
    let page = t.json(&[
        "--profile",
        "receiver",
        "thread",
        &room,
        &first_id,
        "--limit",
        "1",
        "--max-bytes",
        "4096",
    ]);
    assert_eq!(page["messages"].as_array().map(Vec::len), Some(1), "{page}");
    assert_eq!(page["next"], 1, "{page}");
    let rest = t.json(&[
        "--profile",
        "receiver",
        "thread",
        &room,
        &first_id,
        "--after",
        "1",
        "--limit",
        "5",
    ]);
    assert_eq!(rest["messages"][0]["seq"], 3, "{rest}");
    assert_eq!(rest["next"], Value::Null, "{rest}");
    let compact = t.run(&[
        "--profile",
        "receiver",
        "--compact",
        "thread",
        &room,
        &first_id,
        "--after",
        "1",
    ]);
    let compact: Value = serde_json::from_str(&compact.stdout).expect("compact JSON");
    assert!(
        compact.get("next").is_none(),
        "null `next` is dropped: {compact}"
    );
    assert_eq!(compact["messages"][0]["seq"], 3);

    // The room shows the three messages.
    let rooms = t.json(&["--profile", "receiver", "rooms", "list"]);
    assert_eq!(rooms["rooms"][0]["id"], room.as_str(), "{rooms}");
    assert_eq!(rooms["rooms"][0]["lastSeq"], 3, "{rooms}");
    assert_eq!(rooms["rooms"][0]["kind"], "direct", "{rooms}");
}

#[tokio::test(flavor = "multi_thread")]
async fn profiles_are_private_and_the_secret_key_never_reaches_the_server() {
    let t = CliTest::start("cli-profiles").await;
    let alice = t.register("alice", "Alice", false);
    assert_eq!(alice["kind"], "person");

    let path = t.cli.home().join("alice.json");
    let file: Value =
        serde_json::from_slice(&std::fs::read(&path).expect("profile file")).expect("JSON");
    for field in [
        "server",
        "token",
        "tokenId",
        "identityId",
        "number",
        "kind",
        "displayName",
        "publicKey",
        "secretKey",
    ] {
        assert!(
            file.get(field).is_some_and(|v| !v.is_null()),
            "{field}: {file}"
        );
    }
    assert_eq!(file["version"], 1);
    assert_eq!(file["server"], t.url());
    assert_eq!(file["identityId"], alice["id"]);
    assert_eq!(file["number"], alice["number"]);
    assert_eq!(
        file["publicKey"], alice["publicKey"],
        "the server has the public half"
    );
    let secret = text(&file["secretKey"]);
    assert_ne!(Some(secret.as_str()), alice["publicKey"].as_str());
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &std::path::Path| {
            std::fs::metadata(p).expect("metadata").permissions().mode() & 0o777
        };
        assert_eq!(mode(&path), 0o600, "profile file mode");
        assert_eq!(mode(t.cli.home()), 0o700, "profile directory mode");
    }
    let leftovers: Vec<_> = std::fs::read_dir(t.cli.home())
        .expect("list")
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .filter(|name| name != "alice.json")
        .collect();
    assert!(
        leftovers.is_empty(),
        "no temporary files left: {leftovers:?}"
    );

    // The database holds the public key and nothing equal to the secret.
    let mut conn = AsyncPgConnection::establish(t.database_url())
        .await
        .expect("connect");
    let public: Count = diesel::sql_query(
        "SELECT count(*) AS n FROM identities WHERE id::text = $1 AND public_key = decode($2, 'base64')",
    )
    .bind::<Text, _>(text(&alice["id"]))
    .bind::<Text, _>(text(&file["publicKey"]))
    .get_result(&mut conn)
    .await
    .expect("select");
    assert_eq!(public.n, 1);
    let leaked: Count = diesel::sql_query(
        "SELECT count(*) AS n FROM identities WHERE public_key = decode($1, 'base64')",
    )
    .bind::<Text, _>(&secret)
    .get_result(&mut conn)
    .await
    .expect("select");
    assert_eq!(leaked.n, 0);

    // The profile works, and shows up in the list.
    let me = t.json(&["--profile", "alice", "whoami"]);
    assert_eq!(me["number"], alice["number"]);
    let listed = t.json(&["--profile", "alice", "profiles", "list"]);
    assert_eq!(listed["profiles"][0]["name"], "alice", "{listed}");
    assert_eq!(listed["profiles"][0]["current"], true, "{listed}");
    assert!(
        !listed.to_string().contains(&secret),
        "profiles list never prints keys"
    );

    // A profile is never replaced: registering again under its name fails
    // before an identity is created.
    let before: Count = diesel::sql_query("SELECT count(*) AS n FROM identities")
        .get_result(&mut conn)
        .await
        .expect("count");
    let code = t.error_code(&[
        "--profile",
        "alice",
        "register",
        "--server",
        t.url(),
        "--name",
        "Again",
    ]);
    assert_eq!(code, "invalid_argument");
    let after: Count = diesel::sql_query("SELECT count(*) AS n FROM identities")
        .get_result(&mut conn)
        .await
        .expect("count");
    assert_eq!(before.n, after.n);
    let still: Value =
        serde_json::from_slice(&std::fs::read(&path).expect("profile")).expect("JSON");
    assert_eq!(still, file);
}

#[tokio::test(flavor = "multi_thread")]
async fn inbox_lists_unacknowledged_messages_until_ack() {
    let t = CliTest::start("cli-inbox").await;
    let Befriended {
        receiver_number,
        room,
        ..
    } = t.befriended_pair(true);
    for body in ["one", "two", "three"] {
        t.json(&["--profile", "sender", "send", &receiver_number, body]);
    }

    let inbox = t.json(&["--profile", "receiver", "inbox"]);
    let rooms = inbox["rooms"].as_array().expect("rooms");
    let entry = rooms
        .iter()
        .find(|r| r["roomId"] == room.as_str())
        .expect("the direct room");
    assert_eq!(entry["ackedSeq"], 0, "{inbox}");
    assert_eq!(entry["lastSeq"], 3, "{inbox}");
    let texts: Vec<&Value> = entry["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| &m["text"])
        .collect();
    assert_eq!(texts, ["one", "two", "three"], "{inbox}");
    let human = t.run(&["--profile", "receiver", "inbox"]);
    assert!(
        human
            .stdout
            .contains(&format!("room {room} acked #0 last #3")),
        "{}",
        human.stdout
    );

    let acked = t.json(&["--profile", "receiver", "ack", &room, "2"]);
    assert_eq!(acked["ackedSeq"], 2, "{acked}");
    let inbox = t.json(&["--profile", "receiver", "inbox"]);
    let entry = inbox["rooms"]
        .as_array()
        .expect("rooms")
        .iter()
        .find(|r| r["roomId"] == room.as_str())
        .expect("room");
    assert_eq!(
        entry["messages"].as_array().map(Vec::len),
        Some(1),
        "{inbox}"
    );
    assert_eq!(entry["messages"][0]["text"], "three");

    t.json(&["--profile", "receiver", "ack", &room, "3"]);
    let inbox = t.json(&["--profile", "receiver", "inbox"]);
    let unread: usize = inbox["rooms"]
        .as_array()
        .expect("rooms")
        .iter()
        .map(|r| r["messages"].as_array().map_or(0, Vec::len))
        .sum();
    assert_eq!(unread, 0, "{inbox}");
    // A seq beyond the room's last is refused by the server.
    t.error_code(&["--profile", "receiver", "ack", &room, "4"]);
}
