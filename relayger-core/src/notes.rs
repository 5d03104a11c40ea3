//! Limits on a runtime's private notes.
//!
//! Notes are what an assistant remembers about a room between jobs. They are
//! small and few on purpose: they are read into a model's context, and a
//! runaway handler must not be able to fill the database.

use std::collections::HashSet;

use uuid::Uuid;

/// Notes one runtime may hold across all its rooms.
pub const MAX_NOTES_PER_RUNTIME: usize = 64;
/// A note's text, in UTF-8 bytes (not characters), so the storage cost is
/// the same whatever the script.
pub const MAX_NOTE_BYTES: usize = 4000;
/// Source messages one note may cite.
pub const MAX_NOTE_SOURCES: usize = 8;
/// Notes in one list page; also the default page size.
pub const MAX_NOTES_PAGE: u32 = 20;
/// Longest note key, in characters (all ASCII, so also bytes).
pub const MAX_NOTE_KEY_CHARS: usize = 64;

/// Why a note write is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoteError {
    /// The key is empty, too long or uses other characters.
    #[error(
        "a note key is 1 to {MAX_NOTE_KEY_CHARS} characters of A-Z, a-z, 0-9, `.`, `_`, `:` and `-`"
    )]
    InvalidKey,
    /// An empty note says nothing; deleting is a separate operation.
    #[error("a note's text must not be empty")]
    EmptyText,
    /// More than [`MAX_NOTE_BYTES`] UTF-8 bytes.
    #[error("a note's text is at most {MAX_NOTE_BYTES} UTF-8 bytes, got {bytes}")]
    TextTooLong { bytes: usize },
    /// More than [`MAX_NOTE_SOURCES`] sources.
    #[error("a note cites at most {MAX_NOTE_SOURCES} source messages, got {count}")]
    TooManySources { count: usize },
    /// The same source twice: almost certainly a handler bug.
    #[error("source message {0} is listed more than once")]
    DuplicateSource(Uuid),
    /// The runtime already holds [`MAX_NOTES_PER_RUNTIME`] notes.
    #[error("a runtime holds at most {MAX_NOTES_PER_RUNTIME} notes")]
    TooManyNotes,
}

/// Keys are identifiers chosen by handler code, so they stay in a plain
/// ASCII alphabet that is safe in URLs, logs and shell arguments.
pub fn validate_note_key(key: &str) -> Result<(), NoteError> {
    let allowed =
        |byte: u8| byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b':' | b'-');
    if (1..=MAX_NOTE_KEY_CHARS).contains(&key.len()) && key.bytes().all(allowed) {
        Ok(())
    } else {
        Err(NoteError::InvalidKey)
    }
}

/// Checks one note write before it touches the database: key, text size and
/// the source list. Whether the sources are real messages of the same room
/// is the store's job.
pub fn validate_note(key: &str, text: &str, sources: &[Uuid]) -> Result<(), NoteError> {
    validate_note_key(key)?;
    if text.is_empty() {
        return Err(NoteError::EmptyText);
    }
    if text.len() > MAX_NOTE_BYTES {
        return Err(NoteError::TextTooLong { bytes: text.len() });
    }
    if sources.len() > MAX_NOTE_SOURCES {
        return Err(NoteError::TooManySources {
            count: sources.len(),
        });
    }
    let mut seen = HashSet::with_capacity(sources.len());
    for source in sources {
        if !seen.insert(source) {
            return Err(NoteError::DuplicateSource(*source));
        }
    }
    Ok(())
}

/// Whether a runtime that holds `existing_notes` may create one more.
/// Updates never need this: they do not add a note.
pub fn ensure_room_for_new_note(existing_notes: usize) -> Result<(), NoteError> {
    if existing_notes < MAX_NOTES_PER_RUNTIME {
        Ok(())
    } else {
        Err(NoteError::TooManyNotes)
    }
}

/// The page size for a notes listing: 20 when not given, never more than 20
/// and never 0 (a page of nothing is never what the caller meant).
pub fn clamp_notes_page(limit: Option<u32>) -> u32 {
    limit.unwrap_or(MAX_NOTES_PAGE).clamp(1, MAX_NOTES_PAGE)
}

/// What a note write with a given `version` means: `0` creates, anything
/// else updates the note that currently has exactly that version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoteWrite {
    /// Version 0: the note must not exist yet.
    Create,
    /// The note must exist and currently have `expected_version`.
    Update { expected_version: u64 },
}

impl NoteWrite {
    /// Reads the `version` a client sent with a note.
    pub fn from_version(version: u64) -> Self {
        match version {
            0 => NoteWrite::Create,
            expected_version => NoteWrite::Update { expected_version },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(n: u128) -> Uuid {
        Uuid::from_u128(n)
    }

    #[test]
    fn key_table() {
        let table = [
            ("decision", true),
            ("a", true),
            ("Room-7:summary_v2.final", true),
            (&"k".repeat(64) as &str, true),
            (&"k".repeat(65), false),
            ("", false),
            ("has space", false),
            ("slash/key", false),
            ("clé", false),
            ("emoji🙂", false),
            ("tab\t", false),
        ];
        for (key, ok) in table {
            assert_eq!(validate_note_key(key).is_ok(), ok, "{key:?}");
        }
    }

    #[test]
    fn note_table() {
        // "é" is two UTF-8 bytes: 2000 of them are 4000 bytes in 2000 characters.
        let multibyte_at_limit = "é".repeat(2000);
        let multibyte_over = format!("{multibyte_at_limit}a");
        let three_byte_over = "€".repeat(1334);
        let ascii_at_limit = "a".repeat(4000);
        let eight: Vec<Uuid> = (1..=8).map(source).collect();
        let nine: Vec<Uuid> = (1..=9).map(source).collect();
        let duplicated = [source(1), source(2), source(1)];
        type Case<'a> = (&'a str, &'a str, &'a [Uuid], Result<(), NoteError>);
        let table: Vec<Case<'_>> = vec![
            ("decision", "ship on Friday", &[], Ok(())),
            ("decision", &multibyte_at_limit, &eight, Ok(())),
            ("decision", &ascii_at_limit, &[], Ok(())),
            (
                "decision",
                &multibyte_over,
                &[],
                Err(NoteError::TextTooLong { bytes: 4001 }),
            ),
            (
                "decision",
                &three_byte_over,
                &[],
                Err(NoteError::TextTooLong { bytes: 4002 }),
            ),
            ("decision", "", &[], Err(NoteError::EmptyText)),
            ("decision", " ", &[], Ok(())),
            ("bad key", "text", &[], Err(NoteError::InvalidKey)),
            (
                "decision",
                "text",
                &nine,
                Err(NoteError::TooManySources { count: 9 }),
            ),
            (
                "decision",
                "text",
                &duplicated,
                Err(NoteError::DuplicateSource(source(1))),
            ),
        ];
        for (key, text, sources, expected) in table {
            assert_eq!(
                validate_note(key, text, sources),
                expected,
                "{key:?} {} bytes {} sources",
                text.len(),
                sources.len()
            );
        }
        assert!(multibyte_over.chars().count() < MAX_NOTE_BYTES);
    }

    #[test]
    fn capacity_and_paging() {
        assert_eq!(ensure_room_for_new_note(0), Ok(()));
        assert_eq!(ensure_room_for_new_note(63), Ok(()));
        assert_eq!(ensure_room_for_new_note(64), Err(NoteError::TooManyNotes));
        let pages = [
            (None, 20),
            (Some(0), 1),
            (Some(1), 1),
            (Some(5), 5),
            (Some(20), 20),
            (Some(21), 20),
            (Some(u32::MAX), 20),
        ];
        for (limit, expected) in pages {
            assert_eq!(clamp_notes_page(limit), expected, "{limit:?}");
        }
    }

    #[test]
    fn version_zero_creates() {
        assert_eq!(NoteWrite::from_version(0), NoteWrite::Create);
        assert_eq!(
            NoteWrite::from_version(3),
            NoteWrite::Update {
                expected_version: 3
            }
        );
    }
}
