//! One self-contained world per matrix run: an agent with a runtime that
//! holds a claimed job, a dead letter, a note and log content; its owner; a
//! contact; another agent; a stranger; and tokens that each lack one thing.
//! Every secret lives in the agent's direct room, so a leak is a string
//! search away.

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::{TestServer, User};

pub(crate) const SECRET_MESSAGE: &str = "secret-message: the plan is under the oak";
pub(crate) const SECRET_NOTE: &str = "secret-note: the customer prefers blue";
pub(crate) const SECRET_LOG: &str = "secret-log: upstream key rotated at dawn";
pub(crate) const SECRETS: [&str; 3] = [SECRET_MESSAGE, SECRET_NOTE, SECRET_LOG];

/// Tokens of one identity, each missing exactly one thing.
pub(crate) struct Tokens {
    pub(crate) lacking_read: String,
    pub(crate) lacking_write: String,
    pub(crate) lacking_contacts: String,
    /// All scopes, restricted to a room other than the one under test.
    pub(crate) restricted: String,
    /// All scopes, revoked (the agent's one claimed the job first).
    pub(crate) revoked: String,
}

/// A claimed job's lease.
pub(crate) struct Lease {
    pub(crate) job_id: String,
    pub(crate) owner: Value,
    pub(crate) version: Value,
}

pub(crate) struct World {
    /// The person that created `agent` through `POST /v1/agents`.
    pub(crate) owner: User,
    pub(crate) owner_tokens: Tokens,
    pub(crate) agent: User,
    pub(crate) agent_tokens: Tokens,
    /// The agent's contact; asked the secret questions.
    pub(crate) asker: User,
    /// Another agent identity with full scopes.
    pub(crate) other_agent: User,
    /// A person with no relation to anyone.
    pub(crate) stranger: User,
    /// Pending request dave → agent (accept), erin → agent (decline),
    /// agent → frank (withdraw); gina is a contact outside `team`.
    pub(crate) dave: User,
    pub(crate) erin: User,
    pub(crate) frank: User,
    pub(crate) gina: User,
    pub(crate) direct_room: String,
    /// A group of agent + asker (add member, leave).
    pub(crate) team_room: String,
    pub(crate) secret_message: String,
    /// A question the agent asked the asker (only its sender cancels it).
    pub(crate) agent_question: String,
    pub(crate) runtime: String,
    /// Claimed through `agent_tokens.revoked` before it was revoked.
    pub(crate) lease: Lease,
    pub(crate) dead_job: String,
    /// A read-only token of the agent that nothing revokes.
    pub(crate) spare_token_id: String,
}

async fn token(server: &TestServer, user: &User, scopes: Value, room: Option<&str>) -> Value {
    let mut body = json!({"scopes": scopes});
    if let Some(room) = room {
        body["roomIds"] = json!([room]);
    }
    server.post("/v1/tokens", &user.token, body).await.ok()
}

fn secret(token: &Value) -> String {
    token["secret"].as_str().expect("secret").to_owned()
}

async fn tokens(server: &TestServer, user: &User, elsewhere: &str) -> (Tokens, String) {
    let revoked = token(server, user, json!(["read", "write", "contacts"]), None).await;
    let tokens = Tokens {
        lacking_read: secret(&token(server, user, json!(["write", "contacts"]), None).await),
        lacking_write: secret(&token(server, user, json!(["read", "contacts"]), None).await),
        lacking_contacts: secret(&token(server, user, json!(["read", "write"]), None).await),
        restricted: secret(
            &token(
                server,
                user,
                json!(["read", "write", "contacts"]),
                Some(elsewhere),
            )
            .await,
        ),
        revoked: secret(&revoked),
    };
    (tokens, revoked["id"].as_str().expect("id").to_owned())
}

async fn group(server: &TestServer, creator: &User, name: &str, members: &[&User]) -> String {
    let numbers: Vec<&str> = members.iter().map(|m| m.number.as_str()).collect();
    server.create_room(creator, name, json!(numbers)).await.ok()["id"]
        .as_str()
        .expect("room id")
        .to_owned()
}

async fn ask(server: &TestServer, asker: &User, room: &str, text: &str) -> String {
    server
        .send(asker, json!({"roomId": room, "text": text, "ask": true}))
        .await["messageId"]
        .as_str()
        .expect("message id")
        .to_owned()
}

async fn claim_one(server: &TestServer, runtime: &str, token: &str) -> Lease {
    let claim = server
        .post(
            &format!("/v1/runtimes/{runtime}/claim"),
            token,
            json!({"maxJobs": 1}),
        )
        .await
        .ok();
    let job = &claim["jobs"][0];
    Lease {
        job_id: job["jobId"].as_str().expect("a claimed job").to_owned(),
        owner: job["owner"].clone(),
        version: job["version"].clone(),
    }
}

impl World {
    pub(crate) async fn new(server: &TestServer) -> World {
        let owner = server.register("owner", "person").await;
        let created = server.create_agent(&owner.token, "assistant").await.ok();
        let agent = User {
            id: created["identity"]["id"].as_str().expect("id").to_owned(),
            number: created["identity"]["number"]
                .as_str()
                .expect("number")
                .to_owned(),
            token: created["token"]["secret"]
                .as_str()
                .expect("secret")
                .to_owned(),
            token_id: created["token"]["id"].as_str().expect("id").to_owned(),
        };
        let asker = server.register("asker", "person").await;
        let other_agent = server.register("other agent", "agent").await;
        let stranger = server.register("stranger", "person").await;
        let dave = server.register("dave", "person").await;
        let erin = server.register("erin", "person").await;
        let frank = server.register("frank", "person").await;
        let gina = server.register("gina", "person").await;

        let direct_room = server.befriend(&asker, &agent).await;
        server.befriend(&gina, &agent).await;
        let owner_room = server.befriend(&asker, &owner).await;
        let team_room = group(server, &agent, "team", &[&asker]).await;
        let elsewhere = group(server, &agent, "elsewhere", &[&asker]).await;
        for (from, to) in [(&dave, &agent), (&erin, &agent), (&agent, &frank)] {
            server.ask_contact(from, to).await.ok();
        }

        let (agent_tokens, agent_revoked_id) = tokens(server, &agent, &elsewhere).await;
        let (owner_tokens, owner_revoked_id) = tokens(server, &owner, &owner_room).await;
        let spare_token_id = token(server, &agent, json!(["read"]), None).await["id"]
            .as_str()
            .expect("id")
            .to_owned();

        let runtime = server
            .post(
                "/v1/runtimes",
                &agent.token,
                json!({"name": "assistant", "from": "now",
                       "policy": {"maxAttempts": 1, "concurrency": 2}}),
            )
            .await
            .ok()["id"]
            .as_str()
            .expect("runtime id")
            .to_owned();
        // A failed attempt at max attempts: a dead letter whose log record
        // carries the handler's error text.
        let secret_message = ask(server, &asker, &direct_room, SECRET_MESSAGE).await;
        let agent_question = ask(server, &agent, &direct_room, "may I?").await;
        let dead = claim_one(server, &runtime, &agent.token).await;
        server
            .post(
                &format!("/v1/runtimes/{runtime}/jobs/{}/finish", dead.job_id),
                &agent.token,
                json!({"owner": dead.owner, "version": dead.version,
                       "result": {"error": SECRET_LOG}}),
            )
            .await
            .ok();
        // The job in flight, claimed by the token that is revoked below.
        ask(server, &asker, &direct_room, SECRET_MESSAGE).await;
        let lease = claim_one(server, &runtime, &agent_tokens.revoked).await;
        server
            .request(
                Method::PUT,
                &format!("/v1/runtimes/{runtime}/notes/{direct_room}/decision"),
                Some(&agent.token),
                Some(json!({"version": 0, "text": SECRET_NOTE,
                            "sourceMessageIds": [secret_message]})),
            )
            .await
            .ok();
        for (user, id) in [(&agent, &agent_revoked_id), (&owner, &owner_revoked_id)] {
            server
                .delete(&format!("/v1/tokens/{id}"), &user.token)
                .await
                .ok();
        }

        let world = World {
            owner,
            owner_tokens,
            agent,
            agent_tokens,
            asker,
            other_agent,
            stranger,
            dave,
            erin,
            frank,
            gina,
            direct_room,
            team_room,
            secret_message,
            agent_question,
            runtime,
            lease,
            dead_job: dead.job_id,
            spare_token_id,
        };
        world.assert_secrets_are_reachable(server).await;
        world
    }

    /// The matrix would be vacuous if the secrets were not there to leak:
    /// the agent's own full token sees every one of them.
    async fn assert_secrets_are_reachable(&self, server: &TestServer) {
        let token = &self.agent.token;
        let message = server
            .get(
                &format!(
                    "/v1/rooms/{}/messages/{}",
                    self.direct_room, self.secret_message
                ),
                token,
            )
            .await
            .ok();
        assert!(message.to_string().contains(SECRET_MESSAGE));
        let notes = server
            .get(
                &format!("/v1/runtimes/{}/notes/{}", self.runtime, self.direct_room),
                token,
            )
            .await
            .ok();
        assert!(notes.to_string().contains(SECRET_NOTE));
        let log = server
            .get(&format!("/v1/runtimes/{}/log", self.runtime), token)
            .await
            .ok();
        assert!(log.to_string().contains(SECRET_LOG));
        let dead = server
            .get(
                &format!("/v1/runtimes/{}/dead-letters", self.runtime),
                token,
            )
            .await
            .ok();
        assert_eq!(
            dead["jobs"][0]["jobId"].as_str(),
            Some(self.dead_job.as_str())
        );
    }

    /// Gives the job back, so configure and delete are not busy.
    pub(crate) async fn release_job(&self, server: &TestServer) {
        server
            .post(
                &format!(
                    "/v1/runtimes/{}/jobs/{}/release",
                    self.runtime, self.lease.job_id
                ),
                &self.agent.token,
                self.lease_body(),
            )
            .await
            .ok();
    }

    pub(crate) fn lease_body(&self) -> Value {
        json!({"owner": self.lease.owner, "version": self.lease.version})
    }

    /// The agent blocks the asker: the direct room ends for both.
    pub(crate) async fn block_asker(&self, server: &TestServer) {
        server.block(&self.agent, &self.asker).await.ok();
    }
}
