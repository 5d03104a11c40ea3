//! `relayger mcp` with the Rust SDK's own client on the newest protocol
//! (2026-07-28: `server/discover`, per-request metadata and
//! `subscriptions/listen`). The node suite (`sdk/js/test/mcp.test.js`)
//! drives the previous protocol with the TypeScript SDK's client.

use crate::cli_support;

use std::time::Duration;

use cli_support::{Befriended, CliTest, Party};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, JsonObject, ProtocolVersion, ServerNotification,
    SubscriptionFilter,
};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientLifecycleMode, ClientServiceExt};
use serde_json::{Value, json};

/// A session of `relayger --profile PROFILE mcp` on stdio.
async fn connect(t: &CliTest, profile: &str) -> RunningService<RoleClient, ()> {
    let mut command = t.cli.command().expect("the relayger binary");
    command.args(["--profile", profile, "mcp"]);
    let transport =
        TokioChildProcess::new(tokio::process::Command::from(command)).expect("spawn relayger mcp");
    ().serve_with_lifecycle(
        transport,
        ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        },
    )
    .await
    .expect("an MCP session")
}

async fn call(client: &RunningService<RoleClient, ()>, tool: &str, args: Value) -> CallToolResult {
    let arguments: JsonObject = serde_json::from_value(args).expect("an object");
    client
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments))
        .await
        .expect("a tool result")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_of_the_newest_protocol_calls_tools_and_is_woken_through_listen() {
    let t = CliTest::start("mcp-modern").await;
    let Befriended {
        receiver_number: reader,
        room,
        ..
    } = t.register_pair(
        Party::person("writer", "Writer"),
        Party::person("reader", "Reader"),
    );
    let client = connect(&t, "reader").await;

    let tools = client.list_all_tools().await.expect("tools/list");
    for name in ["whoami", "send", "ask_and_wait", "thread", "note_write"] {
        assert!(tools.iter().any(|tool| tool.name == name), "{name}");
    }
    let me = call(&client, "whoami", json!({})).await;
    assert_ne!(me.is_error, Some(true), "{me:?}");
    assert_eq!(me.structured_content.expect("structured")["number"], reader);

    // Only Relayger resources are accepted.
    let mut subscription = client
        .listen(
            SubscriptionFilter::builder()
                .resource_subscription("relayger://inbox")
                .resource_subscription(format!("relayger://rooms/{room}"))
                .resource_subscription("file:///etc/hosts")
                .build(),
        )
        .await
        .expect("subscriptions/listen");
    let mut accepted = subscription
        .acknowledged()
        .resource_subscriptions
        .clone()
        .unwrap_or_default();
    accepted.sort();
    assert_eq!(
        accepted,
        [
            "relayger://inbox".to_owned(),
            format!("relayger://rooms/{room}")
        ]
    );

    let sent = t.json(&["--profile", "writer", "send", &reader, "wake up"]);
    let mut updated = Vec::new();
    while updated.len() < 2 {
        let notification = tokio::time::timeout(Duration::from_secs(30), subscription.next())
            .await
            .expect("an update within 30 s")
            .expect("the subscription stays open")
            .expect("a notification");
        let ServerNotification::ResourceUpdatedNotification(update) = notification else {
            panic!("not a resource update: {notification:?}");
        };
        updated.push(update.params.uri);
    }
    updated.sort();
    assert_eq!(updated, accepted);

    let inbox = call(&client, "inbox", json!({})).await;
    let inbox = inbox.structured_content.expect("structured");
    assert_eq!(
        inbox["rooms"][0]["messages"][0]["messageId"],
        sent["messageId"]
    );

    // A bad argument is a tool error carrying the code; nothing is sent.
    let bad = call(&client, "send", json!({"roomId": room, "text": 7})).await;
    assert_eq!(bad.is_error, Some(true));
    assert_eq!(
        bad.structured_content.expect("structured")["error"]["code"],
        "invalid_argument"
    );
    let rooms = t.json(&["--profile", "reader", "rooms", "list"]);
    assert_eq!(rooms["rooms"][0]["lastSeq"], 1, "{rooms}");

    client.cancel().await.expect("close the session");
}

/// The structured content of a tool result that is not an error.
fn structured(result: CallToolResult) -> Value {
    assert_ne!(result.is_error, Some(true), "{result:?}");
    result.structured_content.expect("structured content")
}

#[tokio::test(flavor = "multi_thread")]
async fn ask_and_wait_returns_the_delivery_when_no_answer_comes_and_a_question_can_be_canceled() {
    let t = CliTest::start_with(
        "mcp-delivery",
        cli_support::ServerSettings::lease(1500, false),
    )
    .await;
    let pair = t.befriended_pair(true);
    let client = connect(&t, "sender").await;
    let tools = client.list_all_tools().await.expect("tools/list");
    for name in ["delivery", "cancel"] {
        assert!(tools.iter().any(|tool| tool.name == name), "{name}");
    }

    // Nobody listens for the receiver yet: the wait runs out, and says why.
    let asked = structured(
        call(
            &client,
            "ask_and_wait",
            json!({"to": pair.receiver_number, "text": "anyone there?", "timeoutSeconds": 1}),
        )
        .await,
    );
    assert_eq!(asked["outcome"], "timeout", "{asked}");
    assert!(asked.get("reply").is_none(), "{asked}");
    assert_eq!(asked["delivery"]["state"], "queued", "{asked}");
    assert_eq!(
        asked["delivery"]["recipients"][0]["listeners"], 0,
        "{asked}"
    );
    let question = json!({"roomId": pair.room, "messageId": asked["question"]["messageId"]});
    let seen = structured(call(&client, "delivery", question.clone()).await);
    assert_eq!(seen["messageId"], asked["question"]["messageId"]);
    assert_eq!(seen["state"], "queued", "{seen}");
    let canceled = structured(call(&client, "cancel", question.clone()).await);
    assert_eq!(canceled["state"], "canceled", "{canceled}");
    assert_eq!(canceled["canceled"], true, "{canceled}");

    // A worker that rejects the question ends the wait at once.
    let mut worker = t.spawn(
        &cli_support::builtin_worker_args("receiver", "reply-worker", "uppercase"),
        &[],
    );
    worker.wait_event("started");
    let started = std::time::Instant::now();
    let rejected = structured(
        call(
            &client,
            "ask_and_wait",
            json!({"to": pair.receiver_number, "text": "too late?",
                   "deadline": "2026-01-02T12:00:00Z", "timeoutSeconds": 60}),
        )
        .await,
    );
    assert!(started.elapsed() < Duration::from_secs(5), "{rejected}");
    assert_eq!(rejected["outcome"], "unanswered", "{rejected}");
    assert_eq!(rejected["delivery"]["state"], "rejected", "{rejected}");
    assert_eq!(
        rejected["delivery"]["recipients"][0]["reason"], "deadline_passed",
        "{rejected}"
    );
    cli_support::stop_worker(worker);
    client.cancel().await.expect("close the session");
}
