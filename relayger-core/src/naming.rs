//! The names people type and read: display names (identities and rooms),
//! token labels and room restrictions, and local profile names. The API
//! and the worker's profile directory both check these here, so a limit
//! or its message exists once.
//!
//! Runtime names have a rule of their own (`runtime_name`) but share the
//! portable character set below with profile names.

/// The most characters a display name has, after trimming.
pub const MAX_DISPLAY_NAME_CHARS: usize = 100;
/// The most characters a token's label has, after trimming.
pub const MAX_TOKEN_LABEL_CHARS: usize = 100;
/// The most rooms a token may be restricted to.
pub const MAX_TOKEN_ROOMS: usize = 100;
/// The longest profile name, in bytes (all allowed characters are ASCII).
pub const MAX_PROFILE_NAME_LEN: usize = 64;
/// The profile-name rule, as users read it in errors.
pub const PROFILE_NAME_RULE: &str = "use 1 to 64 of A-Z a-z 0-9 . _ -";

/// Why a name, label or room list was refused. The messages are the API's
/// `invalid_argument` messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NameError {
    /// Empty after trimming, or longer than [`MAX_DISPLAY_NAME_CHARS`].
    #[error("name must have 1 to {} characters", MAX_DISPLAY_NAME_CHARS)]
    DisplayNameLength,
    /// A display name with a control character (a newline, say).
    #[error("name must not contain control characters")]
    DisplayNameControl,
    /// A display name with an invisible formatting character (general
    /// category Cf), which can reverse or hide part of how it reads.
    #[error(
        "name must not contain invisible formatting characters (direction controls such as \
         U+202E, zero-width characters, a byte order mark: Unicode category Cf)"
    )]
    DisplayNameFormat,
    /// A label longer than [`MAX_TOKEN_LABEL_CHARS`] or with a control
    /// character.
    #[error(
        "label must have at most {} characters and no control characters",
        MAX_TOKEN_LABEL_CHARS
    )]
    TokenLabel,
    /// An empty room restriction, or one longer than [`MAX_TOKEN_ROOMS`].
    #[error("roomIds must list 1 to {} rooms", MAX_TOKEN_ROOMS)]
    TokenRoomCount,
}

/// A display name: 1 to [`MAX_DISPLAY_NAME_CHARS`] characters after
/// trimming, no control characters and no invisible formatting characters
/// ([`is_format_char`]). Returns the trimmed name.
pub fn display_name(name: &str) -> Result<&str, NameError> {
    let name = name.trim();
    let chars = name.chars().count();
    if chars == 0 || chars > MAX_DISPLAY_NAME_CHARS {
        return Err(NameError::DisplayNameLength);
    }
    if name.chars().any(char::is_control) {
        return Err(NameError::DisplayNameControl);
    }
    if name.chars().any(is_format_char) {
        return Err(NameError::DisplayNameFormat);
    }
    Ok(name)
}

/// Whether `c` is an invisible formatting character, Unicode general
/// category Cf: bidirectional controls (U+202A–U+202E, U+2066–U+2069),
/// zero-width characters (U+200B–U+200D, U+2060), the byte order mark
/// (U+FEFF), the soft hyphen, tags. Shown to a person, they reorder or hide
/// what is around them, so names refuse them and the CLI escapes them in
/// what others wrote.
pub fn is_format_char(c: char) -> bool {
    unicode_general_category::get_general_category(c)
        == unicode_general_category::GeneralCategory::Format
}

/// A token's optional label: trimmed, at most [`MAX_TOKEN_LABEL_CHARS`]
/// characters, no control characters. A label that trims to nothing is no
/// label.
pub fn token_label(label: Option<&str>) -> Result<Option<&str>, NameError> {
    match label.map(str::trim) {
        Some(label)
            if label.chars().count() > MAX_TOKEN_LABEL_CHARS
                || label.chars().any(char::is_control) =>
        {
            Err(NameError::TokenLabel)
        }
        Some("") | None => Ok(None),
        Some(label) => Ok(Some(label)),
    }
}

/// A token's room restriction lists 1 to [`MAX_TOKEN_ROOMS`] rooms
/// (counted as given, before duplicates are dropped).
pub fn token_room_count(count: usize) -> Result<(), NameError> {
    if (1..=MAX_TOKEN_ROOMS).contains(&count) {
        Ok(())
    } else {
        Err(NameError::TokenRoomCount)
    }
}

/// The characters of names that end up in file names, paths and URLs:
/// ASCII letters and digits, `.`, `_` and `-`.
pub fn is_portable_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')
}

/// Whether `name` is a valid profile name: 1 to [`MAX_PROFILE_NAME_LEN`]
/// portable characters, and not `.` or `..` (it names a file in the
/// profile directory).
pub fn is_valid_profile_name(name: &str) -> bool {
    (1..=MAX_PROFILE_NAME_LEN).contains(&name.len())
        && name.chars().all(is_portable_name_char)
        && name != "."
        && name != ".."
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_name_table() {
        let at_limit = "é".repeat(MAX_DISPLAY_NAME_CHARS);
        let over = "é".repeat(MAX_DISPLAY_NAME_CHARS + 1);
        let padded_at_limit = format!("  {}\t", "a".repeat(MAX_DISPLAY_NAME_CHARS));
        let table: [(&str, Result<&str, NameError>); 24] = [
            ("Ada", Ok("Ada")),
            ("שלום مرحبا", Ok("שלום مرحبا")),
            ("e\u{301}clair", Ok("e\u{301}clair")),
            ("  Ada Lovelace \n", Ok("Ada Lovelace")),
            ("Zoë 🦀", Ok("Zoë 🦀")),
            ("日本語の部屋", Ok("日本語の部屋")),
            (&at_limit, Ok(&at_limit)),
            (&padded_at_limit, Ok(&padded_at_limit[2..102])),
            (&over, Err(NameError::DisplayNameLength)),
            ("", Err(NameError::DisplayNameLength)),
            ("   ", Err(NameError::DisplayNameLength)),
            ("\t\n", Err(NameError::DisplayNameLength)),
            ("two\nlines", Err(NameError::DisplayNameControl)),
            ("bell\u{7}", Err(NameError::DisplayNameControl)),
            ("c1\u{85}x", Err(NameError::DisplayNameControl)),
            ("nul\0", Err(NameError::DisplayNameControl)),
            ("adm\u{202e}nimda", Err(NameError::DisplayNameFormat)),
            ("\u{2067}bob\u{2069}", Err(NameError::DisplayNameFormat)),
            ("a\u{200b}b", Err(NameError::DisplayNameFormat)),
            ("\u{feff}bob", Err(NameError::DisplayNameFormat)),
            ("bob\u{2060}", Err(NameError::DisplayNameFormat)),
            ("soft\u{ad}hyphen", Err(NameError::DisplayNameFormat)),
            ("tag\u{e0041}", Err(NameError::DisplayNameFormat)),
            ("\u{200e}left to right", Err(NameError::DisplayNameFormat)),
        ];
        for (name, expected) in table {
            assert_eq!(display_name(name), expected, "{name:?}");
        }
    }

    #[test]
    fn format_characters_are_category_cf() {
        let table = [
            ('\u{202e}', true),
            ('\u{202a}', true),
            ('\u{2066}', true),
            ('\u{200b}', true),
            ('\u{200d}', true),
            ('\u{feff}', true),
            ('\u{ad}', true),
            ('\u{600}', true),
            ('\u{e0001}', true),
            ('a', false),
            (' ', false),
            ('\u{301}', false),
            ('\u{a0}', false),
            ('\n', false),
            ('\u{5d0}', false),
            ('🦀', false),
        ];
        for (c, format) in table {
            assert_eq!(
                is_format_char(c),
                format,
                "{:?}",
                c.escape_unicode().to_string()
            );
        }
    }

    #[test]
    fn token_label_table() {
        let at_limit = "ß".repeat(MAX_TOKEN_LABEL_CHARS);
        let over = "ß".repeat(MAX_TOKEN_LABEL_CHARS + 1);
        type Case<'a> = (Option<&'a str>, Result<Option<&'a str>, NameError>);
        let table: [Case; 9] = [
            (None, Ok(None)),
            (Some(""), Ok(None)),
            (Some("   "), Ok(None)),
            (Some(" ci deploy "), Ok(Some("ci deploy"))),
            (Some("ラベル"), Ok(Some("ラベル"))),
            (Some(&at_limit), Ok(Some(&at_limit))),
            (Some(&over), Err(NameError::TokenLabel)),
            (Some("tab\tinside"), Err(NameError::TokenLabel)),
            (Some("esc\u{1b}[0m"), Err(NameError::TokenLabel)),
        ];
        for (label, expected) in table {
            assert_eq!(token_label(label), expected, "{label:?}");
        }
    }

    #[test]
    fn token_room_count_table() {
        let table = [
            (0, false),
            (1, true),
            (MAX_TOKEN_ROOMS, true),
            (MAX_TOKEN_ROOMS + 1, false),
        ];
        for (count, valid) in table {
            assert_eq!(token_room_count(count).is_ok(), valid, "{count}");
        }
    }

    #[test]
    fn profile_name_table() {
        let at_limit = "p".repeat(MAX_PROFILE_NAME_LEN);
        let over = "p".repeat(MAX_PROFILE_NAME_LEN + 1);
        let table: [(&str, bool); 15] = [
            ("default", true),
            ("work.agent_2-b", true),
            ("-dash-first", true),
            (".hidden", true),
            ("...", true),
            (&at_limit, true),
            (&over, false),
            ("", false),
            (".", false),
            ("..", false),
            ("a/b", false),
            ("has space", false),
            ("émile", false),
            ("tab\tname", false),
            ("nul\0", false),
        ];
        for (name, valid) in table {
            assert_eq!(is_valid_profile_name(name), valid, "{name:?}");
        }
    }

    #[test]
    fn messages_name_their_limits() {
        let table = [
            (
                NameError::DisplayNameLength,
                "name must have 1 to 100 characters",
            ),
            (
                NameError::DisplayNameControl,
                "name must not contain control characters",
            ),
            (
                NameError::TokenLabel,
                "label must have at most 100 characters and no control characters",
            ),
            (
                NameError::TokenRoomCount,
                "roomIds must list 1 to 100 rooms",
            ),
        ];
        for (err, message) in table {
            assert_eq!(err.to_string(), message);
        }
        assert!(PROFILE_NAME_RULE.contains(&MAX_PROFILE_NAME_LEN.to_string()));
    }
}
