//! The completion fingerprint: what makes a retried finish idempotent.
//!
//! A worker whose finish response got lost sends the same finish again. The
//! server stores the fingerprint of the first one; a retry with the same
//! fingerprint gets the original outcome, a different one gets 409. The hash
//! covers the job key, the owner and the whole result, taken over canonical
//! JSON so that key order and whitespace do not matter.

use std::fmt;
use std::str::FromStr;

use ring::digest::{SHA256, digest};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::canonical::canonical_json;
use crate::lease::{LeaseOwner, hex_lower};

/// A text that is not a fingerprint.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a completion fingerprint is exactly 64 lowercase hexadecimal characters")]
pub struct InvalidFingerprint;

/// Lowercase hex SHA-256 of the canonical bytes of
/// `{"jobKey":…,"owner":…,"result":…}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CompletionFingerprint(String);

impl CompletionFingerprint {
    /// Fingerprints one finish. The owner is part of it because a finish is
    /// only idempotent for the claim that sent it: another owner with the
    /// same result is a different finish and must be fenced, not replayed.
    pub fn compute(job_key: &str, owner: &LeaseOwner, result: &Value) -> Self {
        let subject = serde_json::json!({
            "jobKey": job_key,
            "owner": owner.as_str(),
            "result": result,
        });
        let hash = digest(&SHA256, &canonical_json(&subject));
        CompletionFingerprint(hex_lower(hash.as_ref()))
    }

    /// Reads a stored fingerprint back.
    pub fn parse(text: &str) -> Result<Self, InvalidFingerprint> {
        let well_formed = text.len() == 64
            && text
                .bytes()
                .all(|byte| matches!(byte, b'0'..=b'9' | b'a'..=b'f'));
        if well_formed {
            Ok(CompletionFingerprint(text.to_owned()))
        } else {
            Err(InvalidFingerprint)
        }
    }

    /// The hex text, as stored.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for CompletionFingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for CompletionFingerprint {
    type Err = InvalidFingerprint;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        CompletionFingerprint::parse(text)
    }
}

impl Serialize for CompletionFingerprint {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for CompletionFingerprint {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        CompletionFingerprint::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const JOB_KEY: &str = "0195f3b2-7c1e-7d2a-9c4b-3e2f1a0b9c8d";
    const OWNER: &str = "0123456789abcdef0123456789abcdef";

    fn owner(text: &str) -> LeaseOwner {
        LeaseOwner::parse(text).expect("valid owner")
    }

    fn fingerprint(result: &Value) -> CompletionFingerprint {
        CompletionFingerprint::compute(JOB_KEY, &owner(OWNER), result)
    }

    fn base_result() -> Value {
        json!({
            "reply": "HELLO FROM RELAYGER",
            "note": {
                "key": "decision",
                "text": "ship on Friday",
                "version": 0,
                "sourceMessageIds": ["0195f3b2-0000-7000-8000-000000000001"],
            },
            "usage": {"modelCalls": 1, "inputTokens": 120, "outputTokens": 30},
        })
    }

    #[test]
    fn key_order_and_whitespace_do_not_matter() {
        let compact = r#"{"reply":"HELLO","note":{"key":"k","text":"t","version":2,"sourceMessageIds":["a","b"]},"usage":{"modelCalls":0,"inputTokens":0,"outputTokens":0}}"#;
        let pretty = r#"
            {
              "usage" : { "outputTokens" : 0, "inputTokens" : 0, "modelCalls" : 0 },
              "note"  : { "sourceMessageIds" : [ "a", "b" ], "version" : 2, "text" : "t", "key" : "k" },
              "reply" : "HELLO"
            }"#;
        let a: Value = serde_json::from_str(compact).expect("valid");
        let b: Value = serde_json::from_str(pretty).expect("valid");
        assert_eq!(fingerprint(&a), fingerprint(&b));
    }

    #[test]
    fn every_meaningful_change_changes_the_fingerprint() {
        let base = fingerprint(&base_result());
        type Edit = fn(&mut Value);
        let edits: [(&str, Edit); 12] = [
            ("reply text", |r| r["reply"] = json!("HELLO FROM RELAYGER!")),
            ("reply removed", |r| {
                r.as_object_mut().map(|o| o.remove("reply"));
            }),
            ("note key", |r| r["note"]["key"] = json!("decision2")),
            ("note text", |r| r["note"]["text"] = json!("ship on Monday")),
            ("note version", |r| r["note"]["version"] = json!(1)),
            ("note sources", |r| {
                r["note"]["sourceMessageIds"] = json!(["0195f3b2-0000-7000-8000-000000000002"])
            }),
            ("note source order", |r| {
                r["note"]["sourceMessageIds"] = json!([
                    "0195f3b2-0000-7000-8000-000000000002",
                    "0195f3b2-0000-7000-8000-000000000001"
                ])
            }),
            ("skip instead of reply", |r| {
                r.as_object_mut().map(|o| o.remove("reply"));
                r["skip"] = json!("not for me");
            }),
            ("usage modelCalls", |r| r["usage"]["modelCalls"] = json!(2)),
            ("usage inputTokens", |r| {
                r["usage"]["inputTokens"] = json!(121)
            }),
            ("usage outputTokens", |r| {
                r["usage"]["outputTokens"] = json!(31)
            }),
            ("usage removed", |r| {
                r.as_object_mut().map(|o| o.remove("usage"));
            }),
        ];
        let mut seen = vec![base.clone()];
        for (what, edit) in edits {
            let mut result = base_result();
            edit(&mut result);
            let changed = fingerprint(&result);
            assert!(
                !seen.contains(&changed),
                "{what} did not change the fingerprint"
            );
            seen.push(changed);
        }
        let skip_a = fingerprint(&json!({"skip": "a"}));
        let skip_b = fingerprint(&json!({"skip": "b"}));
        assert_ne!(skip_a, skip_b);
    }

    #[test]
    fn owner_and_job_key_are_covered() {
        let result = base_result();
        let base = CompletionFingerprint::compute(JOB_KEY, &owner(OWNER), &result);
        let other_owner = CompletionFingerprint::compute(
            JOB_KEY,
            &owner("fedcba9876543210fedcba9876543210"),
            &result,
        );
        let other_job = CompletionFingerprint::compute("another-job", &owner(OWNER), &result);
        assert_ne!(base, other_owner);
        assert_ne!(base, other_job);
        assert_ne!(other_owner, other_job);
    }

    #[test]
    fn fingerprint_is_stable_hex() {
        let empty = CompletionFingerprint::compute("", &owner(OWNER), &json!({}));
        assert_eq!(empty.as_str().len(), 64);
        assert_eq!(
            CompletionFingerprint::parse(empty.as_str()),
            Ok(empty.clone())
        );
        // The hash of `{"jobKey":"","owner":"0123…","result":{}}`, pinned so a
        // change in canonical form (which would orphan stored fingerprints)
        // cannot slip through.
        assert_eq!(
            empty.as_str(),
            "01660087b74b807e942e99d0f277d2d9c69d4b57a9d96d2322bcff4d72da49f8"
        );
        for bad in ["", "ABC", &"A".repeat(64), &"0".repeat(63), &"g".repeat(64)] {
            assert_eq!(
                CompletionFingerprint::parse(bad),
                Err(InvalidFingerprint),
                "{bad}"
            );
        }
    }
}
