//! The one check of a job's result, wherever it comes from: the finish
//! routes, a process's stdout (the process ABI) and a Node `handle`'s return
//! value all call [`JobResult::validate`].

use crate::notes::{NoteError, validate_note};
use crate::wire::{JobResult, MAX_TEXT_BYTES};

/// Why a result cannot be committed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidResult {
    /// A reply and a skip reason: the job either answers or does not.
    #[error("`reply` and `skip` cannot both be given")]
    ReplyAndSkip,
    /// A failed attempt carries only its error and usage.
    #[error("`error` cannot be combined with `{0}` (only with `usage`)")]
    ErrorWith(&'static str),
    /// `reply`, `skip` or `error` given as an empty text.
    #[error("`{0}` must not be empty")]
    Empty(&'static str),
    /// A reply longer than a message may be.
    #[error("`reply` is {0} UTF-8 bytes, a message holds at most {MAX_TEXT_BYTES}")]
    ReplyTooLarge(usize),
    /// The note breaks a note rule.
    #[error("`note` {0}")]
    Note(NoteError),
}

impl JobResult {
    /// Checks the result's own rules (not the job's: the lease, the room's
    /// access and a note's version are the store's to judge).
    pub fn validate(&self) -> Result<(), InvalidResult> {
        for (field, text) in [
            ("reply", &self.reply),
            ("skip", &self.skip),
            ("error", &self.error),
        ] {
            if text.as_deref().is_some_and(str::is_empty) {
                return Err(InvalidResult::Empty(field));
            }
        }
        if let Some(reply) = &self.reply
            && reply.len() > MAX_TEXT_BYTES
        {
            return Err(InvalidResult::ReplyTooLarge(reply.len()));
        }
        if let Some(note) = &self.note {
            validate_note(&note.key, &note.text, &note.source_message_ids)
                .map_err(InvalidResult::Note)?;
        }
        if self.reply.is_some() && self.skip.is_some() {
            return Err(InvalidResult::ReplyAndSkip);
        }
        if self.error.is_some() {
            let other = [
                ("reply", self.reply.is_some()),
                ("skip", self.skip.is_some()),
                ("note", self.note.is_some()),
            ];
            if let Some((field, _)) = other.into_iter().find(|(_, given)| *given) {
                return Err(InvalidResult::ErrorWith(field));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::NoteInput;

    fn note(key: &str, text: &str) -> Option<NoteInput> {
        Some(NoteInput {
            key: key.to_owned(),
            text: text.to_owned(),
            version: 0,
            source_message_ids: Vec::new(),
        })
    }

    #[test]
    fn validate_table() {
        let text = |s: &str| Some(s.to_owned());
        let long = "x".repeat(MAX_TEXT_BYTES + 1);
        let table: Vec<(JobResult, Result<(), InvalidResult>)> = vec![
            (JobResult::default(), Ok(())),
            (
                JobResult {
                    reply: text("hi"),
                    note: note("k", "t"),
                    ..Default::default()
                },
                Ok(()),
            ),
            (
                JobResult {
                    skip: text("sealed"),
                    ..Default::default()
                },
                Ok(()),
            ),
            (
                JobResult {
                    error: text("boom"),
                    ..Default::default()
                },
                Ok(()),
            ),
            (
                JobResult {
                    reply: text("x".repeat(MAX_TEXT_BYTES).as_str()),
                    ..Default::default()
                },
                Ok(()),
            ),
            (
                JobResult {
                    reply: text("a"),
                    skip: text("b"),
                    ..Default::default()
                },
                Err(InvalidResult::ReplyAndSkip),
            ),
            (
                JobResult {
                    error: text("e"),
                    reply: text("a"),
                    ..Default::default()
                },
                Err(InvalidResult::ErrorWith("reply")),
            ),
            (
                JobResult {
                    error: text("e"),
                    skip: text("a"),
                    ..Default::default()
                },
                Err(InvalidResult::ErrorWith("skip")),
            ),
            (
                JobResult {
                    error: text("e"),
                    note: note("k", "t"),
                    ..Default::default()
                },
                Err(InvalidResult::ErrorWith("note")),
            ),
            (
                JobResult {
                    reply: text(""),
                    ..Default::default()
                },
                Err(InvalidResult::Empty("reply")),
            ),
            (
                JobResult {
                    skip: text(""),
                    ..Default::default()
                },
                Err(InvalidResult::Empty("skip")),
            ),
            (
                JobResult {
                    error: text(""),
                    ..Default::default()
                },
                Err(InvalidResult::Empty("error")),
            ),
            (
                JobResult {
                    reply: Some(long),
                    ..Default::default()
                },
                Err(InvalidResult::ReplyTooLarge(MAX_TEXT_BYTES + 1)),
            ),
            (
                JobResult {
                    note: note("bad key", "t"),
                    ..Default::default()
                },
                Err(InvalidResult::Note(NoteError::InvalidKey)),
            ),
            (
                JobResult {
                    note: note("k", ""),
                    ..Default::default()
                },
                Err(InvalidResult::Note(NoteError::EmptyText)),
            ),
        ];
        for (result, expected) in table {
            assert_eq!(result.validate(), expected, "{result:?}");
        }
    }
}
