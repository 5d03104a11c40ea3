//! A2A over real HTTP: the card, the JSON-RPC methods and their errors,
//! who may ask, and the SSE stream (`tests/a2a/stream.rs`). The official
//! SDKs drive the same routes end to end in `tests/tests/a2a_server.rs`.

mod stream;

use std::time::Duration;

use crate::common;

use common::bot::Bot;
use common::{Reply, TestServer, User};
use reqwest::Method;
use serde_json::{Value, json};

/// A JSON-RPC call to `/a2a/{number}` with `token`.
pub(crate) async fn rpc(
    server: &TestServer,
    token: &str,
    number: &str,
    method: &str,
    params: Value,
) -> Reply {
    server
        .post(
            &format!("/a2a/{number}"),
            token,
            json!({"jsonrpc": "2.0", "id": "call-1", "method": method, "params": params}),
        )
        .await
}

/// The result of a call that must succeed.
#[track_caller]
pub(crate) fn result(reply: Reply) -> Value {
    let body = reply.ok();
    assert_eq!(body["jsonrpc"], "2.0", "{body}");
    assert!(body.get("error").is_none(), "{body}");
    body["result"].clone()
}

/// The JSON-RPC error code of a call that must fail inside A2A (status 200).
#[track_caller]
pub(crate) fn rpc_error(reply: Reply) -> (i64, Value) {
    let body = reply.ok();
    assert_eq!(body["jsonrpc"], "2.0", "{body}");
    assert!(body.get("result").is_none(), "{body}");
    let code = body["error"]["code"].as_i64().expect("an error code");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty())
    );
    (code, body)
}

pub(crate) fn text_message(text: &str) -> Value {
    json!({"messageId": "client-1", "role": "ROLE_USER", "parts": [{"text": text}]})
}

/// An agent with a runtime (maxAttempts 1) and a person who is its contact.
pub(crate) struct World {
    pub(crate) bot: Bot,
    pub(crate) runtime: String,
    pub(crate) asker: User,
    pub(crate) room: String,
}

impl World {
    pub(crate) async fn new() -> World {
        let bot = Bot::start().await;
        let runtime = bot.runtime("main", "now", json!({"maxAttempts": 1})).await;
        let (asker, room) = bot.contact("asker").await;
        World {
            bot,
            runtime,
            asker,
            room,
        }
    }

    pub(crate) fn server(&self) -> &TestServer {
        &self.bot.server
    }

    pub(crate) fn number(&self) -> &str {
        &self.bot.agent.number
    }

    pub(crate) async fn call(&self, method: &str, params: Value) -> Reply {
        rpc(
            self.server(),
            &self.asker.token,
            self.number(),
            method,
            params,
        )
        .await
    }

    /// Sends `text` and answers at once with the task.
    pub(crate) async fn submit(&self, text: &str) -> Value {
        result(
            self.call(
                "SendMessage",
                json!({"message": text_message(text), "configuration": {"returnImmediately": true}}),
            )
            .await,
        )["task"]
            .clone()
    }

    pub(crate) async fn get_task(&self, id: &Value) -> Value {
        result(self.call("GetTask", json!({"id": id})).await)
    }

    /// The runtime's one claimable job.
    pub(crate) async fn claim(&self) -> Value {
        let claimed = self.bot.claim(&self.runtime, 1).await.ok();
        claimed["jobs"][0].clone()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_card_names_the_agent_and_one_json_rpc_interface() {
    let w = World::new().await;
    let path = format!("/a2a/{}/.well-known/agent-card.json", w.number());
    let card = w.server().get(&path, &w.asker.token).await.ok();
    assert_eq!(card["name"], "agent");
    assert_eq!(
        card["supportedInterfaces"],
        json!([{
            "url": format!("{}/a2a/{}", w.server().base_url, w.number()),
            "protocolBinding": "JSONRPC",
            "protocolVersion": "1.0"
        }])
    );
    assert_eq!(card["capabilities"]["streaming"], true);
    assert_eq!(
        card["securitySchemes"]["relaygerToken"]["httpAuthSecurityScheme"]["scheme"],
        "Bearer"
    );
    assert_eq!(card["defaultInputModes"], json!(["text/plain"]));
    assert!(
        card["description"]
            .as_str()
            .is_some_and(|d| d.contains("sealed"))
    );

    // No anonymous access; a person's number and an unknown one are 404.
    w.server()
        .request(Method::GET, &path, None, None)
        .await
        .err(401, "unauthorized");
    let person = format!("/a2a/{}/.well-known/agent-card.json", w.asker.number);
    w.server()
        .get(&person, &w.asker.token)
        .await
        .err(404, "not_found");
    let unknown = common::next_number(&w.asker.number);
    w.server()
        .get(
            &format!("/a2a/{unknown}/.well-known/agent-card.json"),
            &w.asker.token,
        )
        .await
        .err(404, "not_found");
    rpc(
        w.server(),
        &w.asker.token,
        &w.asker.number,
        "GetTask",
        json!({"id": "x"}),
    )
    .await
    .err(404, "not_found");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_blocking_send_answers_once_the_agent_replied() {
    let w = World::new().await;
    let mut agent_socket = w
        .server()
        .ws_connect("/v1/socket", Some(&w.bot.agent.token))
        .await
        .expect("socket");
    let server = w.server().base_url.clone();
    let (token, number) = (w.asker.token.clone(), w.number().to_owned());
    let send = tokio::spawn(async move {
        reqwest::Client::new()
            .post(format!("{server}/a2a/{number}"))
            .bearer_auth(token)
            .header("A2A-Version", "1.0")
            .json(&json!({
                "jsonrpc": "2.0", "id": 7, "method": "SendMessage",
                "params": {"message": text_message("hello there")}
            }))
            .send()
            .await
            .expect("send")
            .json::<Value>()
            .await
            .expect("json")
    });
    // The question reached the agent: answer it as its worker would.
    assert!(
        common::next_frame(&mut agent_socket, Duration::from_secs(10))
            .await
            .is_some()
    );
    let job = w.claim().await;
    assert_eq!(job["message"]["text"], "hello there", "{job}");
    w.server()
        .finish_job(
            &w.bot.agent.token,
            &w.runtime,
            &job,
            json!({"reply": "HELLO THERE"}),
        )
        .await
        .ok();
    let answer = tokio::time::timeout(Duration::from_secs(10), send)
        .await
        .expect("the send answers once the reply exists")
        .expect("joined");
    assert_eq!(answer["id"], 7, "{answer}");
    let task = &answer["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{answer}");
    assert_eq!(task["contextId"], w.room.as_str());
    assert_eq!(task["id"], job["message"]["messageId"]);
    let reply = &task["status"]["message"];
    assert_eq!(reply["role"], "ROLE_AGENT");
    assert_eq!(reply["parts"], json!([{"text": "HELLO THERE"}]));
    assert_eq!(
        task["artifacts"][0]["parts"],
        json!([{"text": "HELLO THERE"}])
    );
    let history: Vec<&str> = task["history"]
        .as_array()
        .expect("history")
        .iter()
        .map(|m| m["role"].as_str().expect("role"))
        .collect();
    assert_eq!(history, ["ROLE_USER", "ROLE_AGENT"]);

    // The same task read back, and listed.
    let read = w.get_task(&task["id"]).await;
    assert_eq!(read["status"], task["status"]);
    let listed = result(w.call("ListTasks", json!({})).await);
    assert_eq!(listed["totalSize"], 1);
    assert_eq!(listed["tasks"][0]["id"], task["id"]);
    assert!(
        listed["tasks"][0].get("artifacts").is_none(),
        "artifacts only when asked"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn task_states_follow_the_delivery_and_failures_carry_codes_only() {
    let w = World::new().await;
    let task = w.submit("boom please").await;
    assert_eq!(task["status"]["state"], "TASK_STATE_SUBMITTED", "{task}");
    assert_eq!(
        task["history"][0]["parts"],
        json!([{"text": "boom please"}])
    );

    let job = w.claim().await;
    assert_eq!(
        w.get_task(&task["id"]).await["status"]["state"],
        "TASK_STATE_WORKING"
    );
    w.server()
        .finish_job(
            &w.bot.agent.token,
            &w.runtime,
            &job,
            json!({"error": "secret stack trace"}),
        )
        .await
        .ok();
    let failed = w.get_task(&task["id"]).await;
    assert_eq!(failed["status"]["state"], "TASK_STATE_FAILED", "{failed}");
    assert_eq!(
        failed["status"]["message"]["parts"],
        json!([{"text": "attempts_exhausted"}])
    );
    assert!(!failed.to_string().contains("secret stack trace"));

    // Listing filters by state and pages newest first.
    let second = w.submit("second").await;
    let third = w.submit("third").await;
    let page = result(
        w.call("ListTasks", json!({"pageSize": 2, "historyLength": 0}))
            .await,
    );
    assert_eq!(page["totalSize"], 3);
    let ids: Vec<&Value> = page["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .map(|t| &t["id"])
        .collect();
    assert_eq!(ids, [&third["id"], &second["id"]]);
    assert!(page["tasks"][0].get("history").is_none());
    let rest = result(
        w.call(
            "ListTasks",
            json!({"pageSize": 2, "pageToken": page["nextPageToken"]}),
        )
        .await,
    );
    assert_eq!(rest["tasks"][0]["id"], task["id"]);
    assert_eq!(rest["nextPageToken"], "");
    let failed_only = result(
        w.call("ListTasks", json!({"status": "TASK_STATE_FAILED"}))
            .await,
    );
    assert_eq!(failed_only["tasks"].as_array().expect("tasks").len(), 1);
    let elsewhere = result(
        w.call(
            "ListTasks",
            json!({"contextId": uuid::Uuid::new_v4().to_string()}),
        )
        .await,
    );
    assert_eq!(elsewhere["tasks"], json!([]));
}

#[tokio::test(flavor = "multi_thread")]
async fn cancel_ends_a_task_once_and_a_continuation_replies_in_its_thread() {
    let w = World::new().await;
    let first = w.submit("first question").await;
    let canceled = result(w.call("CancelTask", json!({"id": first["id"]})).await);
    assert_eq!(
        canceled["status"]["state"], "TASK_STATE_CANCELED",
        "{canceled}"
    );
    let (code, _) = rpc_error(w.call("CancelTask", json!({"id": first["id"]})).await);
    assert_eq!(code, -32002, "an ended task is not cancelable");
    let (code, _) = rpc_error(w.call("SubscribeToTask", json!({"id": first["id"]})).await);
    assert_eq!(code, -32004, "an ended task has nothing to stream");
    // Never claimed.
    assert_eq!(w.bot.claim(&w.runtime, 1).await.ok()["jobs"], json!([]));

    let mut follow_up = text_message("and again");
    follow_up["taskId"] = first["id"].clone();
    follow_up["contextId"] = first["contextId"].clone();
    let second = result(
        w.call(
            "SendMessage",
            json!({"message": follow_up, "configuration": {"returnImmediately": true}}),
        )
        .await,
    )["task"]
        .clone();
    assert_ne!(second["id"], first["id"]);
    assert_eq!(second["contextId"], first["contextId"]);
    assert_eq!(
        second["history"][0]["referenceTaskIds"],
        json!([first["id"]])
    );
    let stored = w
        .server()
        .get(
            &format!(
                "/v1/rooms/{}/messages/{}",
                w.room,
                second["id"].as_str().expect("id")
            ),
            &w.asker.token,
        )
        .await
        .ok();
    assert_eq!(stored["replyTo"], first["id"]);
    assert_eq!(stored["ask"], true);
}

#[tokio::test(flavor = "multi_thread")]
async fn errors_are_a2a_error_objects() {
    let w = World::new().await;
    let path = format!("/a2a/{}", w.number());
    let raw = |body: &'static str| {
        let url = format!("{}{path}", w.server().base_url);
        let token = w.asker.token.clone();
        async move {
            reqwest::Client::new()
                .post(url)
                .bearer_auth(token)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .expect("post")
                .json::<Value>()
                .await
                .expect("json")
        }
    };
    let parse = raw("{not json").await;
    assert_eq!(parse["error"]["code"], -32700);
    assert_eq!(parse["id"], Value::Null);
    assert_eq!(
        parse["error"]["data"][0]["@type"],
        "type.googleapis.com/google.rpc.ErrorInfo"
    );
    let invalid = raw(r#"{"jsonrpc":"1.0","id":3,"method":"GetTask"}"#).await;
    assert_eq!(
        (invalid["error"]["code"].clone(), invalid["id"].clone()),
        (json!(-32600), json!(3))
    );

    let table: [(&str, Value, i64); 9] = [
        ("message/send", json!({}), -32601),
        ("SendMessage", json!({}), -32602),
        ("SendMessage", json!({"message": {"parts": "nope"}}), -32602),
        (
            "SendMessage",
            json!({"message": {"messageId": "m", "role": "ROLE_USER",
                "parts": [{"url": "https://x.example/a.png", "mediaType": "image/png"}]}}),
            -32005,
        ),
        (
            "SendMessage",
            json!({"message": text_message(&"x".repeat(64 * 1024 + 1))}),
            -32602,
        ),
        (
            "GetTask",
            json!({"id": uuid::Uuid::new_v4().to_string()}),
            -32001,
        ),
        ("GetTask", json!({"id": "not-a-uuid"}), -32001),
        (
            "CreateTaskPushNotificationConfig",
            json!({"taskId": "t", "url": "https://x.example"}),
            -32003,
        ),
        ("ListTasks", json!({"pageSize": 1000}), -32602),
    ];
    let before = w.server().messages_in_rooms_of(&w.asker).await;
    for (method, params, expected) in table {
        let (code, body) = rpc_error(w.call(method, params).await);
        assert_eq!(code, expected, "{method}: {body}");
        assert_eq!(body["id"], "call-1");
    }
    assert_eq!(
        w.server().messages_in_rooms_of(&w.asker).await,
        before,
        "nothing was sent"
    );

    // A client of another major version is told so.
    let old = reqwest::Client::new()
        .post(format!("{}{path}", w.server().base_url))
        .bearer_auth(&w.asker.token)
        .header("A2A-Version", "0.3")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}))
        .send()
        .await
        .expect("post")
        .json::<Value>()
        .await
        .expect("json");
    assert_eq!(old["error"]["code"], -32009, "{old}");
    // A body over the server's limit is refused before it is read whole.
    let huge = "x".repeat(600 * 1024);
    w.call("SendMessage", json!({"message": text_message(&huge)}))
        .await
        .err(413, "payload_too_large");
}

#[tokio::test(flavor = "multi_thread")]
async fn contacts_blocks_scopes_and_room_restrictions_apply_as_for_any_send() {
    let w = World::new().await;
    let server = w.server();
    // A stranger is refused as `POST /v1/messages` with `to` refuses them.
    let stranger = server.register("stranger", "person").await;
    rpc(
        server,
        &stranger.token,
        w.number(),
        "SendMessage",
        json!({"message": text_message("hi")}),
    )
    .await
    .err(404, "not_found");
    let listed = result(rpc(server, &stranger.token, w.number(), "ListTasks", json!({})).await);
    assert_eq!(listed["tasks"], json!([]));

    // A read-only token reads but cannot ask or cancel.
    let task = w.submit("hello").await;
    let read_only = server
        .post("/v1/tokens", &w.asker.token, json!({"scopes": ["read"]}))
        .await
        .ok()["secret"]
        .as_str()
        .expect("secret")
        .to_owned();
    rpc(
        server,
        &read_only,
        w.number(),
        "SendMessage",
        json!({"message": text_message("hi")}),
    )
    .await
    .err(403, "forbidden");
    rpc(
        server,
        &read_only,
        w.number(),
        "CancelTask",
        json!({"id": task["id"]}),
    )
    .await
    .err(403, "forbidden");
    let seen = result(
        rpc(
            server,
            &read_only,
            w.number(),
            "GetTask",
            json!({"id": task["id"]}),
        )
        .await,
    );
    assert_eq!(seen["id"], task["id"]);

    // A token restricted to another room asks nothing here; one restricted
    // to the direct room does.
    let other_room = server
        .create_room(&w.asker, "elsewhere", json!([]))
        .await
        .ok()["id"]
        .clone();
    let restricted = |room: Value| {
        let token = w.asker.token.clone();
        async move {
            server
                .post(
                    "/v1/tokens",
                    &token,
                    json!({"scopes": ["read", "write"], "roomIds": [room]}),
                )
                .await
                .ok()["secret"]
                .as_str()
                .expect("secret")
                .to_owned()
        }
    };
    let outside = restricted(other_room).await;
    rpc(
        server,
        &outside,
        w.number(),
        "SendMessage",
        json!({"message": text_message("hi")}),
    )
    .await
    .err(404, "not_found");
    let (code, _) = rpc_error(
        rpc(
            server,
            &outside,
            w.number(),
            "GetTask",
            json!({"id": task["id"]}),
        )
        .await,
    );
    assert_eq!(code, -32001);
    let inside = restricted(json!(w.room)).await;
    let asked = result(
        rpc(
            server,
            &inside,
            w.number(),
            "SendMessage",
            json!({"message": text_message("from inside"), "configuration": {"returnImmediately": true}}),
        )
        .await,
    );
    assert_eq!(asked["task"]["contextId"], w.room.as_str());

    // Blocked: refused like any send.
    server.block(&w.bot.agent, &w.asker).await.ok();
    let refused = rpc(
        server,
        &w.asker.token,
        w.number(),
        "SendMessage",
        json!({"message": text_message("hi")}),
    )
    .await;
    assert!(
        refused.status.is_client_error(),
        "{}: {}",
        refused.status,
        refused.body
    );
    assert!(
        refused.body["error"]["code"].is_string(),
        "our envelope: {}",
        refused.body
    );

    // Another asker never sees the first one's tasks.
    let (other, _) = w.bot.contact("other").await;
    let (code, _) = rpc_error(
        rpc(
            server,
            &other.token,
            w.number(),
            "GetTask",
            json!({"id": task["id"]}),
        )
        .await,
    );
    assert_eq!(code, -32001);
}
