//! The deterministic builtin handlers: examples that need no model.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A builtin name that does not exist.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown builtin `{0}`; expected `uppercase` or `echo`")]
pub struct UnknownBuiltin(pub String);

/// A handler that runs inside the worker without any model, so the whole
/// listener path can be tried (and tested) with zero setup and zero cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Builtin {
    /// Replies with the text in upper case.
    Uppercase,
    /// Replies with the text unchanged.
    Echo,
}

impl Builtin {
    /// Every builtin, for help texts and tests.
    pub const ALL: [Builtin; 2] = [Builtin::Uppercase, Builtin::Echo];

    /// Reads the `--builtin` value.
    pub fn parse(name: &str) -> Result<Self, UnknownBuiltin> {
        match name {
            "uppercase" => Ok(Builtin::Uppercase),
            "echo" => Ok(Builtin::Echo),
            other => Err(UnknownBuiltin(other.to_owned())),
        }
    }

    /// The name as typed on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Builtin::Uppercase => "uppercase",
            Builtin::Echo => "echo",
        }
    }

    /// The reply text. Uppercase is Unicode's default full case mapping
    /// (`str::to_uppercase`), which depends on no locale: `istanbul` gives
    /// `ISTANBUL` on every machine, even a Turkish one, and `ß` becomes `SS`.
    pub fn apply(self, text: &str) -> String {
        match self {
            Builtin::Uppercase => text.to_uppercase(),
            Builtin::Echo => text.to_owned(),
        }
    }
}

impl fmt::Display for Builtin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Builtin {
    type Err = UnknownBuiltin;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Builtin::parse(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uppercase_table() {
        let table = [
            ("straße", "STRASSE"),
            ("istanbul", "ISTANBUL"),
            ("ǆ", "Ǆ"),
            ("\u{1c5}", "\u{1c4}"),
            ("ﬁ", "FI"),
            ("\u{149}", "\u{2bc}N"),
            ("\u{390}", "\u{399}\u{308}\u{301}"),
            ("hello from relayger", "HELLO FROM RELAYGER"),
            ("What is the status?", "WHAT IS THE STATUS?"),
            ("", ""),
            ("🙂👍🏽 ok", "🙂👍🏽 OK"),
            ("123 + İı", "123 + İI"),
            ("ÿ", "Ÿ"),
        ];
        for (input, expected) in table {
            assert_eq!(Builtin::Uppercase.apply(input), expected, "{input:?}");
        }
    }

    #[test]
    fn echo_is_identity() {
        for input in ["", "straße", "  spaces  ", "line\nbreak", "🙂"] {
            assert_eq!(Builtin::Echo.apply(input), input);
        }
    }

    #[test]
    fn names_round_trip() {
        for builtin in Builtin::ALL {
            assert_eq!(Builtin::parse(builtin.as_str()), Ok(builtin));
            assert_eq!(builtin.to_string().parse::<Builtin>(), Ok(builtin));
            let json = serde_json::to_string(&builtin).expect("serialize");
            assert_eq!(json, format!("\"{builtin}\""));
        }
        for bad in ["Uppercase", "UPPERCASE", "upper", "", " echo"] {
            assert_eq!(Builtin::parse(bad), Err(UnknownBuiltin(bad.to_owned())));
        }
    }
}
