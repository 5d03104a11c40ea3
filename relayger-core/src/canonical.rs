//! Canonical JSON bytes and a strict JSON object reader.
//!
//! Hashes (policy fingerprints, completion fingerprints) must not depend on
//! how a client happened to order keys or indent its output, so they are taken
//! over [`canonical_json`]. The escaping and number formatting are written out
//! here rather than borrowed from whatever `serde_json` feature set the final
//! binary ends up with, because fingerprints are stored and compared across
//! versions.
//!
//! `serde_json::Value` silently keeps the last of two equal keys; a policy
//! file with `"maxAttempts"` twice is almost certainly a mistake, so
//! [`parse_strict_object`] rejects duplicate keys at every nesting level.

use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt;

use serde::Deserializer;
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// Canonical bytes of a JSON value: object keys sorted by their UTF-8 bytes,
/// no whitespace, strings escaped and numbers written the way `serde_json`
/// writes them. Equal values give equal bytes, whatever text they came from.
pub fn canonical_json(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(number) => out.extend_from_slice(number.to_string().as_bytes()),
        Value::String(text) => write_json_string(text, out),
        Value::Array(items) => {
            out.push(b'[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push(b'{');
            for (index, (key, item)) in entries.into_iter().enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                write_json_string(key, out);
                out.push(b':');
                write_canonical(item, out);
            }
            out.push(b'}');
        }
    }
}

/// Writes `text` as a JSON string with exactly serde_json's escapes: `"`, `\`
/// and the C0 controls; everything else (including U+007F and non-ASCII) raw.
fn write_json_string(text: &str, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    let bytes = text.as_bytes();
    let mut start = 0;
    for (index, &byte) in bytes.iter().enumerate() {
        let escape: &[u8] = match byte {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            0x08 => b"\\b",
            0x09 => b"\\t",
            0x0A => b"\\n",
            0x0C => b"\\f",
            0x0D => b"\\r",
            0x00..=0x1F => &[],
            _ => continue,
        };
        out.extend_from_slice(&bytes[start..index]);
        if escape.is_empty() {
            out.extend_from_slice(b"\\u00");
            out.push(HEX[usize::from(byte >> 4)]);
            out.push(HEX[usize::from(byte & 0x0F)]);
        } else {
            out.extend_from_slice(escape);
        }
        start = index + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// Why a text is not a strict JSON object.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StrictJsonError {
    /// Not JSON at all; the message carries serde_json's line and column.
    #[error("invalid JSON: {message}")]
    Syntax { message: String },
    /// Valid JSON, but not an object at the top level.
    #[error("expected a JSON object, found {found}")]
    NotAnObject { found: &'static str },
    /// The same key twice in one object. `path` leads from the top-level
    /// object to the object holding the duplicate (keys, and array indices
    /// as decimal strings); it is empty for a duplicate at the top level.
    #[error("duplicate key `{key}` in {}", describe_path(.path))]
    DuplicateKey { path: Vec<String>, key: String },
}

fn describe_path(path: &[String]) -> String {
    if path.is_empty() {
        "the top-level object".to_owned()
    } else {
        format!("`{}`", path.join("."))
    }
}

/// Parses `text` as one JSON object and returns its members in written
/// order, rejecting duplicate keys in it and in every nested object.
pub fn parse_strict_object(text: &str) -> Result<Vec<(String, Value)>, StrictJsonError> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let parsed =
        deserialize_strict_object(&mut deserializer).and_then(|members| match deserializer.end() {
            Ok(()) => Ok(members),
            Err(error) => Err(StrictFailure::Other(error)),
        });
    parsed.map_err(|failure| match failure {
        StrictFailure::Duplicate { path, key } => StrictJsonError::DuplicateKey { path, key },
        StrictFailure::NotAnObject { found } => StrictJsonError::NotAnObject { found },
        StrictFailure::Other(error) => StrictJsonError::Syntax {
            message: error.to_string(),
        },
    })
}

/// What went wrong in [`deserialize_strict_object`], kept structured so that
/// callers (policy parsing) can name the offending field instead of relaying
/// a generic deserializer message.
#[derive(Debug)]
pub(crate) enum StrictFailure<E> {
    Duplicate { path: Vec<String>, key: String },
    NotAnObject { found: &'static str },
    Other(E),
}

/// Reads one object from any serde deserializer with duplicate-key detection.
/// Works for `serde_json` text as well as for an object nested in a larger
/// request body, which is how `Policy`'s `Deserialize` stays strict.
pub(crate) fn deserialize_strict_object<'de, D>(
    deserializer: D,
) -> Result<Vec<(String, Value)>, StrictFailure<D::Error>>
where
    D: Deserializer<'de>,
{
    let report = RefCell::new(Report::default());
    let result = deserializer.deserialize_any(TopLevelVisitor { report: &report });
    match result {
        Ok(members) => Ok(members),
        Err(error) => {
            let report = report.into_inner();
            if let Some(found) = report.not_an_object {
                Err(StrictFailure::NotAnObject { found })
            } else if let Some(duplicate) = report.duplicate {
                let mut path = duplicate.reversed_path;
                path.reverse();
                Err(StrictFailure::Duplicate {
                    path,
                    key: duplicate.key,
                })
            } else {
                Err(StrictFailure::Other(error))
            }
        }
    }
}

/// Side channel from the visitors: a deserializer's error type is opaque, so
/// the structured reason is recorded here while the error unwinds.
#[derive(Debug, Default)]
struct Report {
    not_an_object: Option<&'static str>,
    duplicate: Option<DuplicateFound>,
}

#[derive(Debug)]
struct DuplicateFound {
    key: String,
    /// Filled innermost-first as the error passes each enclosing container.
    reversed_path: Vec<String>,
}

impl Report {
    fn record_duplicate(&mut self, key: &str) {
        self.duplicate = Some(DuplicateFound {
            key: key.to_owned(),
            reversed_path: Vec::new(),
        });
    }

    fn add_enclosing(&mut self, segment: impl FnOnce() -> String) {
        if let Some(duplicate) = self.duplicate.as_mut() {
            duplicate.reversed_path.push(segment());
        }
    }
}

struct TopLevelVisitor<'r> {
    report: &'r RefCell<Report>,
}

impl TopLevelVisitor<'_> {
    fn not_an_object<E: de::Error>(&self, found: &'static str) -> E {
        self.report.borrow_mut().not_an_object = Some(found);
        E::custom(format_args!("expected a JSON object, found {found}"))
    }
}

impl<'de> Visitor<'de> for TopLevelVisitor<'_> {
    type Value = Vec<(String, Value)>;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        visit_members(map, self.report)
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Err(self.not_an_object("a boolean"))
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Err(self.not_an_object("a number"))
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Err(self.not_an_object("a number"))
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Err(self.not_an_object("a number"))
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Err(self.not_an_object("a string"))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Err(self.not_an_object("null"))
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Err(self.not_an_object("null"))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<Self::Value, A::Error> {
        Err(self.not_an_object("an array"))
    }
}

/// Reads the members of one object in written order, failing on the first
/// repeated key.
fn visit_members<'de, A: MapAccess<'de>>(
    mut map: A,
    report: &RefCell<Report>,
) -> Result<Vec<(String, Value)>, A::Error> {
    let mut seen = HashSet::new();
    let mut members = Vec::new();
    while let Some(key) = map.next_key::<String>()? {
        if !seen.insert(key.clone()) {
            report.borrow_mut().record_duplicate(&key);
            return Err(de::Error::custom(format_args!("duplicate key `{key}`")));
        }
        match map.next_value_seed(StrictValue { report }) {
            Ok(value) => members.push((key, value)),
            Err(error) => {
                report.borrow_mut().add_enclosing(|| key);
                return Err(error);
            }
        }
    }
    Ok(members)
}

/// Builds a `serde_json::Value` like serde_json's own visitor does, except
/// that objects go through [`visit_members`].
struct StrictValue<'r> {
    report: &'r RefCell<Report>,
}

impl<'de> DeserializeSeed<'de> for StrictValue<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrictValue<'_> {
    type Value = Value;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Value, E> {
        Ok(Number::from_f64(value).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_owned()))
    }

    fn visit_string<E: de::Error>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        loop {
            match seq.next_element_seed(StrictValue {
                report: self.report,
            }) {
                Ok(Some(item)) => items.push(item),
                Ok(None) => return Ok(Value::Array(items)),
                Err(error) => {
                    let index = items.len();
                    self.report.borrow_mut().add_enclosing(|| index.to_string());
                    return Err(error);
                }
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Value, A::Error> {
        let members = visit_members(map, self.report)?;
        Ok(Value::Object(members.into_iter().collect::<Map<_, _>>()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn canonical_text(value: &Value) -> String {
        String::from_utf8(canonical_json(value)).expect("canonical JSON is UTF-8")
    }

    #[test]
    fn canonical_form_table() {
        let table: [(Value, &str); 10] = [
            (json!(null), "null"),
            (json!(true), "true"),
            (json!(-12), "-12"),
            (json!(18446744073709551615_u64), "18446744073709551615"),
            (json!(1.5), "1.5"),
            (
                json!("a\"b\\c\n\u{1}\u{7f}é"),
                "\"a\\\"b\\\\c\\n\\u0001\u{7f}é\"",
            ),
            (json!([1, [2, {}], []]), "[1,[2,{}],[]]"),
            (json!({"b": 1, "a": 2, "A": 3}), r#"{"A":3,"a":2,"b":1}"#),
            (
                json!({"z": {"y": 1, "x": [ {"d": 1, "c": 2} ]}, "é": 0, "e": 0}),
                r#"{"e":0,"z":{"x":[{"c":2,"d":1}],"y":1},"é":0}"#,
            ),
            (json!(""), r#""""#),
        ];
        // U+007F and non-ASCII are written raw, like serde_json does.
        for (value, expected) in table {
            assert_eq!(canonical_text(&value), expected, "{value}");
        }
    }

    #[test]
    fn differently_written_texts_give_the_same_bytes() {
        let a: Value =
            serde_json::from_str(r#"{"b":[1,2],"a":{"y":"z","x":null}}"#).expect("valid");
        let b: Value = serde_json::from_str(
            "{ \"a\" : { \"x\" : null , \"y\" : \"z\" },\n \"b\" : [ 1 , 2 ] }",
        )
        .expect("valid");
        assert_eq!(canonical_json(&a), canonical_json(&b));
    }

    #[test]
    fn strict_object_keeps_order_and_values() {
        let members =
            parse_strict_object(r#" {"b": 1, "a": [true, null, {"k": "v"}], "c": -2.5} "#)
                .expect("valid");
        assert_eq!(
            members,
            vec![
                ("b".to_owned(), json!(1)),
                ("a".to_owned(), json!([true, null, {"k": "v"}])),
                ("c".to_owned(), json!(-2.5)),
            ]
        );
    }

    #[test]
    fn strict_object_rejections_table() {
        let duplicate = |path: &[&str], key: &str| StrictJsonError::DuplicateKey {
            path: path.iter().map(|s| (*s).to_owned()).collect(),
            key: key.to_owned(),
        };
        let table: Vec<(&str, StrictJsonError)> = vec![
            (r#"{"a":1,"a":1}"#, duplicate(&[], "a")),
            (r#"{"a":1,"b":2,"a":3}"#, duplicate(&[], "a")),
            (r#"{"o":{"k":1,"k":2}}"#, duplicate(&["o"], "k")),
            (
                r#"{"o":{"list":[0,{"deep":{"x":1,"x":1}}]}}"#,
                duplicate(&["o", "list", "1", "deep"], "x"),
            ),
            (r#"{"arr":[{"q":1,"q":2}]}"#, duplicate(&["arr", "0"], "q")),
            ("[]", StrictJsonError::NotAnObject { found: "an array" }),
            ("null", StrictJsonError::NotAnObject { found: "null" }),
            ("\"x\"", StrictJsonError::NotAnObject { found: "a string" }),
            ("3", StrictJsonError::NotAnObject { found: "a number" }),
            ("true", StrictJsonError::NotAnObject { found: "a boolean" }),
        ];
        for (text, expected) in table {
            assert_eq!(parse_strict_object(text), Err(expected), "{text}");
        }
        for text in [
            "",
            "{",
            r#"{"a":1,}"#,
            r#"{"a":1} {}"#,
            r#"{"a":1}x"#,
            "{'a':1}",
        ] {
            assert!(
                matches!(
                    parse_strict_object(text),
                    Err(StrictJsonError::Syntax { .. })
                ),
                "{text:?}"
            );
        }
    }

    #[test]
    fn duplicate_key_message_names_the_place() {
        let error = parse_strict_object(r#"{"o":{"k":1,"k":2}}"#).expect_err("duplicate");
        assert_eq!(error.to_string(), "duplicate key `k` in `o`");
        let error = parse_strict_object(r#"{"k":1,"k":2}"#).expect_err("duplicate");
        assert_eq!(
            error.to_string(),
            "duplicate key `k` in the top-level object"
        );
    }

    proptest! {
        #[test]
        fn strings_are_escaped_like_serde_json(text in any::<String>()) {
            let expected = serde_json::to_string(&text).expect("serialize");
            prop_assert_eq!(canonical_text(&Value::String(text)), expected);
        }

        #[test]
        fn canonical_bytes_parse_back_to_the_same_value(
            pairs in proptest::collection::vec((any::<String>(), any::<i64>()), 0..8),
            // Quarters are exact in binary, so parsing them back is exact too
            // (serde_json's default float parser may be off by one ulp for
            // arbitrary long decimals; that is about parsing, not about us).
            quarters in proptest::collection::vec(any::<i32>(), 0..4),
        ) {
            let object: Map<String, Value> =
                pairs.into_iter().map(|(k, v)| (k, json!(v))).collect();
            let floats: Vec<f64> = quarters.into_iter().map(|q| f64::from(q) / 4.0).collect();
            let value = json!({"object": object, "floats": floats});
            let bytes = canonical_json(&value);
            let back: Value = serde_json::from_slice(&bytes).expect("canonical bytes are JSON");
            prop_assert_eq!(back, value);
        }
    }
}
