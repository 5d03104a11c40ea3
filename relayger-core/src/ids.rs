//! Identity numbers: what people type to reach someone (`100000042`).

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Shortest accepted identity number. Short enough for hand-made numbers in
/// tests and invites, long enough not to be mistaken for a small count.
const MIN_DIGITS: usize = 6;
/// Longest accepted identity number; the E.164 length, so numbers stay
/// comfortable to read aloud and fit every integer type on every client.
const MAX_DIGITS: usize = 15;
/// The server mints numbers from this base so they all have nine digits for
/// a long time and never start with zero.
const SEQUENCE_BASE: u64 = 100_000_000;

/// Why a text is not an identity number.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdentityNumberError {
    /// Fewer than 6 or more than 15 digits.
    #[error("an identity number has {MIN_DIGITS} to {MAX_DIGITS} digits, got {length}")]
    Length { length: usize },
    /// Anything but ASCII digits, including other scripts' digits.
    #[error("an identity number contains only the digits 0-9")]
    NotDigits,
    /// A leading zero would give one number two spellings.
    #[error("an identity number does not start with 0")]
    LeadingZero,
    /// The minting sequence went past the largest number the format allows.
    #[error("identity sequence {sequence} is beyond the largest identity number")]
    SequenceExhausted { sequence: u64 },
}

/// A validated identity number. Kept as the digits the user typed (never as
/// an integer) so that JSON clients in any language see exactly one spelling.
/// Ordering is numeric, which for digit strings without leading zeros is
/// "shorter first, then by digits".
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IdentityNumber(String);

impl IdentityNumber {
    /// Validates `text`: ASCII digits only, 6 to 15 of them, no leading zero.
    pub fn parse(text: &str) -> Result<Self, IdentityNumberError> {
        if !text.bytes().all(|byte| byte.is_ascii_digit()) {
            return Err(IdentityNumberError::NotDigits);
        }
        // All ASCII from here on, so bytes are characters.
        if !(MIN_DIGITS..=MAX_DIGITS).contains(&text.len()) {
            return Err(IdentityNumberError::Length { length: text.len() });
        }
        if text.starts_with('0') {
            return Err(IdentityNumberError::LeadingZero);
        }
        Ok(IdentityNumber(text.to_owned()))
    }

    /// The number the server assigns for the `n`-th value of its identity
    /// sequence (`100000000 + n`), so the database sequence is the only
    /// source of uniqueness.
    pub fn from_sequence(sequence: u64) -> Result<Self, IdentityNumberError> {
        sequence
            .checked_add(SEQUENCE_BASE)
            .map(|number| number.to_string())
            .filter(|digits| digits.len() <= MAX_DIGITS)
            .map(IdentityNumber)
            .ok_or(IdentityNumberError::SequenceExhausted { sequence })
    }

    /// The digits, for storage and display.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Ord for IdentityNumber {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0
            .len()
            .cmp(&other.0.len())
            .then_with(|| self.0.cmp(&other.0))
    }
}

impl PartialOrd for IdentityNumber {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for IdentityNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for IdentityNumber {
    type Err = IdentityNumberError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        IdentityNumber::parse(text)
    }
}

impl AsRef<str> for IdentityNumber {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Serialize for IdentityNumber {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for IdentityNumber {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        IdentityNumber::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_table() {
        use IdentityNumberError::*;
        let table: [(&str, Result<&str, IdentityNumberError>); 15] = [
            ("100000042", Ok("100000042")),
            ("123456", Ok("123456")),
            ("999999999999999", Ok("999999999999999")),
            ("12345", Err(Length { length: 5 })),
            ("1234567890123456", Err(Length { length: 16 })),
            ("", Err(Length { length: 0 })),
            ("012345", Err(LeadingZero)),
            ("000000", Err(LeadingZero)),
            ("12345a", Err(NotDigits)),
            ("+123456", Err(NotDigits)),
            ("123 456", Err(NotDigits)),
            ("-12345", Err(NotDigits)),
            ("1234.5", Err(NotDigits)),
            // Arabic-Indic digits are digits to Unicode, not to us.
            ("١٢٣", Err(NotDigits)),
            ("１２３４５６", Err(NotDigits)),
        ];
        for (text, expected) in table {
            let parsed = IdentityNumber::parse(text);
            assert_eq!(
                parsed
                    .as_ref()
                    .map(IdentityNumber::as_str)
                    .map_err(Clone::clone),
                expected,
                "{text:?}"
            );
            assert_eq!(text.parse::<IdentityNumber>(), parsed, "{text:?}");
        }
    }

    #[test]
    fn from_sequence_table() {
        let table: [(u64, Option<&str>); 5] = [
            (0, Some("100000000")),
            (42, Some("100000042")),
            (899_999_999, Some("999999999")),
            (999_999_899_999_999, Some("999999999999999")),
            (999_999_900_000_000, None),
        ];
        for (sequence, expected) in table {
            let minted = IdentityNumber::from_sequence(sequence);
            match expected {
                Some(digits) => {
                    let number = minted.expect("in range");
                    assert_eq!(number.as_str(), digits);
                    assert_eq!(IdentityNumber::parse(digits), Ok(number));
                }
                None => assert_eq!(
                    minted,
                    Err(IdentityNumberError::SequenceExhausted { sequence })
                ),
            }
        }
        assert!(IdentityNumber::from_sequence(u64::MAX).is_err());
    }

    #[test]
    fn ordering_is_numeric() {
        let mut numbers: Vec<IdentityNumber> = ["1000000", "999999", "100000042", "123456"]
            .into_iter()
            .map(|text| IdentityNumber::parse(text).expect("valid"))
            .collect();
        numbers.sort();
        let sorted: Vec<&str> = numbers.iter().map(IdentityNumber::as_str).collect();
        assert_eq!(sorted, ["123456", "999999", "1000000", "100000042"]);
    }

    #[test]
    fn serde_is_a_validated_string() {
        let number = IdentityNumber::parse("100000042").expect("valid");
        assert_eq!(
            serde_json::to_string(&number).expect("serialize"),
            "\"100000042\""
        );
        let back: IdentityNumber = serde_json::from_str("\"100000042\"").expect("valid");
        assert_eq!(back, number);
        for bad in ["100000042", "\"0123456\"", "\"12\"", "null", "\"abcdefg\""] {
            assert!(
                serde_json::from_str::<IdentityNumber>(bad).is_err(),
                "{bad}"
            );
        }
    }
}
