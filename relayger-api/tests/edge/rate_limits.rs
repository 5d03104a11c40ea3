//! Per-token, per-address and per-identity rate limits.

use super::*;

/// A limit of one request a second after a burst of `burst`.
fn burst_of(burst: u32) -> Option<RateLimit> {
    Some(RateLimit {
        per_second: 1,
        burst,
    })
}

/// Tokens a bucket of [`burst_of`] has gained back since `started` (one a
/// second, and one for the second under way).
fn refills_since(started: Instant) -> usize {
    started.elapsed().as_secs() as usize + 1
}

/// GETs `path` with `token` up to 20 times, until one is refused with 429:
/// the bodies served before it, and the refusal if one came.
async fn get_until_limited(
    server: &TestServer,
    path: &str,
    token: &str,
) -> (Vec<Value>, Option<common::Reply>) {
    let mut served = Vec::new();
    for _ in 0..20 {
        let reply = server.get(path, token).await;
        if reply.status == 429 {
            return (served, Some(reply));
        }
        served.push(reply.ok());
    }
    (served, None)
}

/// One token over its rate gets 429 `rate_limited` with `Retry-After`
/// while another token is served; registrations from one address are
/// limited the same way; refused requests store nothing.
#[tokio::test(flavor = "multi_thread")]
async fn one_token_or_address_over_its_rate_is_refused_and_others_are_served() {
    let server = TestServer::start_config(ApiConfig {
        token_rate: burst_of(5),
        address_rate: burst_of(3),
        ..ApiConfig::default()
    })
    .await;
    let [alice, bob] = server
        .register_all([("alice", "person"), ("bob", "person")])
        .await;
    let (_, refused) = get_until_limited(&server, "/v1/me", &alice.token).await;
    let refused = refused.expect("alice's token is limited");
    refused.err(429, "rate_limited");
    assert!(refused.headers.contains_key("retry-after"));
    server.get("/v1/me", &bob.token).await.ok();

    // Bob is the newest identity: the next number is free.
    let mut newest = bob.number.clone();
    assert!(
        !server
            .number_taken(&bob.token, &common::next_number(&newest))
            .await
    );
    let mut limited = false;
    for i in 0..20 {
        let reply = server
            .request(
                Method::POST,
                "/v1/register",
                None,
                Some(json!({"name": format!("n{i}"), "kind": "person", "publicKey": common::public_key()})),
            )
            .await;
        if reply.status == 429 {
            reply.err(429, "rate_limited");
            limited = true;
            break;
        }
        let served = reply.ok();
        // Each served registration stored one identity, the next in line.
        let number = served["identity"]["number"].as_str().expect("number");
        assert_eq!(number, common::next_number(&newest), "{served}");
        newest = number.to_owned();
    }
    assert!(limited, "registrations from one address are limited");
    // The refused one stored nothing: the newest served one is the last.
    assert!(
        !server
            .number_taken(&bob.token, &common::next_number(&newest))
            .await
    );
    // `/healthz` is never limited.
    for _ in 0..10 {
        let health = reqwest::get(format!("{}/healthz", server.base_url))
            .await
            .expect("healthz");
        assert_eq!(health.status(), 200);
    }
}

/// Looking identities up by number is rate-limited per person (all its
/// tokens and all its agents together: creating agents does not multiply
/// the allowance, issue #38 item 3), so numbers cannot be walked quickly;
/// another person is not affected.
#[tokio::test(flavor = "multi_thread")]
async fn identity_lookups_by_number_are_limited_per_person_across_tokens_and_agents() {
    let server = TestServer::start_config(ApiConfig {
        lookup_rate: burst_of(3),
        ..ApiConfig::default()
    })
    .await;
    let [alice, bob] = server
        .register_all([("alice", "person"), ("bob", "person")])
        .await;
    let second = new_token(&server, &alice, json!({"scopes": ["read"]})).await;
    let mut agents = Vec::new();
    for name in ["helper-1", "helper-2"] {
        let created = server.create_agent(&alice.token, name).await.ok();
        agents.push(
            created["token"]["secret"]
                .as_str()
                .expect("secret")
                .to_owned(),
        );
    }
    let lookup = format!("/v1/identities/{}", bob.number);
    let (served, refused) = get_until_limited(&server, &lookup, &alice.token).await;
    for body in &served {
        assert_eq!(body["number"], bob.number.as_str());
    }
    let answered = served.len();
    refused
        .expect("alice's lookups are limited")
        .err(429, "rate_limited");
    assert!(answered >= 3, "the burst is served: {answered}");
    server
        .get(&lookup, secret(&second))
        .await
        .err(429, "rate_limited");
    for agent in &agents {
        server.get(&lookup, agent).await.err(429, "rate_limited");
    }
    server
        .get(&format!("/v1/identities/{}", alice.number), &bob.token)
        .await
        .ok();
}

/// Registration counts against the address whatever headers it carries: a
/// made-up `Authorization: Bearer` on each registration does not give it a
/// fresh bucket (issue #38, item 2). Refused ones store nothing.
#[tokio::test(flavor = "multi_thread")]
async fn registrations_with_made_up_bearer_headers_count_against_the_address() {
    let server = TestServer::start_config(ApiConfig {
        address_rate: burst_of(5),
        ..ApiConfig::default()
    })
    .await;
    let mut served = 0;
    let mut refused = 0;
    let started = Instant::now();
    for i in 0..20 {
        let junk = format!("made-up-token-{i}-{}", uuid::Uuid::new_v4());
        let reply = server
            .request(
                Method::POST,
                "/v1/register",
                Some(&junk),
                Some(json!({"name": format!("n{i}"), "kind": "person", "publicKey": common::public_key()})),
            )
            .await;
        if reply.status == 429 {
            reply.err(429, "rate_limited");
            refused += 1;
        } else {
            assert_eq!(reply.status, 201, "{:?}", reply.body);
            served += 1;
        }
    }
    println!("20 registrations with a made-up bearer each: {served} served, {refused} refused");
    let allowed = 5 + refills_since(started);
    assert!(
        served <= allowed,
        "the burst of 5 and a refill a second at most ({allowed}): {served}"
    );
    assert_eq!(served + refused, 20);
}

/// An unknown token counts against its address: after the address's burst
/// of unknown tokens, the next ones are refused 429 `rate_limited` before
/// any lookup, while a token the server knows is still served from that
/// address (issue #38, item 2).
#[tokio::test(flavor = "multi_thread")]
async fn unknown_tokens_count_against_their_address() {
    let server = TestServer::start_config(ApiConfig {
        address_rate: burst_of(5),
        ..ApiConfig::default()
    })
    .await;
    let alice = server.register("alice", "person").await;
    server.get("/v1/me", &alice.token).await.ok();
    let (mut unauthorized, mut limited) = (0, 0);
    let started = Instant::now();
    for i in 0..20 {
        let junk = format!("made-up-token-{i}-{}", uuid::Uuid::new_v4());
        let reply = server.get("/v1/me", &junk).await;
        match reply.status.as_u16() {
            401 => {
                reply.err(401, "unauthorized");
                unauthorized += 1;
            }
            _ => {
                reply.err(429, "rate_limited");
                assert!(reply.headers.contains_key("retry-after"));
                limited += 1;
            }
        }
    }
    println!("20 made-up tokens from one address: {unauthorized} × 401, {limited} × 429");
    let allowed = 4 + refills_since(started);
    assert!(
        unauthorized <= allowed,
        "the address's burst less alice's registration, and a refill a second ({allowed}): {unauthorized}"
    );
    assert_eq!(unauthorized + limited, 20);
    // A malformed (oversized) token counts the same way.
    let oversized = "x".repeat(300);
    server
        .get("/v1/me", &oversized)
        .await
        .err(429, "rate_limited");
    // Alice's token is known: served from the same address meanwhile.
    let me = server.get("/v1/me", &alice.token).await.ok();
    assert_eq!(me["number"], alice.number.as_str());
}

/// A person owns at most `max_agents_per_person` agents: of 6 concurrent
/// creations with a cap of 2, exactly 2 are created and the others are 409
/// `conflict`, storing nothing; another person still creates hers
/// (issue #38, item 3).
#[tokio::test(flavor = "multi_thread")]
async fn a_person_owns_at_most_the_servers_cap_of_agents() {
    let server = TestServer::start_config(ApiConfig {
        max_agents_per_person: 2,
        ..ApiConfig::default()
    })
    .await;
    let [alice, bob] = server
        .register_all([("alice", "person"), ("bob", "person")])
        .await;
    let mut creating = Vec::new();
    for i in 0..6 {
        let (base, token) = (server.base_url.clone(), alice.token.clone());
        creating.push(tokio::spawn(async move {
            let response = reqwest::Client::new()
                .post(format!("{base}/v1/agents"))
                .bearer_auth(token)
                .json(&json!({"name": format!("helper-{i}"), "publicKey": common::public_key()}))
                .send()
                .await
                .expect("request");
            let status = response.status().as_u16();
            let body: Value = response.json().await.expect("JSON");
            (status, body)
        }));
    }
    let mut numbers = Vec::new();
    let mut refused = 0;
    for task in creating {
        let (status, body) = task.await.expect("join");
        match status {
            201 => numbers.push(
                body["identity"]["number"]
                    .as_str()
                    .expect("number")
                    .to_owned(),
            ),
            _ => {
                assert_eq!(status, 409, "{body}");
                assert_eq!(body["error"]["code"], "conflict", "{body}");
                refused += 1;
            }
        }
    }
    assert_eq!((numbers.len(), refused), (2, 4));
    // The refused ones stored nothing: no identity past the two created.
    let newest = numbers.iter().max().expect("two created");
    assert!(
        !server
            .number_taken(&bob.token, &common::next_number(newest))
            .await
    );
    server.create_agent(&bob.token, "bobs-helper").await.ok();
}
