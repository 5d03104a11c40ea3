//! Property tests for the parsers and the thread-budget packing: the same
//! invariants the cargo-fuzz targets in `fuzz/` check (both use
//! `tests/invariants`), on generated input, as ordinary tests that run in CI.

mod invariants;
#[path = "properties/policy.rs"]
mod policy;
#[path = "properties/process_response.rs"]
mod process_response;
#[path = "properties/thread_budget.rs"]
mod thread_budget;
#[path = "properties/wire_requests.rs"]
mod wire_requests;

use proptest::collection::{hash_set, vec};
use proptest::prelude::*;
use relayger_core::ids::IdentityNumber;
use relayger_core::policy::Policy;
use relayger_core::process_abi::{
    DEFAULT_MAX_RESPONSE_BYTES, MAX_RESPONSE_BYTES_RANGE, parse_response_output,
};
use relayger_core::thread_budget::{
    MAX_THREAD_LIMIT, MAX_THREAD_MAX_BYTES, MIN_THREAD_MAX_BYTES, PackedThread, ThreadBudgetError,
    pack_thread, render_thread_body,
};
use relayger_core::wire::{
    FinishRequest, IdentityKind, IdentityRef, JobResult, MAX_TEXT_BYTES, MessageEnvelope,
    RegisterRuntimeRequest, SendRequest, Timestamp,
};
use serde_json::{Value, json};
use time::OffsetDateTime;
use uuid::Uuid;

const ROOMS: [&str; 3] = [
    "0195f3b2-7c1e-7d2a-9c4b-3e2f1a0b9c8d",
    "0195F3B2-7C1E-7D2A-9C4B-3E2F1A0B9C8E",
    "{0195f3b2-7c1e-7d2a-9c4b-3e2f1a0b9c8f}",
];

/// Joins `(key, value text)` members into an object, with a little blank
/// space, so repeated keys and odd spellings reach the parsers as written.
fn object_text(members: &[(String, String)], spaced: bool) -> String {
    let separator = if spaced { ", " } else { "," };
    let colon = if spaced { " : " } else { ":" };
    let body: Vec<String> = members
        .iter()
        .map(|(key, value)| format!("{}{colon}{value}", json!(key)))
        .collect();
    format!("{{{}}}", body.join(separator))
}

fn string_list(entries: &[String]) -> String {
    json!(entries).to_string()
}
