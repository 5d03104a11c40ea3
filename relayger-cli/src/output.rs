//! The three output modes: human-readable lines, pretty JSON, and compact
//! JSON (one line, nulls and empty values dropped). JSON keeps the wire
//! types' field order (`conversationId`, `messageId`, `seq`, …).

use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};

/// How results and errors are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Human,
    Json,
    Compact,
}

/// What a command produced: the JSON form and the human-readable lines, or
/// nothing more for a command that printed as it went (`worker run`).
#[derive(Debug)]
pub(crate) struct Outcome {
    json: Json,
    human: String,
    streamed: bool,
}

impl Outcome {
    /// `value` as JSON, and `human` for the default mode.
    pub(crate) fn new<T: Serialize>(value: &T, human: impl Into<String>) -> Outcome {
        // Wire types are plain data with string keys: serializing cannot
        // fail. Should it ever, the output says so instead of panicking.
        let json = serde_json::to_string(value)
            .and_then(|text| serde_json::from_str(&text))
            .unwrap_or_else(|err| {
                Json::Object(vec![(
                    "error".into(),
                    Json::String(format!("cannot print the result as JSON: {err}")),
                )])
            });
        Outcome {
            json,
            human: human.into(),
            streamed: false,
        }
    }

    /// A command that already printed everything it had to say.
    pub(crate) fn streamed() -> Outcome {
        Outcome {
            json: Json::Null,
            human: String::new(),
            streamed: true,
        }
    }

    /// The JSON form (as text, keys in wire order) and the human-readable
    /// lines, for `relayger mcp`'s structured content and short text.
    pub(crate) fn into_parts(self) -> (String, String) {
        let json = serde_json::to_string(&self.json)
            .unwrap_or_else(|err| format!("cannot print the result as JSON: {err}"));
        (json, self.human)
    }

    /// The text to print on stdout in `mode` (without the final newline);
    /// `None` when the command printed as it went.
    pub(crate) fn render(self, mode: Mode) -> Option<String> {
        if self.streamed {
            return None;
        }
        let text = match mode {
            Mode::Human => return Some(self.human),
            Mode::Json => serde_json::to_string_pretty(&self.json),
            Mode::Compact => serde_json::to_string(&self.json.compact()),
        };
        Some(text.unwrap_or_else(|err| format!("cannot print the result as JSON: {err}")))
    }
}

/// `value` on one line for a stream of JSON lines (NDJSON): as it is with
/// `--json`, without nulls and empty fields with `--compact`; `human`
/// otherwise.
pub(crate) fn line<T: Serialize>(value: &T, mode: Mode, human: impl FnOnce() -> String) -> String {
    if mode == Mode::Human {
        return human();
    }
    let json = serde_json::to_string(value)
        .and_then(|text| serde_json::from_str::<Json>(&text))
        .map(|json| {
            if mode == Mode::Compact {
                json.compact()
            } else {
                json
            }
        });
    json.and_then(|json| serde_json::to_string(&json))
        .unwrap_or_else(|err| format!("cannot print the event as JSON: {err}"))
}

/// A warning about a command that still goes ahead, for stderr:
/// `warning: CODE: MESSAGE`, or `{"warning":{"code","message"}}` on one
/// line in the JSON modes (shaped like the error envelope).
pub(crate) fn warning(mode: Mode, code: &str, message: &str) -> String {
    match mode {
        Mode::Human => format!("warning: {code}: {message}"),
        Mode::Json | Mode::Compact => {
            serde_json::json!({"warning": {"code": code, "message": message}}).to_string()
        }
    }
}

/// A JSON value whose objects keep their keys in the order written
/// (`serde_json::Value` sorts them unless a crate-wide feature is on).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Json {
    Null,
    Bool(bool),
    Number(serde_json::Number),
    String(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

impl Json {
    /// Without null fields and without fields whose value is an empty
    /// string, array or object, recursively (a field emptied by the pruning
    /// goes too). Array elements are pruned inside but never removed, so
    /// positions keep their meaning.
    pub(crate) fn compact(self) -> Json {
        match self {
            Json::Object(fields) => Json::Object(
                fields
                    .into_iter()
                    .map(|(key, value)| (key, value.compact()))
                    .filter(|(_, value)| !value.is_empty())
                    .collect(),
            ),
            Json::Array(items) => Json::Array(items.into_iter().map(Json::compact).collect()),
            other => other,
        }
    }

    fn is_empty(&self) -> bool {
        match self {
            Json::Null => true,
            Json::String(text) => text.is_empty(),
            Json::Array(items) => items.is_empty(),
            Json::Object(fields) => fields.is_empty(),
            Json::Bool(_) | Json::Number(_) => false,
        }
    }
}

impl Serialize for Json {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Json::Null => serializer.serialize_unit(),
            Json::Bool(value) => serializer.serialize_bool(*value),
            Json::Number(number) => number.serialize(serializer),
            Json::String(text) => serializer.serialize_str(text),
            Json::Array(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Json::Object(fields) => {
                let mut map = serializer.serialize_map(Some(fields.len()))?;
                for (key, value) in fields {
                    map.serialize_entry(key, value)?;
                }
                map.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Json, D::Error> {
        deserializer.deserialize_any(JsonVisitor)
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_unit<E>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }

    fn visit_bool<E>(self, value: bool) -> Result<Json, E> {
        Ok(Json::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Json, E> {
        Ok(Json::Number(value.into()))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Json, E> {
        Ok(Json::Number(value.into()))
    }

    fn visit_f64<E>(self, value: f64) -> Result<Json, E> {
        Ok(serde_json::Number::from_f64(value).map_or(Json::Null, Json::Number))
    }

    fn visit_str<E>(self, value: &str) -> Result<Json, E> {
        Ok(Json::String(value.to_owned()))
    }

    fn visit_string<E>(self, value: String) -> Result<Json, E> {
        Ok(Json::String(value))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Json::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        let mut fields = Vec::new();
        while let Some((key, value)) = map.next_entry::<String, Json>()? {
            fields.push((key, value));
        }
        Ok(Json::Object(fields))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(text: &str) -> Json {
        serde_json::from_str(text).expect("JSON")
    }

    #[test]
    fn compact_table() {
        let table = [
            (r#"{"a":null,"b":1}"#, r#"{"b":1}"#),
            (r#"{"a":"","b":[],"c":{}}"#, r#"{}"#),
            (
                r#"{"a":false,"b":0,"c":"x"}"#,
                r#"{"a":false,"b":0,"c":"x"}"#,
            ),
            (r#"{"a":{"b":null}}"#, r#"{}"#),
            (r#"{"a":{"b":[],"c":2}}"#, r#"{"a":{"c":2}}"#),
            (r#"{"m":[{"x":null},{"y":1}]}"#, r#"{"m":[{},{"y":1}]}"#),
            (r#"[null,"",3]"#, r#"[null,"",3]"#),
            (r#""text""#, r#""text""#),
            (
                r#"{"z":1,"a":2,"m":{"y":null,"b":1.5}}"#,
                r#"{"z":1,"a":2,"m":{"b":1.5}}"#,
            ),
        ];
        for (input, expected) in table {
            let compacted = serde_json::to_string(&json(input).compact()).expect("print");
            assert_eq!(compacted, expected, "{input}");
        }
    }

    #[test]
    fn a_warning_reads_like_an_error() {
        assert_eq!(
            warning(Mode::Human, "deadline_passed", "late"),
            "warning: deadline_passed: late"
        );
        for mode in [Mode::Json, Mode::Compact] {
            assert_eq!(
                warning(mode, "deadline_passed", "late"),
                r#"{"warning":{"code":"deadline_passed","message":"late"}}"#
            );
        }
    }

    #[test]
    fn keys_keep_their_order() {
        let text = r#"{"conversationId":"r","messageId":"m","seq":1,"sender":{"id":"i","number":"100000001"},"ask":false}"#;
        assert_eq!(serde_json::to_string(&json(text)).expect("print"), text);
    }
}
