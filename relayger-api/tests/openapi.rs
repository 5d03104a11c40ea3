//! The OpenAPI document: every route of `ROUTE_TABLE` with its scopes and
//! the error envelope, no dangling reference, served as committed.
//!
//! After changing a route or a wire type, rewrite `docs/openapi.json` with
//! `RELAYGER_UPDATE_OPENAPI=1 cargo test -p relayger-api --test tests openapi::`.

use crate::common;

use std::collections::BTreeSet;
use std::path::PathBuf;

use common::TestServer;
use relayger_api::openapi::{BEARER, document_json};
use relayger_api::{Access, ROUTE_TABLE};
use serde_json::Value;

fn committed_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/openapi.json")
}

fn document() -> Value {
    serde_json::from_str(document_json()).expect("the document is JSON")
}

#[test]
fn the_committed_document_is_the_generated_one() {
    let path = committed_path();
    if std::env::var_os("RELAYGER_UPDATE_OPENAPI").is_some() {
        std::fs::write(&path, document_json()).expect("write docs/openapi.json");
    }
    let committed = std::fs::read_to_string(&path).expect("docs/openapi.json exists");
    assert!(
        committed == document_json(),
        "docs/openapi.json is stale: run RELAYGER_UPDATE_OPENAPI=1 cargo test -p relayger-api --test openapi"
    );
}

#[test]
fn every_route_is_documented_with_its_scopes_and_the_error_envelope() {
    let doc = document();
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(
        doc["components"]["securitySchemes"][BEARER]["scheme"],
        "bearer"
    );
    let error = &doc["components"]["responses"]["Error"];
    assert_eq!(
        error["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/ErrorEnvelope"
    );
    let envelope = &doc["components"]["schemas"]["ErrorEnvelope"];
    assert_eq!(
        envelope["required"],
        serde_json::json!(["error"]),
        "{envelope}"
    );

    let mut documented = 0;
    for spec in ROUTE_TABLE {
        let method = spec.method.as_str().to_ascii_lowercase();
        let op = &doc["paths"][spec.path][&method];
        assert!(op.is_object(), "{method} {} is missing", spec.path);
        assert_eq!(
            op["responses"]["default"]["$ref"], "#/components/responses/Error",
            "{method} {}",
            spec.path
        );
        let scopes: Vec<&str> = spec.access.scopes().iter().map(|s| s.as_str()).collect();
        if spec.access == Access::Public {
            assert!(op.get("security").is_none(), "{method} {}", spec.path);
        } else {
            assert_eq!(
                op["security"],
                serde_json::json!([{ BEARER: scopes }]),
                "{method} {}",
                spec.path
            );
        }
        assert_eq!(op["x-relayger-access"], format!("{:?}", spec.access));
        let success: Vec<&String> = op["responses"]
            .as_object()
            .expect("responses")
            .keys()
            .filter(|status| status.as_str() != "default")
            .collect();
        assert!(
            success.iter().all(|status| status.starts_with(['1', '2'])) && !success.is_empty(),
            "{method} {}: {success:?}",
            spec.path
        );
        for part in spec.path.split('/') {
            if let Some(name) = part.strip_prefix('{').and_then(|p| p.strip_suffix('}')) {
                let declared = op["parameters"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|p| p["name"] == name && p["in"] == "path" && p["required"] == true);
                assert!(declared, "{method} {}: parameter {name}", spec.path);
            }
        }
        documented += 1;
    }
    let operations: usize = doc["paths"]
        .as_object()
        .expect("paths")
        .values()
        .map(|item| item.as_object().map_or(0, |ops| ops.len()))
        .sum();
    assert_eq!(operations, documented, "nothing outside ROUTE_TABLE");
}

#[test]
fn every_reference_resolves() {
    let doc = document();
    let mut refs = BTreeSet::new();
    collect_refs(&doc, &mut refs);
    assert!(!refs.is_empty());
    for reference in refs {
        let pointer = reference.strip_prefix('#').expect("local reference");
        assert!(doc.pointer(pointer).is_some(), "dangling {reference}");
    }
}

fn collect_refs(value: &Value, refs: &mut BTreeSet<String>) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(target)) = map.get("$ref") {
                refs.insert(target.clone());
            }
            map.values().for_each(|v| collect_refs(v, refs));
        }
        Value::Array(items) => items.iter().for_each(|v| collect_refs(v, refs)),
        _ => {}
    }
}

#[tokio::test]
async fn the_server_serves_the_document_without_a_token() {
    let server = TestServer::start().await;
    let response = reqwest::get(format!("{}/v1/openapi.json", server.base_url))
        .await
        .expect("get");
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(response.headers()["content-type"], "application/json");
    assert_eq!(response.text().await.expect("body"), document_json());
}
