//! Runtime names: what `worker run NAME` types. One agent's runtimes are
//! told apart by name, so the name is short, printable and unambiguous in
//! logs, paths and URLs.

use crate::naming::is_portable_name_char;

/// The rule, as users read it in errors.
pub const RUNTIME_NAME_RULE: &str =
    "a runtime name has 1 to 64 characters of A-Z a-z 0-9 . _ - and starts with a letter or digit";

/// The longest runtime name, in bytes (all allowed characters are ASCII).
pub const MAX_RUNTIME_NAME_LEN: usize = 64;

/// Whether `name` is a valid runtime name (see [`RUNTIME_NAME_RULE`]).
pub fn is_valid_runtime_name(name: &str) -> bool {
    name.len() <= MAX_RUNTIME_NAME_LEN
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
        && name.chars().all(is_portable_name_char)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_name_table() {
        let long = "a".repeat(MAX_RUNTIME_NAME_LEN);
        let too_long = "a".repeat(MAX_RUNTIME_NAME_LEN + 1);
        let table: [(&str, bool); 14] = [
            ("reply-worker", true),
            ("sdk_worker.2", true),
            ("9lives", true),
            ("A", true),
            (&long, true),
            (&too_long, false),
            ("", false),
            ("-dash-first", false),
            (".hidden", false),
            ("_under", false),
            ("has space", false),
            ("slash/name", false),
            ("émile", false),
            ("tab\tname", false),
        ];
        for (name, valid) in table {
            assert_eq!(is_valid_runtime_name(name), valid, "{name:?}");
        }
    }
}
