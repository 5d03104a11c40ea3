//! The plaintext inside a sealed message.

use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// What a sealed message says once opened: the same two shapes as ordinary
/// content, so a reader treats an opened message like a plain one.
///
/// On the wire (inside the ciphertext) it is compact JSON, exactly
/// `{"text": "..."}` or `{"schema": "...", "data": <any JSON>, "text"?: "..."}`.
/// Reading is strict (unknown or duplicate fields, a `schema` without `data`,
/// `data` without `schema`, an empty `schema`, or a `null` where a string
/// belongs are refused) so every implementation agrees on what a message says.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "RawContent")]
pub enum SealedContent {
    /// Plain text.
    Text {
        /// The message text (may be empty).
        text: String,
    },
    /// Structured data a program can act on, with an optional human-readable
    /// rendering.
    Structured {
        /// Names the shape of `data` (non-empty); Relayger does not interpret it.
        schema: String,
        /// Any JSON value, `null` included.
        data: Value,
        /// What a person should read, if the sender supplied it.
        text: Option<String>,
    },
}

impl SealedContent {
    /// The human-readable text, if any, for clients that only print text.
    pub fn text(&self) -> Option<&str> {
        match self {
            SealedContent::Text { text } => Some(text),
            SealedContent::Structured { text, .. } => text.as_deref(),
        }
    }

    /// Refuses content that [`SealedContent`]'s reader would refuse, so a
    /// sender can never seal what no recipient accepts (the variants' fields
    /// are public, so an empty schema can be built by hand).
    pub(super) fn check(&self) -> Result<(), String> {
        match self {
            SealedContent::Structured { schema, .. } if schema.is_empty() => {
                Err("schema must not be empty".to_owned())
            }
            _ => Ok(()),
        }
    }

    /// The exact plaintext bytes: compact JSON, fields in the documented
    /// order. Serializing a `String`/`Value` tree cannot fail.
    pub(super) fn to_plaintext(&self) -> Result<Vec<u8>, String> {
        serde_json::to_vec(self).map_err(|e| e.to_string())
    }

    /// Reads opened plaintext strictly.
    pub(super) fn from_plaintext(bytes: &[u8]) -> Result<SealedContent, String> {
        serde_json::from_slice(bytes).map_err(|e| e.to_string())
    }
}

impl Serialize for SealedContent {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            SealedContent::Text { text } => {
                let mut map = serializer.serialize_map(Some(1))?;
                map.serialize_entry("text", text)?;
                map.end()
            }
            SealedContent::Structured { schema, data, text } => {
                let mut map = serializer.serialize_map(Some(2 + usize::from(text.is_some())))?;
                map.serialize_entry("schema", schema)?;
                map.serialize_entry("data", data)?;
                if let Some(text) = text {
                    map.serialize_entry("text", text)?;
                }
                map.end()
            }
        }
    }
}

/// Every field optional so the combinations can be checked with plain
/// messages; `present` makes an explicit `null` different from absence.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawContent {
    #[serde(default, deserialize_with = "present")]
    text: Option<String>,
    #[serde(default, deserialize_with = "present")]
    schema: Option<String>,
    #[serde(default, deserialize_with = "present")]
    data: Option<Value>,
}

fn present<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(deserializer).map(Some)
}

impl TryFrom<RawContent> for SealedContent {
    type Error = String;

    fn try_from(raw: RawContent) -> Result<SealedContent, String> {
        match (raw.schema, raw.data, raw.text) {
            (None, None, Some(text)) => Ok(SealedContent::Text { text }),
            (Some(schema), Some(data), text) => {
                let content = SealedContent::Structured { schema, data, text };
                content.check()?;
                Ok(content)
            }
            (Some(_), None, _) => Err("schema without data".to_owned()),
            (None, Some(_), _) => Err("data without schema".to_owned()),
            (None, None, None) => Err("content needs text, or schema and data".to_owned()),
        }
    }
}
