//! Agents owned by a person and tokens, through the real binaries.

mod cli_support;

use cli_support::{CliTest, text};
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
    let stranger = t.register("stranger", "Stranger", true);
    let stranger_n = text(&stranger["number"]);
    t.json(&["--profile", "stranger", "contacts", "request", &bot_n]);
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
    let other = t.register("other", "Other", true);
    let other_n = text(&other["number"]);
    t.json(&["--profile", "other", "contacts", "request", &bot_n]);
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
    assert_eq!(human.stdout.lines().count(), 2, "{}", human.stdout);
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
    let bob = t.register("bob", "Bob", true);
    let room = t.befriend(
        ("alice", &text(&alice["number"])),
        ("bob", &text(&bob["number"])),
    );
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
