//! The permission matrix, generated from the router's own route table
//! (`relayger_api::ROUTE_TABLE`): every route × every actor (no token, a
//! blank, oversized or unknown token, a token revoked while its runtime held
//! a job, a token lacking a scope, a token restricted to another room, the
//! agent's owner, another agent, a stranger and, on the agent's direct room,
//! a blocked contact). The expected outcome comes from the access the table
//! declares; a denial is 401/403/404 with nothing but the error envelope and
//! no secret (message, note or log text) anywhere in the body, and stores
//! nothing. The right token gets a 2xx on every route, so the matrix is not
//! vacuous. A route added to the router without a case here fails the run.
//!
//! There is no administrator role in the API: server operators reach data
//! out of band, through the database. `no_identity_is_an_administrator`
//! pins that no token of any identity (including a person who owns agents)
//! reads another identity's runtimes, notes or log.

use crate::common;

mod actors;
mod cases;
mod world;

use std::time::Duration;

use actors::{ACTORS, Expect, assert_denied, assert_no_secrets, assert_probe};
use cases::{Case, Prep, cases};
use common::TestServer;
use relayger_api::{ROUTE_TABLE, RouteSpec};
use relayger_core::wire::IdentityKind;
use reqwest::Method;
use serde_json::json;
use world::{SECRET_LOG, SECRET_NOTE, World};

/// The routes are split over this many tests so they run in parallel, each
/// on its own server and database.
const PARTS: usize = 4;

/// Tables whose rows a denied request must leave exactly as they were.
const STATE_TABLES: [&str; 16] = [
    "identities",
    "tokens",
    "rooms",
    "room_members",
    "contact_requests",
    "contacts",
    "blocks",
    "messages",
    "mailbox_cursors",
    "runtimes",
    "runtime_checkpoints",
    "jobs",
    "attempts",
    "notes",
    "runtime_log",
    "question_cancels",
];

async fn snapshot(server: &TestServer) -> Vec<String> {
    use diesel::sql_types::Text;
    use diesel_async::RunQueryDsl;
    #[derive(diesel::QueryableByName)]
    struct Digest {
        #[diesel(sql_type = Text)]
        d: String,
    }
    let mut conn = server.raw_connection().await;
    let mut digests = Vec::new();
    for table in STATE_TABLES {
        let row: Digest = diesel::sql_query(format!(
            "SELECT coalesce(md5(string_agg(t::text, '|' ORDER BY t::text)), '') AS d FROM {table} t"
        ))
        .get_result(&mut conn)
        .await
        .expect("digest");
        digests.push(format!("{table}:{}", row.d));
    }
    digests
}

fn case_for(world: &World, spec: &RouteSpec) -> Case {
    let mut found: Vec<Case> = cases(world)
        .into_iter()
        .filter(|c| c.method == spec.method && c.template == spec.path)
        .collect();
    assert_eq!(
        found.len(),
        1,
        "{} {} needs exactly one case in tests/permissions/cases.rs",
        spec.method.as_str(),
        spec.path
    );
    found.remove(0)
}

async fn prepare(server: &TestServer, world: &World, case: &Case) {
    match case.prep {
        Prep::None => {}
        Prep::ReleaseJob => world.release_job(server).await,
        Prep::BlockAsker => world.block_asker(server).await,
    }
}

#[derive(Debug, Default)]
struct Counts {
    denied: usize,
    probed: usize,
    allowed: usize,
    blocked: usize,
}

async fn check_route(server: &TestServer, spec: &RouteSpec, counts: &mut Counts) {
    let name = format!("{} {}", spec.method.as_str(), spec.path);

    // Denials, on a world of their own; none of them may store anything.
    let world = World::new(server).await;
    let case = case_for(&world, spec);
    prepare(server, &world, &case).await;
    let before = snapshot(server).await;
    for actor in ACTORS {
        if let Expect::Denied { status, code } = actors::expect(actor, spec.access, &case) {
            let token = actors::token(actor, spec.access, &world);
            let outcome = actors::send(server, &case, spec.socket, token.as_deref()).await;
            assert_denied(&outcome, status, code, &format!("{name} as {actor:?}"));
            counts.denied += 1;
        }
    }
    assert_eq!(
        snapshot(server).await,
        before,
        "{name}: a denied request changed stored state"
    );

    // The right token succeeds (and so the denials above meant something).
    let right = spec.access.needs_token().then(|| {
        actors::token(
            actors::Actor::Identity(actors::principal(spec.access)),
            spec.access,
            &world,
        )
        .expect("token")
    });
    let outcome = actors::send(server, &case, spec.socket, right.as_deref()).await;
    let expected_success = if spec.socket {
        outcome.status == 101
    } else {
        (200..300).contains(&outcome.status)
    };
    assert!(
        expected_success,
        "{name} with the right token: {} {}",
        outcome.status, outcome.body
    );
    counts.allowed += 1;

    // Actors acting on their own things, then the blocked contact, on a
    // second world so the success above cannot hide anything.
    let probes: Vec<actors::Actor> = ACTORS
        .into_iter()
        .filter(|a| actors::expect(*a, spec.access, &case) == Expect::Probe)
        .collect();
    if probes.is_empty() && !case.direct_room {
        return;
    }
    let world = World::new(server).await;
    let case = case_for(&world, spec);
    prepare(server, &world, &case).await;
    for actor in probes {
        let token = actors::token(actor, spec.access, &world);
        let outcome = actors::send(server, &case, spec.socket, token.as_deref()).await;
        assert_probe(&outcome, &format!("{name} as {actor:?}"));
        // What an allowed actor got, for the record (`--no-capture`).
        println!("probe {name} as {actor:?}: {}", outcome.status);
        counts.probed += 1;
    }
    if case.direct_room {
        // A block ends the direct room for both sides: the blocked contact
        // and the agent itself (its notes of that room included).
        world.block_asker(server).await;
        for (who, kind, token) in [
            (
                "the blocked contact",
                IdentityKind::Person,
                &world.asker.token,
            ),
            (
                "the blocking agent",
                IdentityKind::Agent,
                &world.agent.token,
            ),
        ] {
            let Expect::Denied { status, code } = actors::outsider(kind, spec.access, &case) else {
                panic!("{name}: a direct-room route must deny {who}");
            };
            let outcome = actors::send(server, &case, spec.socket, Some(token)).await;
            assert_denied(&outcome, status, code, &format!("{name} by {who}"));
            counts.blocked += 1;
        }
    }
}

async fn matrix_part(part: usize) {
    let server = TestServer::start().await;
    let mut counts = Counts::default();
    let mut routes = 0;
    for spec in ROUTE_TABLE.iter().skip(part).step_by(PARTS) {
        check_route(&server, spec, &mut counts).await;
        routes += 1;
    }
    assert!(routes > 0);
    // Printed for the record (`cargo nextest run --no-capture`).
    println!("part {part}: {routes} routes, {counts:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn matrix_part_1() {
    matrix_part(0).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn matrix_part_2() {
    matrix_part(1).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn matrix_part_3() {
    matrix_part(2).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn matrix_part_4() {
    matrix_part(3).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn every_route_has_one_case_and_every_case_a_route() {
    let server = TestServer::start().await;
    let world = World::new(&server).await;
    let cases = cases(&world);
    for spec in ROUTE_TABLE {
        case_for(&world, spec);
    }
    for case in &cases {
        assert!(
            ROUTE_TABLE
                .iter()
                .any(|spec| spec.method == case.method && spec.path == case.template),
            "a case for {} {}, which the router does not serve",
            case.method.as_str(),
            case.template
        );
    }
    assert_eq!(cases.len(), ROUTE_TABLE.len());
    // Both sockets are in the table.
    let sockets: Vec<&str> = ROUTE_TABLE
        .iter()
        .filter(|s| s.socket)
        .map(|s| s.path)
        .collect();
    assert_eq!(sockets, ["/v1/socket", "/v1/runtimes/{id}/socket"]);
}

/// Revoked while its runtime holds a claimed job: heartbeat, finish,
/// release, claim and a new socket are refused with 401, and the sockets
/// it holds close. The job itself is the agent's, not the token's: another
/// valid token of the agent can still finish it.
#[tokio::test(flavor = "multi_thread")]
async fn a_token_revoked_mid_job_loses_the_job_and_its_open_sockets() {
    let server = TestServer::start().await;
    let w = World::new(&server).await;
    let worker = server
        .post(
            "/v1/tokens",
            &w.agent.token,
            json!({"scopes": ["read", "write"]}),
        )
        .await
        .ok();
    let secret = worker["secret"].as_str().expect("secret").to_owned();
    server
        .send(
            &w.asker,
            json!({"roomId": w.direct_room, "text": "one more question", "ask": true}),
        )
        .await;
    let claim = server
        .post(
            &format!("/v1/runtimes/{}/claim", w.runtime),
            &secret,
            json!({}),
        )
        .await
        .ok();
    let job = &claim["jobs"][0];
    let job_path = format!(
        "/v1/runtimes/{}/jobs/{}",
        w.runtime,
        job["jobId"].as_str().expect("a claimed job")
    );
    let lease = json!({"owner": job["owner"], "version": job["version"]});
    let runtime_socket = format!("/v1/runtimes/{}/socket", w.runtime);
    let mut sockets = vec![
        server
            .ws_connect(&runtime_socket, Some(&secret))
            .await
            .expect("runtime socket"),
        server
            .ws_connect("/v1/socket", Some(&secret))
            .await
            .expect("identity socket"),
    ];
    server
        .delete(
            &format!("/v1/tokens/{}", worker["id"].as_str().expect("id")),
            &w.agent.token,
        )
        .await
        .ok();
    for socket in &mut sockets {
        assert_eq!(
            common::next_frame(socket, Duration::from_secs(10)).await,
            None,
            "an open socket of the revoked token closes"
        );
    }
    let messages = server.messages_in_rooms_of(&w.agent).await;
    let mut finish = lease.clone();
    finish["result"] = json!({"reply": "answered after revocation"});
    for (path, body) in [
        (format!("{job_path}/heartbeat"), lease.clone()),
        (format!("{job_path}/finish"), finish.clone()),
        (format!("{job_path}/release"), lease.clone()),
        (format!("/v1/runtimes/{}/claim", w.runtime), json!({})),
    ] {
        server
            .post(&path, &secret, body)
            .await
            .err(401, "unauthorized");
    }
    for path in [runtime_socket.as_str(), "/v1/socket"] {
        let refused = server
            .ws_connect(path, Some(&secret))
            .await
            .expect_err("no upgrade for a revoked token");
        assert_eq!(refused.status, 401, "{path}: {}", refused.body);
    }
    assert_eq!(
        server.messages_in_rooms_of(&w.agent).await,
        messages,
        "no reply written"
    );
    // The lease is still the agent's: its other token finishes the job.
    server
        .post(&format!("{job_path}/heartbeat"), &w.agent.token, lease)
        .await
        .ok();
    server
        .post(&format!("{job_path}/finish"), &w.agent.token, finish)
        .await
        .ok();
    assert_eq!(server.messages_in_rooms_of(&w.agent).await, messages + 1);
}

/// Notes belong to agent + runtime + room: every token of the agent reaches
/// the same ones, whichever token wrote them.
#[tokio::test(flavor = "multi_thread")]
async fn a_second_token_of_the_agent_reaches_the_same_notes() {
    let server = TestServer::start().await;
    let w = World::new(&server).await;
    let notes_path = format!("/v1/runtimes/{}/notes/{}", w.runtime, w.direct_room);
    let new_token = async |scopes: serde_json::Value, rooms: Option<&str>| {
        let mut body = json!({"scopes": scopes});
        if let Some(room) = rooms {
            body["roomIds"] = json!([room]);
        }
        server.post("/v1/tokens", &w.agent.token, body).await.ok()["secret"]
            .as_str()
            .expect("secret")
            .to_owned()
    };
    let reader = new_token(json!(["read"]), None).await;
    let room_reader = new_token(json!(["read"]), Some(&w.direct_room)).await;
    for token in [&reader, &room_reader] {
        let notes = server.get(&notes_path, token).await.ok();
        assert_eq!(notes["notes"][0]["key"], "decision");
        assert_eq!(notes["notes"][0]["text"], SECRET_NOTE);
    }
    // A note written through a second token is the first token's note too.
    let writer = new_token(json!(["read", "write"]), None).await;
    server
        .request(
            Method::PUT,
            &format!("{notes_path}/decision"),
            Some(&writer),
            Some(json!({"version": 1, "text": "revised by the second token"})),
        )
        .await
        .ok();
    let notes = server.get(&notes_path, &w.agent.token).await.ok();
    assert_eq!(notes["notes"][0]["text"], "revised by the second token");
    assert_eq!(notes["notes"][0]["version"], 2);
}

/// No administrator role: no identity but the agent reads the agent's
/// runtimes, notes, log, stats, activity, jobs or dead letters, or opens its runtime socket,
/// not even the person that owns the agent. Operators go to the database.
#[tokio::test(flavor = "multi_thread")]
async fn no_identity_is_an_administrator() {
    let server = TestServer::start().await;
    let w = World::new(&server).await;
    let rt = &w.runtime;
    let reads = [
        format!("/v1/runtimes/{rt}"),
        format!("/v1/runtimes/{rt}/log"),
        format!("/v1/runtimes/{rt}/stats"),
        format!("/v1/runtimes/{rt}/dead-letters"),
        format!("/v1/runtimes/{rt}/activity"),
        format!("/v1/runtimes/{rt}/jobs"),
        format!("/v1/runtimes/{rt}/jobs/{}", w.dead_job),
        format!("/v1/runtimes/{rt}/notes/{}", w.direct_room),
    ];
    let others = [
        ("the owner", &w.owner),
        ("another agent", &w.other_agent),
        ("the asker", &w.asker),
        ("a stranger", &w.stranger),
        ("a contact", &w.gina),
    ];
    for (who, user) in others {
        for path in &reads {
            let reply = server.get(path, &user.token).await;
            reply.err(404, "not_found");
            let outcome = actors::Outcome {
                status: reply.status.as_u16(),
                body: reply.body.to_string(),
            };
            assert_no_secrets(&outcome, &format!("{path} by {who}"));
        }
        let list = server.get("/v1/runtimes", &user.token).await.ok();
        assert!(!list.to_string().contains(rt.as_str()), "{who} lists it");
        let refused = server
            .ws_connect(&format!("/v1/runtimes/{rt}/socket"), Some(&user.token))
            .await
            .expect_err("no socket on another identity's runtime");
        assert_eq!(refused.status, 404, "{who}: {}", refused.body);
    }
}

/// The log and dead letters show only records of rooms the agent can still
/// reach: once the contact behind the direct room ends, the handler's error
/// text about that room is gone with the room's notes. Records without a
/// room stay.
#[tokio::test(flavor = "multi_thread")]
async fn once_a_contact_ends_its_rooms_log_records_and_dead_letters_are_hidden() {
    let server = TestServer::start().await;
    let w = World::new(&server).await;
    let log_path = format!("/v1/runtimes/{}/log", w.runtime);
    let dead_path = format!("/v1/runtimes/{}/dead-letters", w.runtime);
    w.block_asker(&server).await;
    let log = server.get(&log_path, &w.agent.token).await.ok();
    assert!(!log.to_string().contains(SECRET_LOG), "{log}");
    let records = log["records"].as_array().expect("records");
    assert!(
        records.iter().all(|r| r["conversationId"].is_null()),
        "{log}"
    );
    assert!(records.iter().any(|r| r["kind"] == "registered"), "{log}");
    let dead = server.get(&dead_path, &w.agent.token).await.ok();
    assert_eq!(dead["jobs"], json!([]));
    // Unblocking does not reopen the room by itself; a new acceptance does.
    server
        .delete(
            &format!("/v1/contacts/{}/block", w.asker.number),
            &w.agent.token,
        )
        .await
        .ok();
    server.befriend(&w.asker, &w.agent).await;
    let log = server.get(&log_path, &w.agent.token).await.ok();
    assert!(log.to_string().contains(SECRET_LOG), "{log}");
}

#[tokio::test(flavor = "multi_thread")]
async fn tokens_never_exceed_their_creator() {
    let (server, [alice]) = TestServer::with_users([("alice", "agent")]).await;
    let read_only = server
        .post("/v1/tokens", &alice.token, json!({"scopes": ["read"]}))
        .await
        .ok();
    let read_only = read_only["secret"].as_str().expect("secret");
    server
        .post(
            "/v1/tokens",
            read_only,
            json!({"scopes": ["read", "write"]}),
        )
        .await
        .err(403, "forbidden");
    server
        .post("/v1/tokens", &alice.token, json!({"scopes": []}))
        .await
        .err(400, "invalid_argument");
    server
        .post("/v1/tokens", &alice.token, json!({"scopes": ["admin"]}))
        .await
        .err(400, "invalid_json");
    // Restricting to a room the identity is not in is refused.
    server
        .post(
            "/v1/tokens",
            &alice.token,
            json!({"scopes": ["read"], "roomIds": [uuid::Uuid::now_v7()]}),
        )
        .await
        .err(404, "not_found");
    // Revoking twice keeps the first revocation time.
    let spare = server
        .post("/v1/tokens", &alice.token, json!({"scopes": ["read"]}))
        .await
        .ok();
    let spare_path = format!("/v1/tokens/{}", spare["id"].as_str().expect("id"));
    let first = server.delete(&spare_path, &alice.token).await.ok();
    assert!(first["revokedAt"].is_string());
    let again = server.delete(&spare_path, &alice.token).await.ok();
    assert_eq!(again["revokedAt"], first["revokedAt"]);
    server
        .delete(
            &format!("/v1/tokens/{}", uuid::Uuid::now_v7()),
            &alice.token,
        )
        .await
        .err(404, "not_found");
    // Secrets are never listed.
    let list = server.get("/v1/tokens", &alice.token).await.ok();
    assert!(!list.to_string().contains("rlg_"));
    assert!(
        list["tokens"]
            .as_array()
            .expect("tokens")
            .iter()
            .any(|t| t["current"] == true)
    );
    // (That only hashes are stored is relayger-store's `tokens` test.)
}
