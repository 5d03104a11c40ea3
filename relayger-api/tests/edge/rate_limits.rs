//! Per-token, per-address and per-identity rate limits.

use super::*;

/// One token over its rate gets 429 `rate_limited` with `Retry-After`
/// while another token is served; registrations from one address are
/// limited the same way; refused requests store nothing.
#[tokio::test(flavor = "multi_thread")]
async fn one_token_or_address_over_its_rate_is_refused_and_others_are_served() {
    let server = TestServer::start_config(ApiConfig {
        token_rate: Some(RateLimit {
            per_second: 1,
            burst: 5,
        }),
        address_rate: Some(RateLimit {
            per_second: 1,
            burst: 3,
        }),
        ..ApiConfig::default()
    })
    .await;
    let alice = server.register("alice", "person").await;
    let bob = server.register("bob", "person").await;
    let mut refused = None;
    for _ in 0..20 {
        let reply = server.get("/v1/me", &alice.token).await;
        if reply.status == 429 {
            refused = Some(reply);
            break;
        }
        reply.ok();
    }
    let refused = refused.expect("alice's token is limited");
    refused.err(429, "rate_limited");
    assert!(refused.headers.contains_key("retry-after"));
    server.get("/v1/me", &bob.token).await.ok();

    let identities = server.count("identities").await;
    let mut registered = 0;
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
        reply.ok();
        registered += 1;
    }
    assert!(limited, "registrations from one address are limited");
    assert_eq!(server.count("identities").await, identities + registered);
    // `/healthz` is never limited.
    for _ in 0..10 {
        let health = reqwest::get(format!("{}/healthz", server.base_url))
            .await
            .expect("healthz");
        assert_eq!(health.status(), 200);
    }
}

/// Looking identities up by number is rate-limited per calling identity
/// (all its tokens together), so numbers cannot be walked quickly; another
/// identity is not affected.
#[tokio::test(flavor = "multi_thread")]
async fn identity_lookups_by_number_are_limited_per_identity() {
    let server = TestServer::start_config(ApiConfig {
        lookup_rate: Some(RateLimit {
            per_second: 1,
            burst: 3,
        }),
        ..ApiConfig::default()
    })
    .await;
    let alice = server.register("alice", "person").await;
    let bob = server.register("bob", "person").await;
    let second = new_token(&server, &alice, json!({"scopes": ["read"]})).await;
    let lookup = format!("/v1/identities/{}", bob.number);
    let mut answered = 0;
    let mut refused = None;
    for _ in 0..20 {
        let reply = server.get(&lookup, &alice.token).await;
        if reply.status == 429 {
            refused = Some(reply);
            break;
        }
        assert_eq!(reply.ok()["number"], bob.number.as_str());
        answered += 1;
    }
    refused
        .expect("alice's lookups are limited")
        .err(429, "rate_limited");
    assert!(answered >= 3, "the burst is served: {answered}");
    server
        .get(&lookup, secret(&second))
        .await
        .err(429, "rate_limited");
    server
        .get(&format!("/v1/identities/{}", alice.number), &bob.token)
        .await
        .ok();
}
