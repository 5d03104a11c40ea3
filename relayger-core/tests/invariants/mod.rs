//! Invariants shared by the property tests (`tests/properties.rs`) and the
//! cargo-fuzz targets (`fuzz/fuzz_targets/*.rs`, which include this file by
//! path), so CI and the fuzzer hold the code to the same rules.
//!
//! Every check panics on a violation; the callers feed it arbitrary input.

use std::collections::HashSet;

use relayger_core::canonical::{StrictJsonError, canonical_json, parse_strict_object};
use relayger_core::notes::validate_note;
use relayger_core::policy::{MessageFacts, Policy, PolicyError};
use relayger_core::process_abi::{ResponseError, parse_response_output, parse_result_value};
use relayger_core::thread_budget::{
    MAX_THREAD_LIMIT, MAX_THREAD_MAX_BYTES, MIN_THREAD_MAX_BYTES, PackedThread, ThreadBudgetError,
    pack_thread, render_thread_body,
};
use relayger_core::wire::{
    AckRequest, AnswerRequest, ClaimRequest, ConfigureRequest, ContactNumber, CreateAgentRequest,
    CreateRoomRequest, CreateTokenRequest, FinishRequest, JobResult, LeaseRequest, MAX_TEXT_BYTES,
    MessageEnvelope, NoteInput, NoteWrite, RegisterRequest, RegisterRuntimeRequest, SendRequest,
    ThreadResponse, Usage,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use time::{Duration, OffsetDateTime};

// ---------------------------------------------------------------- policy

/// Any text given to the policy parser: no panic, `Policy::parse` and the
/// `Deserialize` impl (a policy inside a request body) agree, and an accepted
/// policy satisfies [`check_policy`].
pub(crate) fn check_policy_text(text: &str) -> Option<Policy> {
    let parsed = Policy::parse(text);
    let via_serde = serde_json::from_str::<Policy>(text);
    match (&parsed, &via_serde) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "parse and Deserialize disagree on {text:?}"),
        (Err(error), Err(_)) => check_policy_error(error),
        _ => panic!("parse and Deserialize disagree on {text:?}: {parsed:?} / {via_serde:?}"),
    }
    let policy = parsed.ok()?;
    check_policy(&policy);
    Some(policy)
}

fn check_policy_error(error: &PolicyError) {
    // Display must not panic; a field error names a field.
    let _ = error.to_string();
    if let PolicyError::Field { field, problem } = error {
        assert!(!problem.is_empty());
        assert_eq!(error.field(), field);
    } else {
        assert_eq!(error.field(), "");
    }
}

/// A valid policy: it validates, its normalized form parses back to a policy
/// with the same normalized form, fingerprint and behaviour, the fingerprint
/// ignores list order, and its serialized form parses back to itself.
pub(crate) fn check_policy(policy: &Policy) {
    policy.validate().expect("a parsed policy validates");
    let normalized = policy.normalized();
    let fingerprint = policy.fingerprint();
    assert_eq!(fingerprint.len(), 64);
    assert!(
        fingerprint
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    );
    assert_eq!(policy.fingerprint(), fingerprint, "fingerprint is stable");

    // The normalized form is itself a policy, and a fixed point.
    for text in [
        normalized.to_string(),
        String::from_utf8(canonical_json(&normalized)).expect("canonical JSON is UTF-8"),
    ] {
        let again = Policy::parse(&text).expect("the normalized form parses");
        assert_eq!(again.normalized(), normalized, "normalized form re-parses");
        assert_eq!(again.fingerprint(), fingerprint, "fingerprint survives");
        same_behaviour(policy, &again);
    }

    // Serialize → parse is the identity (list order kept).
    let written = serde_json::to_string(policy).expect("a policy serializes");
    assert_eq!(
        &Policy::parse(&written).expect("serialized policy parses"),
        policy
    );

    // List order never changes the fingerprint.
    let mut reversed = policy.clone();
    reversed.triggers.reverse();
    reversed.allowed_senders.reverse();
    reversed.allowed_rooms.reverse();
    reversed.active_hours_utc.reverse();
    reversed.validate().expect("a reordered policy validates");
    assert_eq!(reversed.fingerprint(), fingerprint, "order-independent");
    assert_eq!(reversed.normalized(), normalized);
}

fn same_behaviour(a: &Policy, b: &Policy) {
    for bits in 0..8_u8 {
        let facts = MessageFacts {
            from_self: bits & 1 != 0,
            ask: bits & 2 != 0,
            by_runtime: bits & 4 != 0,
        };
        assert_eq!(a.triggers_on(&facts), b.triggers_on(&facts));
        if facts.from_self {
            assert!(
                !a.triggers_on(&facts),
                "the agent's own messages never trigger"
            );
        }
    }
    for sender in &a.allowed_senders {
        assert!(b.sender_allowed(sender));
    }
    for room in &a.allowed_rooms {
        assert!(b.room_allowed(room));
    }
    for t in sample_times() {
        assert_eq!(a.is_active_at(t), b.is_active_at(t), "at {t}");
    }
}

/// Spread over two days at odd offsets, so every window boundary is near some
/// sample for typical inputs.
fn sample_times() -> impl Iterator<Item = OffsetDateTime> {
    let base = OffsetDateTime::from_unix_timestamp(1_790_000_000).expect("in range");
    (0..96_i64).map(move |k| base + Duration::seconds(k * (37 * 60 + 13)))
}

/// `next_active_start` answers `None` exactly when the policy is active at
/// `t`; otherwise a whole minute after `t`, within a day, at which the policy
/// is active and just before which it is not.
pub(crate) fn check_active_hours(policy: &Policy, t: OffsetDateTime) {
    let active = policy.is_active_at(t);
    match policy.next_active_start(t) {
        None => assert!(active, "inactive at {t} but no next start"),
        Some(next) => {
            assert!(!active, "active at {t} but next start {next}");
            assert!(next > t);
            assert!(next - t <= Duration::DAY, "{t} → {next}");
            assert_eq!((next.second(), next.nanosecond()), (0, 0));
            assert!(policy.is_active_at(next), "not active at its start {next}");
            let minute_before = next - Duration::MINUTE;
            assert!(
                !policy.is_active_at(minute_before),
                "already active at {minute_before}, so {next} is not the next start after {t}"
            );
        }
    }
    if policy.active_hours_utc.is_empty() {
        assert!(active);
    }
}

/// Whatever `check_policy` needs over many sample times.
pub(crate) fn check_policy_times(policy: &Policy) {
    for t in sample_times() {
        check_active_hours(policy, t);
    }
}

// ---------------------------------------------------------------- wire

/// Deserializes `bytes` as `T`; when it is accepted, writing it out and
/// reading that back gives the same value.
fn round_trip<T>(bytes: &[u8]) -> Option<T>
where
    T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let value = serde_json::from_slice::<T>(bytes).ok()?;
    let written = serde_json::to_vec(&value).expect("an accepted body serializes");
    let back: T = serde_json::from_slice(&written).unwrap_or_else(|e| {
        panic!(
            "{} does not read back its own output {:?}: {e}",
            std::any::type_name::<T>(),
            String::from_utf8_lossy(&written)
        )
    });
    assert_eq!(back, value, "{} round trip", std::any::type_name::<T>());
    Some(value)
}

/// Arbitrary bytes into every request body of `relayger_core::wire` and the
/// strict object reader: no panic, accepted bodies round-trip, and bodies
/// that carry validated types keep their rules.
pub(crate) fn check_wire_bytes(bytes: &[u8]) {
    round_trip::<RegisterRequest>(bytes);
    round_trip::<CreateAgentRequest>(bytes);
    round_trip::<CreateTokenRequest>(bytes);
    round_trip::<ContactNumber>(bytes);
    round_trip::<AnswerRequest>(bytes);
    round_trip::<CreateRoomRequest>(bytes);
    round_trip::<SendRequest>(bytes);
    round_trip::<AckRequest>(bytes);
    round_trip::<ClaimRequest>(bytes);
    round_trip::<LeaseRequest>(bytes);
    round_trip::<NoteWrite>(bytes);
    round_trip::<NoteInput>(bytes);
    round_trip::<Usage>(bytes);
    if let Some(policy) = round_trip::<RegisterRuntimeRequest>(bytes).and_then(|r| r.policy) {
        check_policy(&policy);
    }
    if let Some(request) = round_trip::<ConfigureRequest>(bytes) {
        check_policy(&request.policy);
    }
    round_trip::<FinishRequest>(bytes);
    round_trip::<JobResult>(bytes);
    if let Ok(text) = std::str::from_utf8(bytes) {
        check_strict_object(text);
    }
}

/// The strict reader agrees with `serde_json::Value` except that it refuses
/// repeated keys and non-objects; what it accepts has unique keys, and its
/// canonical bytes are a fixed point.
pub(crate) fn check_strict_object(text: &str) {
    let strict = parse_strict_object(text);
    let loose = serde_json::from_str::<Value>(text);
    match (&strict, &loose) {
        (Ok(members), Ok(Value::Object(map))) => {
            let mut seen = HashSet::new();
            for (key, _) in members {
                assert!(seen.insert(key.as_str()), "repeated key {key:?} accepted");
            }
            assert_eq!(members.len(), map.len());
            for (key, value) in members {
                assert_eq!(map.get(key), Some(value), "member {key:?}");
            }
            let object = Value::Object(map.clone());
            let canonical = canonical_json(&object);
            let canonical_text = String::from_utf8(canonical.clone()).expect("UTF-8");
            let reread = parse_strict_object(&canonical_text).expect("canonical JSON re-reads");
            let reread = Value::Object(reread.into_iter().collect());
            if !has_float(&object) {
                // Floats may move by one ulp through serde_json's default
                // parser; everything else must come back identical.
                assert_eq!(reread, object);
                assert_eq!(canonical_json(&reread), canonical);
            }
            assert!(!canonical.contains(&b'\n'), "canonical JSON is one line");
        }
        (Ok(_), other) => panic!("strict reader accepted what serde_json reads as {other:?}"),
        (Err(StrictJsonError::DuplicateKey { key, .. }), _) => {
            assert!(text.contains(key.as_str()) || text.contains('\\'));
        }
        (Err(StrictJsonError::NotAnObject { .. }), Ok(value)) => {
            assert!(!value.is_object(), "an object refused as not an object");
        }
        (Err(StrictJsonError::NotAnObject { .. }), Err(_)) => {
            // Refused at the first token, before the rest was read: the
            // first non-blank character opens no object.
            assert!(!text.trim_start().starts_with('{'));
        }
        (Err(StrictJsonError::Syntax { .. }), Ok(value)) => {
            panic!("syntax error on text serde_json reads as {value:?}")
        }
        (Err(StrictJsonError::Syntax { .. }), Err(_)) => {}
    }
    if let Ok(Value::Object(_)) = loose {
        // serde_json keeps the last of two equal keys; the strict reader
        // may only refuse such an object for a repeated key.
        assert!(
            matches!(strict, Ok(_) | Err(StrictJsonError::DuplicateKey { .. })),
            "{strict:?}"
        );
    }
}

fn has_float(value: &Value) -> bool {
    match value {
        Value::Number(number) => number.is_f64(),
        Value::Array(items) => items.iter().any(has_float),
        Value::Object(map) => map.values().any(has_float),
        _ => false,
    }
}

// ---------------------------------------------------------------- process ABI

/// One handler stdout under a `max_bytes` cap: no panic; an accepted result
/// obeys the ABI's limits, survives being printed again, is accepted the
/// same by the Node-module path, and does not depend on the final newline.
pub(crate) fn check_process_response(stdout: &[u8], max_bytes: usize) {
    let parsed = parse_response_output(stdout, max_bytes);
    match &parsed {
        Err(error) => {
            let reason = error.reason();
            assert!(
                reason.starts_with("response_too_large: ")
                    || reason.starts_with("invalid_output: ")
            );
            if stdout.len() > max_bytes {
                assert_eq!(error, &ResponseError::TooLarge { max: max_bytes });
            }
        }
        Ok(result) => {
            assert!(stdout.len() <= max_bytes);
            check_job_result(result);
            let line = stdout
                .strip_suffix(b"\n")
                .map(|rest| rest.strip_suffix(b"\r").unwrap_or(rest))
                .unwrap_or(stdout);
            assert!(!line.contains(&b'\n'), "one line only");
            let value: Value = serde_json::from_slice(line).expect("an accepted line is JSON");
            assert_eq!(
                parse_result_value(value).as_ref(),
                Ok(result),
                "the Node path reads the same result"
            );
            if !stdout.ends_with(b"\n") {
                for ending in [&b"\n"[..], b"\r\n"] {
                    let mut with = stdout.to_vec();
                    with.extend_from_slice(ending);
                    assert_eq!(
                        parse_response_output(&with, usize::MAX).as_ref(),
                        Ok(result),
                        "a final newline is optional"
                    );
                }
            }
        }
    }
    // The Node path alone, on anything that is JSON.
    if let Some(Ok(result)) = serde_json::from_slice::<Value>(stdout)
        .ok()
        .map(parse_result_value)
    {
        check_job_result(&result);
    }
}

/// The documented rules of a handler result, and that it prints back into a
/// response the ABI accepts as the same result.
pub(crate) fn check_job_result(result: &JobResult) {
    for (name, text) in [
        ("reply", &result.reply),
        ("skip", &result.skip),
        ("error", &result.error),
    ] {
        if let Some(text) = text {
            assert!(!text.is_empty(), "empty {name} accepted");
        }
    }
    if let Some(reply) = &result.reply {
        assert!(
            reply.len() <= MAX_TEXT_BYTES,
            "reply of {} bytes",
            reply.len()
        );
    }
    assert!(
        !(result.reply.is_some() && result.skip.is_some()),
        "reply and skip"
    );
    if result.error.is_some() {
        assert!(result.reply.is_none() && result.skip.is_none() && result.note.is_none());
    }
    if let Some(note) = &result.note {
        validate_note(&note.key, &note.text, &note.source_message_ids)
            .expect("an accepted note is valid");
    }
    let line = serde_json::to_string(result).expect("a result serializes");
    assert!(!line.contains('\n'));
    assert_eq!(
        parse_response_output(line.as_bytes(), usize::MAX).as_ref(),
        Ok(result),
        "a result prints back into the same result"
    );
    let value = serde_json::to_value(result).expect("a result serializes");
    assert_eq!(parse_result_value(value).as_ref(), Ok(result));
}

// ---------------------------------------------------------------- thread budget

/// `pack_thread` over arbitrary items: the requested ranges are enforced;
/// the rendered body never exceeds the budget, holds the first `count` items
/// in order, writes the documented `next`, and is the longest prefix that
/// fits; `ContextItemTooLarge` (413) exactly when items exist and no prefix
/// fits. Returns the packing and the body when one was produced.
pub(crate) fn check_thread_packing(
    items: &[(i64, String)],
    more_after_items: bool,
    max_bytes: usize,
    limit: usize,
) -> Option<(PackedThread, String)> {
    let borrowed: Vec<(i64, &str)> = items.iter().map(|(seq, e)| (*seq, e.as_str())).collect();
    let result = pack_thread(&borrowed, more_after_items, max_bytes, limit);
    let max_ok = (MIN_THREAD_MAX_BYTES..=MAX_THREAD_MAX_BYTES).contains(&max_bytes);
    let limit_ok = (1..=MAX_THREAD_LIMIT).contains(&limit);
    if !max_ok {
        assert!(
            matches!(result, Err(ThreadBudgetError::MaxBytesOutOfRange { max_bytes: m }) if m == max_bytes as u64),
            "{result:?}"
        );
        return None;
    }
    if !limit_ok {
        assert!(
            matches!(result, Err(ThreadBudgetError::LimitOutOfRange { limit: l }) if l == limit as u64),
            "{result:?}"
        );
        return None;
    }
    let reachable = items.len().min(limit);
    let expected_next = |count: usize| {
        (count > 0 && (count < items.len() || more_after_items)).then(|| items[count - 1].0)
    };
    let body_for = |count: usize| {
        render_thread_body(
            &borrowed,
            &PackedThread {
                count,
                next: expected_next(count),
            },
        )
    };
    match result {
        Ok(packed) => {
            assert!(packed.count <= reachable, "{packed:?} beyond {reachable}");
            if items.is_empty() {
                assert_eq!(
                    packed,
                    PackedThread {
                        count: 0,
                        next: None
                    }
                );
            } else {
                assert!(packed.count >= 1, "items exist but an empty page came back");
            }
            assert_eq!(packed.next, expected_next(packed.count), "next");
            let body = render_thread_body(&borrowed, &packed);
            assert!(
                body.len() <= max_bytes,
                "{} bytes over a {max_bytes}-byte budget",
                body.len()
            );
            // Exactly the first `count` items, in order, then `next`.
            let mut expected = String::from("{\"messages\":[");
            for (index, (_, envelope)) in items[..packed.count].iter().enumerate() {
                if index > 0 {
                    expected.push(',');
                }
                expected.push_str(envelope);
            }
            expected.push_str("],\"next\":");
            match packed.next {
                Some(seq) => expected.push_str(&seq.to_string()),
                None => expected.push_str("null"),
            }
            expected.push('}');
            assert_eq!(body, expected);
            for longer in packed.count + 1..=reachable {
                assert!(
                    body_for(longer).len() > max_bytes,
                    "{longer} items would also fit in {max_bytes}"
                );
            }
            Some((packed, body))
        }
        Err(ThreadBudgetError::ContextItemTooLarge {
            envelope_bytes,
            max_bytes: reported,
        }) => {
            assert!(!items.is_empty(), "413 for an empty thread");
            assert_eq!(envelope_bytes, items[0].1.len());
            assert_eq!(reported, max_bytes);
            for count in 1..=reachable {
                assert!(
                    body_for(count).len() > max_bytes,
                    "413 although {count} items fit in {max_bytes}"
                );
            }
            None
        }
        Err(other) => panic!("in-range budget and limit refused: {other:?}"),
    }
}

/// [`check_thread_packing`] over real message envelopes (serialized the way
/// the thread route does): the body is also a valid `ThreadResponse` holding
/// exactly the first `count` envelopes, in order.
pub(crate) fn check_thread_envelopes(
    envelopes: &[MessageEnvelope],
    more_after_items: bool,
    max_bytes: usize,
    limit: usize,
) {
    let items: Vec<(i64, String)> = envelopes
        .iter()
        .map(|e| {
            (
                e.seq,
                serde_json::to_string(e).expect("an envelope serializes"),
            )
        })
        .collect();
    if let Some((packed, body)) = check_thread_packing(&items, more_after_items, max_bytes, limit) {
        let response: ThreadResponse =
            serde_json::from_str(&body).expect("the body is a ThreadResponse");
        assert_eq!(response.messages.as_slice(), &envelopes[..packed.count]);
        assert_eq!(response.next, packed.next);
    }
}
