use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use time::format_description::well_known::Rfc3339;
use time::{OffsetDateTime, UtcOffset};

/// A point in time on the wire: RFC 3339 in UTC with `Z`
/// (`2026-10-02T12:00:00Z`). Parsing accepts only the `Z` form, so a deadline
/// never silently depends on a local offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(pub OffsetDateTime);

impl Timestamp {
    /// Parses `2026-10-02T12:00:00Z` (fractional seconds allowed).
    pub fn parse(text: &str) -> Result<Timestamp, String> {
        // RFC 3339 also allows a space for the `T`; the wire form does not.
        if !text.ends_with('Z') || text.as_bytes().get(10) != Some(&b'T') {
            return Err(format!(
                "`{text}` is not a UTC time: write RFC 3339 with Z, e.g. 2026-10-02T12:00:00Z"
            ));
        }
        OffsetDateTime::parse(text, &Rfc3339)
            .map(Timestamp)
            .map_err(|e| {
                format!("`{text}` is not an RFC 3339 time ({e}); e.g. 2026-10-02T12:00:00Z")
            })
    }

    pub fn now() -> Timestamp {
        Timestamp(OffsetDateTime::now_utc())
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let utc = self.0.to_offset(UtcOffset::UTC);
        match utc.format(&Rfc3339) {
            Ok(text) => f.write_str(&text),
            Err(_) => Err(fmt::Error),
        }
    }
}

impl From<OffsetDateTime> for Timestamp {
    fn from(value: OffsetDateTime) -> Self {
        Timestamp(value)
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Timestamp::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_utc_z_times_parse() {
        let good = [
            "2026-10-02T12:00:00Z",
            "2026-10-02T12:00:00.5Z",
            "1999-12-31T23:59:59Z",
        ];
        for text in good {
            assert!(Timestamp::parse(text).is_ok(), "{text}");
        }
        let bad = [
            "2026-10-02T12:00:00+02:00",
            "2026-10-02T12:00:00+00:00",
            "2026-10-02 12:00:00Z",
            "2026-10-02",
            "tomorrow",
            "2026-13-02T12:00:00Z",
            "",
        ];
        for text in bad {
            assert!(Timestamp::parse(text).is_err(), "{text}");
        }
    }

    #[test]
    fn displays_in_utc_with_z_whatever_the_offset() {
        let t = OffsetDateTime::parse("2026-10-02T14:00:00+02:00", &Rfc3339).expect("parse");
        assert_eq!(Timestamp(t).to_string(), "2026-10-02T12:00:00Z");
        let json = serde_json::to_string(&Timestamp(t)).expect("json");
        assert_eq!(json, "\"2026-10-02T12:00:00Z\"");
    }
}
