//! A room-restricted token learns nothing of the agent's other rooms: the
//! runtime log shows it no lease versions and no other room's records,
//! stats, inspect and the runtime list count its rooms' jobs only and cut
//! the policy's rooms to its own, and its socket signals only changes of
//! its rooms.

use crate::common;

use std::time::Duration;

use common::{TestServer, User, next_frame};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(10);
const INBOX_CHANGED: &str = r#"{"event":"inbox_changed"}"#;

/// An agent in two direct rooms (`inside` and `outside`), and a token of it
/// restricted to `inside`.
struct TwoRooms {
    server: TestServer,
    bot: User,
    inside_friend: User,
    outside_friend: User,
    inside: String,
    outside: String,
    restricted: String,
    restricted_id: String,
}

async fn two_rooms() -> TwoRooms {
    let (server, [bot, inside_friend, outside_friend]) = TestServer::with_users([
        ("bot", "agent"),
        ("inside", "person"),
        ("outside", "person"),
    ])
    .await;
    let inside = server.befriend(&inside_friend, &bot).await;
    let outside = server.befriend(&outside_friend, &bot).await;
    let token = server
        .post(
            "/v1/tokens",
            &bot.token,
            json!({"scopes": ["read", "write"], "roomIds": [inside]}),
        )
        .await
        .ok();
    TwoRooms {
        restricted: token["secret"].as_str().expect("secret").to_owned(),
        restricted_id: token["id"].as_str().expect("id").to_owned(),
        server,
        bot,
        inside_friend,
        outside_friend,
        inside,
        outside,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restricted_token_sees_its_rooms_jobs_only_and_no_lease_versions() {
    let w = two_rooms().await;
    let runtime = w
        .server
        .post(
            "/v1/runtimes",
            &w.bot.token,
            json!({"name": "both", "from": "now",
                   "policy": {"allowedRooms": [w.inside, w.outside], "concurrency": 2}}),
        )
        .await
        .ok();
    let runtime = runtime["id"].as_str().expect("id").to_owned();
    for (friend, room) in [
        (&w.inside_friend, &w.inside),
        (&w.outside_friend, &w.outside),
    ] {
        w.server
            .send(
                friend,
                json!({"roomId": room, "text": "question", "ask": true}),
            )
            .await;
    }
    let claimed = w.server.claim_jobs(&w.bot.token, &runtime, 2).await.ok();
    assert_eq!(claimed["jobs"].as_array().expect("jobs").len(), 2);

    // The whole identity sees both rooms' claims, with their versions.
    let log = w
        .server
        .get(&format!("/v1/runtimes/{runtime}/log"), &w.bot.token)
        .await
        .ok();
    let claims: Vec<&Value> = records(&log, "claimed");
    assert_eq!(claims.len(), 2);
    assert!(
        claims.iter().all(|r| r["detail"]["version"].is_string()),
        "{log}"
    );

    // The restricted token: its room's claim, without the version.
    let log = w
        .server
        .get(&format!("/v1/runtimes/{runtime}/log"), &w.restricted)
        .await
        .ok();
    let claims: Vec<&Value> = records(&log, "claimed");
    assert_eq!(claims.len(), 1, "{log}");
    assert_eq!(claims[0]["conversationId"], w.inside.as_str());
    assert_eq!(claims[0]["detail"], json!({"attempt": 1}), "{log}");
    assert!(!log.to_string().contains(&w.outside), "{log}");

    let stats = |token: &str| {
        let path = format!("/v1/runtimes/{runtime}/stats");
        let server = &w.server;
        let token = token.to_owned();
        async move { server.get(&path, &token).await.ok() }
    };
    let all = stats(&w.bot.token).await;
    assert_eq!(
        (all["claims"].as_u64(), all["jobs"]["claimed"].as_u64()),
        (Some(2), Some(2))
    );
    assert_eq!(all["budgetUsedLastHour"], 2);
    let mine = stats(&w.restricted).await;
    assert_eq!(
        (mine["claims"].as_u64(), mine["jobs"]["claimed"].as_u64()),
        (Some(1), Some(1)),
        "{mine}"
    );
    assert_eq!(mine["budgetUsedLastHour"], 1, "{mine}");

    // Inspect and the list: the whole identity sees both rooms ...
    let inspect = w
        .server
        .get(&format!("/v1/runtimes/{runtime}"), &w.bot.token)
        .await
        .ok();
    assert_eq!(
        inspect["policy"]["allowedRooms"],
        json!([w.inside, w.outside])
    );
    assert!(inspect.get("allowedRoomsHidden").is_none(), "{inspect}");
    assert_eq!(
        (
            inspect["jobs"]["claimed"].as_u64(),
            inspect["activeLeases"].as_u64()
        ),
        (Some(2), Some(2))
    );
    // ... the restricted token its own, and that the runtime names more.
    let inspect = w
        .server
        .get(&format!("/v1/runtimes/{runtime}"), &w.restricted)
        .await
        .ok();
    let listed = w.server.get("/v1/runtimes", &w.restricted).await.ok();
    assert_eq!(
        listed["runtimes"][0], inspect,
        "the list shows what inspect shows"
    );
    assert_eq!(
        inspect["policy"]["allowedRooms"],
        json!([w.inside]),
        "{inspect}"
    );
    assert_eq!(inspect["allowedRoomsHidden"], true);
    assert_eq!(
        (
            inspect["jobs"]["claimed"].as_u64(),
            inspect["activeLeases"].as_u64()
        ),
        (Some(1), Some(1))
    );
    assert!(!inspect.to_string().contains(&w.outside), "{inspect}");
}

/// The claimed-kind records of a log page.
fn records<'a>(log: &'a Value, kind: &str) -> Vec<&'a Value> {
    log["records"]
        .as_array()
        .expect("records")
        .iter()
        .filter(|r| r["kind"] == kind)
        .collect()
}

async fn socket(server: &TestServer, token: &str) -> common::WsStream {
    server
        .ws_connect("/v1/socket", Some(token))
        .await
        .expect("the socket")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restricted_tokens_socket_signals_only_its_rooms() {
    const OUTSIDE_SENDS: usize = 5;
    let w = two_rooms().await;
    let mut restricted = socket(&w.server, &w.restricted).await;
    let mut whole = socket(&w.server, &w.bot.token).await;

    // A message in its room: both sockets hear it.
    w.server
        .send(&w.inside_friend, json!({"roomId": w.inside, "text": "in"}))
        .await;
    for socket in [&mut restricted, &mut whole] {
        assert_eq!(
            next_frame(socket, WAIT).await.as_deref(),
            Some(INBOX_CHANGED)
        );
    }

    // Messages in the other room and a contact request: once the
    // unrestricted socket has heard each, their signals are queued for the
    // restricted socket ahead of anything later, on the same channel.
    for n in 0..OUTSIDE_SENDS {
        w.server
            .send(
                &w.outside_friend,
                json!({"roomId": w.outside, "text": format!("out {n}")}),
            )
            .await;
        assert_eq!(
            next_frame(&mut whole, WAIT).await.as_deref(),
            Some(INBOX_CHANGED)
        );
    }
    let stranger = w.server.register("stranger", "person").await;
    w.server.ask_contact(&stranger, &w.bot).await.ok();
    assert_eq!(
        next_frame(&mut whole, WAIT).await.as_deref(),
        Some(INBOX_CHANGED)
    );
    // Revoking the restricted token queues its close behind them: the
    // restricted socket closes without a frame for any of them.
    w.server
        .delete(&format!("/v1/tokens/{}", w.restricted_id), &w.bot.token)
        .await
        .ok();
    assert_eq!(
        next_frame(&mut restricted, WAIT).await,
        None,
        "no signal for another room or a contact request before the close"
    );
}

/// A restricted worker attaching to a runtime is told the backlog of its
/// rooms only: how many rooms and unscanned messages it will consider.
#[tokio::test(flavor = "multi_thread")]
async fn a_restricted_worker_attaching_is_told_the_backlog_of_its_rooms_only() {
    let w = two_rooms().await;
    for (friend, room, count) in [
        (&w.inside_friend, &w.inside, 2),
        (&w.outside_friend, &w.outside, 3),
    ] {
        for i in 0..count {
            w.server
                .send(
                    friend,
                    json!({"roomId": room, "text": format!("question {i}"), "ask": true}),
                )
                .await;
        }
    }
    let register = json!({"name": "attached", "from": "beginning"});
    let full = w
        .server
        .post("/v1/runtimes", &w.bot.token, register.clone())
        .await
        .ok();
    assert_eq!(full["backlog"], json!({"rooms": 2, "unscannedMessages": 5}));
    let attached = w
        .server
        .post("/v1/runtimes", &w.restricted, register)
        .await
        .ok();
    assert_eq!(attached["id"], full["id"]);
    assert_eq!(
        attached["backlog"],
        json!({"rooms": 1, "unscannedMessages": 2})
    );
}
