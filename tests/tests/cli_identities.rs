//! Agents owned by a person and tokens, through the real binaries; long
//! lists (rooms, tokens, contact requests) read page by page.

use crate::cli_support;

use cli_support::{CliTest, Party, text};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use serde_json::Value;

#[tokio::test(flavor = "multi_thread")]
async fn an_owner_creates_an_agent_and_answers_its_contact_requests() {
    let t = CliTest::start("cli-agents").await;
    let owner = t.register("owner", "Owner", false);
    let owner_n = text(&owner["number"]);

    let created = t.json(&[
        "--profile",
        "owner",
        "agents",
        "create",
        "--name",
        "Owner's bot",
        "--save-as",
        "bot",
    ]);
    assert_eq!(created["profile"], "bot", "{created}");
    assert!(created["token"].get("secret").is_none(), "{created}");
    let bot = &created["identity"];
    assert_eq!(bot["kind"], "agent");
    assert_eq!(bot["ownerNumber"], owner_n.as_str(), "{created}");
    let bot_n = text(&bot["number"]);

    // The agent's own profile: same server, its own key pair.
    let file: Value =
        serde_json::from_slice(&std::fs::read(t.cli.home().join("bot.json")).expect("bot profile"))
            .expect("JSON");
    let owner_file: Value = serde_json::from_slice(
        &std::fs::read(t.cli.home().join("owner.json")).expect("owner profile"),
    )
    .expect("JSON");
    assert_eq!(file["server"], owner_file["server"]);
    assert_eq!(file["ownerNumber"], owner_n.as_str());
    assert_ne!(file["secretKey"], owner_file["secretKey"]);
    assert_eq!(file["publicKey"], bot["publicKey"]);
    let me = t.json(&["--profile", "bot", "whoami"]);
    assert_eq!(me["number"], bot_n.as_str());
    let human = t.run(&["--profile", "bot", "whoami"]);
    assert!(
        human.stdout.contains(&format!("{bot_n} agent")) && human.stdout.contains("profile bot"),
        "{}",
        human.stdout
    );
    // Saving over an existing profile is refused before the server is asked.
    let code = t.error_code(&[
        "--profile",
        "owner",
        "agents",
        "create",
        "--name",
        "Again",
        "--save-as",
        "bot",
    ]);
    assert_eq!(code, "invalid_argument");

    // Someone asks the agent; the owner sees the request and accepts it.
    let stranger_n = t.new_requester(Party::agent("stranger", "Stranger"), &bot_n);
    let requests = t.json(&["--profile", "owner", "contacts", "requests", "--as", &bot_n]);
    assert_eq!(requests["count"], 1, "{requests}");
    assert_eq!(requests["incoming"][0]["number"], stranger_n.as_str());
    let accepted = t.json(&[
        "--profile",
        "owner",
        "contacts",
        "accept",
        &stranger_n,
        "--as",
        &bot_n,
    ]);
    assert_eq!(accepted["number"], stranger_n.as_str(), "{accepted}");
    let room = text(&accepted["roomId"]);

    // The agent has the contact (the owner does not), and they can talk.
    let contacts = t.json(&["--profile", "bot", "contacts", "list"]);
    assert_eq!(contacts["contacts"][0]["number"], stranger_n.as_str());
    assert_eq!(contacts["contacts"][0]["roomId"], room.as_str());
    let owner_contacts = t.json(&["--profile", "owner", "contacts", "list"]);
    assert_eq!(owner_contacts["contacts"], Value::Array(Vec::new()));
    let sent = t.json(&[
        "--profile",
        "stranger",
        "send",
        &bot_n,
        "hello bot",
        "--ask",
    ]);
    assert_eq!(sent["conversationId"], room.as_str());
    let read = t.json(&[
        "--profile",
        "bot",
        "message",
        &room,
        &text(&sent["messageId"]),
    ]);
    assert_eq!(read["text"], "hello bot");

    // Declining for the agent works the same way.
    let other_n = t.new_requester(Party::agent("other", "Other"), &bot_n);
    let declined = t.json(&[
        "--profile",
        "owner",
        "contacts",
        "decline",
        &other_n,
        "--as",
        &bot_n,
    ]);
    assert_eq!(declined["state"], "declined", "{declined}");
}

#[tokio::test(flavor = "multi_thread")]
async fn tokens_are_created_listed_and_revoked() {
    let t = CliTest::start("cli-tokens").await;
    let alice = t.register("alice", "Alice", true);
    let alice_file: Value =
        serde_json::from_slice(&std::fs::read(t.cli.home().join("alice.json")).expect("profile"))
            .expect("JSON");

    let created = t.json(&[
        "--profile",
        "alice",
        "tokens",
        "create",
        "--scopes",
        "read,write",
        "--save-as",
        "alice-rw",
    ]);
    let token_id = text(&created["id"]);
    assert!(
        created["secret"].as_str().is_some_and(|s| !s.is_empty()),
        "{created}"
    );
    assert_eq!(created["scopes"], serde_json::json!(["read", "write"]));
    assert_eq!(created["profile"], "alice-rw");
    let copy: Value =
        serde_json::from_slice(&std::fs::read(t.cli.home().join("alice-rw.json")).expect("copy"))
            .expect("JSON");
    assert_eq!(copy["token"], created["secret"]);
    assert_eq!(copy["tokenId"], created["id"]);
    assert_eq!(
        copy["secretKey"], alice_file["secretKey"],
        "same identity, same key"
    );

    // The new token works, within its scopes.
    let me = t.json(&["--profile", "alice-rw", "whoami"]);
    assert_eq!(me["id"], alice["id"]);
    assert_eq!(
        t.error_code(&["--profile", "alice-rw", "contacts", "requests"]),
        "forbidden",
        "counting requests needs the contacts scope"
    );

    let list = t.json(&["--profile", "alice", "tokens", "list"]);
    let tokens = list["tokens"].as_array().expect("tokens");
    assert_eq!(tokens.len(), 2, "{list}");
    assert!(
        !list.to_string().contains(&text(&created["secret"])),
        "no secrets listed"
    );
    let current: Vec<&Value> = tokens
        .iter()
        .filter(|t| t["current"] == true)
        .map(|t| &t["id"])
        .collect();
    assert_eq!(current, [&alice_file["tokenId"]], "{list}");
    let human = t.run(&["--profile", "alice", "tokens", "list"]);
    // A header row, then one row a token.
    assert_eq!(human.stdout.lines().count(), 3, "{}", human.stdout);
    assert!(human.stdout.starts_with("TOKEN"), "{}", human.stdout);
    assert!(human.stdout.contains("(this profile)"), "{}", human.stdout);

    // Revoked: the next request with that token is refused, the other works.
    let revoked = t.json(&["--profile", "alice", "tokens", "revoke", &token_id]);
    assert_eq!(revoked["id"], token_id.as_str());
    assert!(revoked["revokedAt"].as_str().is_some(), "{revoked}");
    assert_eq!(
        t.error_code(&["--profile", "alice-rw", "whoami"]),
        "unauthorized"
    );
    let human = t.run(&["--profile", "alice-rw", "whoami"]);
    // Not signed in: exit 4 (README, exit statuses).
    assert_eq!(human.code, Some(4));
    assert!(
        human.stderr.starts_with("error: unauthorized: "),
        "{}",
        human.stderr
    );
    t.json(&["--profile", "alice", "whoami"]);

    // A room-restricted token.
    let bob_number = t.register_number(Party::agent("bob", "Bob"));
    let room = t.befriend(("alice", &text(&alice["number"])), ("bob", &bob_number));
    let restricted = t.json(&[
        "--profile",
        "alice",
        "tokens",
        "create",
        "--scopes",
        "read",
        "--room",
        &room,
    ]);
    assert_eq!(
        restricted["roomIds"],
        serde_json::json!([room]),
        "{restricted}"
    );
    assert!(restricted.get("profile").is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn long_lists_are_shown_whole_or_page_by_page() {
    const ROOMS: usize = 130;
    const TOKENS: usize = 240;
    const REQUESTS: usize = 230;
    let t = CliTest::start("cli-pages").await;
    let alice = t.register("alice", "Alice", false);
    let alice_id = text(&alice["id"]);
    // More of each than one page holds, written in SQL.
    let mut conn = AsyncPgConnection::establish(t.database_url())
        .await
        .expect("connect");
    for sql in [
        format!(
            "INSERT INTO rooms (id, kind, name, created_by) \
             SELECT gen_random_uuid(), 'group', 'room ' || s, '{alice_id}' FROM generate_series(1, {ROOMS}) s"
        ),
        format!(
            "INSERT INTO room_members (room_id, identity_id) SELECT id, '{alice_id}' FROM rooms"
        ),
        format!(
            "INSERT INTO tokens (id, identity_id, secret_hash, scopes) \
             SELECT gen_random_uuid(), '{alice_id}', sha256(('t' || s)::bytea), ARRAY['read'] \
             FROM generate_series(1, {TOKENS}) s"
        ),
        format!(
            "INSERT INTO identities (id, number, kind, display_name) \
             SELECT gen_random_uuid(), (700000000 + s)::text, 'person', 'asker ' || s \
             FROM generate_series(1, {REQUESTS}) s"
        ),
        format!(
            "INSERT INTO contact_requests (id, requester_id, target_id, state) \
             SELECT gen_random_uuid(), id, '{alice_id}', 'pending' FROM identities WHERE number LIKE '7%'"
        ),
    ] {
        diesel::sql_query(&sql)
            .execute(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }

    // Without --limit/--after: everything, every page followed.
    let rooms = t.json(&["--profile", "alice", "rooms", "list"]);
    assert_eq!(rooms["rooms"].as_array().expect("rooms").len(), ROOMS);
    assert!(rooms.get("next").is_none(), "{}", rooms["next"]);
    let tokens = t.json(&["--profile", "alice", "tokens", "list"]);
    assert_eq!(
        tokens["tokens"].as_array().expect("tokens").len(),
        TOKENS + 1
    );
    let requests = t.json(&["--profile", "alice", "contacts", "requests"]);
    assert_eq!(
        requests["incoming"].as_array().expect("incoming").len(),
        REQUESTS
    );
    assert_eq!(requests["count"], REQUESTS);
    assert!(requests.get("next").is_none());

    // With them: one page and its `next`, which continues to the end.
    for (command, items) in [
        (&["rooms", "list"][..], ("rooms", ROOMS)),
        (&["tokens", "list"][..], ("tokens", TOKENS + 1)),
        (&["contacts", "requests"][..], ("incoming", REQUESTS)),
    ] {
        let (field, total) = items;
        let mut seen = std::collections::HashSet::new();
        let mut after: Option<String> = None;
        let mut pages = 0;
        loop {
            let mut args = vec!["--profile", "alice"];
            args.extend_from_slice(command);
            args.extend_from_slice(&["--limit", "40"]);
            if let Some(after) = &after {
                args.extend_from_slice(&["--after", after]);
            }
            let page = t.json(&args);
            pages += 1;
            let list = page[field].as_array().expect("list");
            assert!(list.len() <= 40, "{command:?}: {}", list.len());
            for item in list {
                assert!(seen.insert(text(&item["id"])), "{command:?}: twice");
            }
            match page["next"].as_str() {
                Some(next) => after = Some(next.to_owned()),
                None => break,
            }
        }
        assert_eq!(seen.len(), total, "{command:?}");
        assert_eq!(pages, total.div_ceil(40), "{command:?}");
        // The text output names the command for the next page.
        let mut args = vec!["--profile", "alice"];
        args.extend_from_slice(command);
        args.extend_from_slice(&["--limit", "3"]);
        let human = t.run(&args);
        assert!(human.success(), "{human:?}");
        let more = format!("more: relayger {} --after ", command.join(" "));
        assert!(human.stdout.contains(&more), "{}", human.stdout);
    }
    assert_eq!(
        t.error_code(&["--profile", "alice", "rooms", "list", "--limit", "0"]),
        "invalid_argument"
    );
}
