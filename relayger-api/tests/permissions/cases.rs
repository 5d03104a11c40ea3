//! One concrete request per route of the table: path parameters filled from
//! a [`World`] and a body the right token gets a 2xx for.

use relayger_api::RouteMethod;
use serde_json::{Value, json};

use super::world::World;
use crate::common::public_key;

/// Setup a case needs in its world before anything is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Prep {
    None,
    /// Configure and delete are refused while a lease is active.
    ReleaseJob,
    /// Unblocking needs a block.
    BlockAsker,
}

#[derive(Debug, Clone)]
pub(crate) struct Case {
    pub(crate) method: RouteMethod,
    /// The route table's path this case exercises.
    pub(crate) template: &'static str,
    pub(crate) path: String,
    pub(crate) body: Option<Value>,
    /// The path names something of the agent's that the access kind does
    /// not express (a token, a contact request, a contact): any other
    /// identity gets 404.
    pub(crate) owned: bool,
    /// Touches the agent's direct room (the one a block ends).
    pub(crate) direct_room: bool,
    pub(crate) prep: Prep,
}

impl Case {
    fn new(method: RouteMethod, template: &'static str, path: String) -> Case {
        Case {
            method,
            template,
            path,
            body: None,
            owned: false,
            direct_room: false,
            prep: Prep::None,
        }
    }

    fn body(mut self, body: Value) -> Case {
        self.body = Some(body);
        self
    }

    fn owned(mut self) -> Case {
        self.owned = true;
        self
    }

    fn direct(mut self) -> Case {
        self.direct_room = true;
        self
    }

    fn prep(mut self, prep: Prep) -> Case {
        self.prep = prep;
        self
    }
}

/// Every case. The matrix fails for a route of the table without one here,
/// and for a case here whose route is not in the table.
pub(crate) fn cases(w: &World) -> Vec<Case> {
    use RouteMethod::{Delete, Get, Post, Put};
    let rt = &w.runtime;
    let room = &w.direct_room;
    let team = &w.team_room;
    let job = &w.lease.job_id;
    vec![
        Case::new(Get, "/healthz", "/healthz".into()),
        Case::new(Post, "/v1/register", "/v1/register".into())
            .body(json!({"name": "newcomer", "kind": "person", "publicKey": public_key()})),
        Case::new(Post, "/v1/agents", "/v1/agents".into())
            .body(json!({"name": "helper", "publicKey": public_key()})),
        Case::new(Get, "/v1/me", "/v1/me".into()),
        Case::new(
            Get,
            "/v1/identities/{number}",
            format!("/v1/identities/{}", w.asker.number),
        ),
        Case::new(Post, "/v1/tokens", "/v1/tokens".into()).body(json!({"scopes": ["read"]})),
        Case::new(Get, "/v1/tokens", "/v1/tokens".into()),
        Case::new(
            Delete,
            "/v1/tokens/{id}",
            format!("/v1/tokens/{}", w.spare_token_id),
        )
        .owned(),
        Case::new(Get, "/v1/contacts", "/v1/contacts".into()),
        Case::new(Get, "/v1/contacts/requests", "/v1/contacts/requests".into()),
        Case::new(
            Post,
            "/v1/contacts/requests",
            "/v1/contacts/requests".into(),
        )
        .body(json!({"number": w.stranger.number})),
        Case::new(
            Delete,
            "/v1/contacts/requests/{number}",
            format!("/v1/contacts/requests/{}", w.frank.number),
        )
        .owned(),
        Case::new(
            Post,
            "/v1/contacts/requests/{number}/accept",
            format!("/v1/contacts/requests/{}/accept", w.dave.number),
        )
        .body(json!({}))
        .owned(),
        Case::new(
            Post,
            "/v1/contacts/requests/{number}/decline",
            format!("/v1/contacts/requests/{}/decline", w.erin.number),
        )
        .body(json!({}))
        .owned(),
        Case::new(
            Delete,
            "/v1/contacts/{number}",
            format!("/v1/contacts/{}", w.gina.number),
        )
        .owned(),
        Case::new(
            Post,
            "/v1/contacts/{number}/block",
            format!("/v1/contacts/{}/block", w.asker.number),
        )
        .body(json!({})),
        Case::new(
            Delete,
            "/v1/contacts/{number}/block",
            format!("/v1/contacts/{}/block", w.asker.number),
        )
        .prep(Prep::BlockAsker),
        Case::new(Get, "/v1/rooms", "/v1/rooms".into()),
        Case::new(Post, "/v1/rooms", "/v1/rooms".into())
            .body(json!({"name": "new room", "members": []})),
        Case::new(Get, "/v1/rooms/{room}", format!("/v1/rooms/{room}")).direct(),
        Case::new(
            Post,
            "/v1/rooms/{room}/members",
            format!("/v1/rooms/{team}/members"),
        )
        .body(json!({"number": w.gina.number})),
        Case::new(
            Post,
            "/v1/rooms/{room}/leave",
            format!("/v1/rooms/{team}/leave"),
        )
        .body(json!({})),
        Case::new(
            Post,
            "/v1/rooms/{room}/ack",
            format!("/v1/rooms/{room}/ack"),
        )
        .body(json!({"seq": 1}))
        .direct(),
        Case::new(
            Get,
            "/v1/rooms/{room}/messages",
            format!("/v1/rooms/{room}/messages?limit=5"),
        )
        .direct(),
        Case::new(
            Get,
            "/v1/rooms/{room}/messages/{message}",
            format!("/v1/rooms/{room}/messages/{}", w.secret_message),
        )
        .direct(),
        Case::new(
            Get,
            "/v1/rooms/{room}/messages/{message}/thread",
            format!("/v1/rooms/{room}/messages/{}/thread", w.secret_message),
        )
        .direct(),
        Case::new(
            Get,
            "/v1/rooms/{room}/messages/{message}/delivery",
            format!("/v1/rooms/{room}/messages/{}/delivery", w.secret_message),
        )
        .direct(),
        Case::new(
            Delete,
            "/v1/rooms/{room}/messages/{message}/ask",
            format!("/v1/rooms/{room}/messages/{}/ask", w.agent_question),
        )
        .direct(),
        Case::new(Post, "/v1/messages", "/v1/messages".into())
            .body(json!({"roomId": room, "text": "hello"}))
            .direct(),
        Case::new(Get, "/v1/inbox", "/v1/inbox".into()),
        Case::new(
            Get,
            "/a2a/{number}/.well-known/agent-card.json",
            format!("/a2a/{}/.well-known/agent-card.json", w.other_agent.number),
        ),
        // Listing is the read-only method; each method's own checks (write
        // to ask or cancel, contacts, rooms) are tests/a2a.
        Case::new(
            Post,
            "/a2a/{number}",
            format!("/a2a/{}", w.other_agent.number),
        )
        .body(json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}})),
        Case::new(Get, "/v1/socket", "/v1/socket".into()),
        Case::new(Post, "/v1/runtimes", "/v1/runtimes".into())
            .body(json!({"name": "second", "from": "now"})),
        Case::new(Get, "/v1/runtimes", "/v1/runtimes".into()),
        Case::new(Get, "/v1/runtimes/{id}", format!("/v1/runtimes/{rt}")),
        Case::new(Delete, "/v1/runtimes/{id}", format!("/v1/runtimes/{rt}")).prep(Prep::ReleaseJob),
        Case::new(
            Post,
            "/v1/runtimes/{id}/configure",
            format!("/v1/runtimes/{rt}/configure"),
        )
        .body(json!({"version": 1, "policy": {"maxAttempts": 2}}))
        .prep(Prep::ReleaseJob),
        Case::new(
            Post,
            "/v1/runtimes/{id}/claim",
            format!("/v1/runtimes/{rt}/claim"),
        )
        .body(json!({})),
        Case::new(
            Post,
            "/v1/runtimes/{id}/jobs/{job}/heartbeat",
            format!("/v1/runtimes/{rt}/jobs/{job}/heartbeat"),
        )
        .body(w.lease_body()),
        Case::new(
            Post,
            "/v1/runtimes/{id}/jobs/{job}/finish",
            format!("/v1/runtimes/{rt}/jobs/{job}/finish"),
        )
        .body({
            let mut body = w.lease_body();
            body["result"] = json!({"reply": "done"});
            body
        }),
        Case::new(
            Post,
            "/v1/runtimes/{id}/finishes",
            format!("/v1/runtimes/{rt}/finishes"),
        )
        .body({
            let mut finish = w.lease_body();
            finish["jobId"] = json!(job);
            finish["result"] = json!({"reply": "done"});
            json!({"finishes": [finish]})
        }),
        Case::new(
            Post,
            "/v1/runtimes/{id}/jobs/{job}/release",
            format!("/v1/runtimes/{rt}/jobs/{job}/release"),
        )
        .body(w.lease_body()),
        Case::new(
            Post,
            "/v1/runtimes/{id}/jobs/{job}/retry",
            format!("/v1/runtimes/{rt}/jobs/{}/retry", w.dead_job),
        ),
        Case::new(
            Get,
            "/v1/runtimes/{id}/dead-letters",
            format!("/v1/runtimes/{rt}/dead-letters"),
        ),
        Case::new(
            Get,
            "/v1/runtimes/{id}/log",
            format!("/v1/runtimes/{rt}/log"),
        ),
        Case::new(
            Get,
            "/v1/runtimes/{id}/stats",
            format!("/v1/runtimes/{rt}/stats"),
        ),
        Case::new(
            Get,
            "/v1/runtimes/{id}/activity",
            format!("/v1/runtimes/{rt}/activity"),
        ),
        Case::new(
            Get,
            "/v1/runtimes/{id}/jobs",
            format!("/v1/runtimes/{rt}/jobs"),
        ),
        Case::new(
            Get,
            "/v1/runtimes/{id}/jobs/{job}",
            format!("/v1/runtimes/{rt}/jobs/{job}"),
        ),
        Case::new(
            Get,
            "/v1/runtimes/{id}/notes/{room}",
            format!("/v1/runtimes/{rt}/notes/{room}"),
        )
        .direct(),
        Case::new(
            Put,
            "/v1/runtimes/{id}/notes/{room}/{key}",
            format!("/v1/runtimes/{rt}/notes/{room}/plan"),
        )
        .body(json!({"version": 0, "text": "a new note"}))
        .direct(),
        Case::new(
            Get,
            "/v1/runtimes/{id}/socket",
            format!("/v1/runtimes/{rt}/socket"),
        ),
    ]
}
