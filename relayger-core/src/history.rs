//! Paging through a room's history both ways (`relayger history ROOM`,
//! `GET /v1/rooms/{room}/messages`): which window of seqs a request asks
//! for, and the cursors that continue from a page. Seqs are gapless per
//! room (1 to the room's last), so whether older or newer messages exist
//! follows from the page's first and last seq alone.

/// The most messages one page holds.
pub const MAX_HISTORY_LIMIT: u32 = 100;
/// A page's size when none is asked for.
pub const DEFAULT_HISTORY_LIMIT: u32 = 50;

/// Which seqs a history page covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryWindow {
    /// Only seqs above this one; the page starts right after it.
    pub after: Option<i64>,
    /// Only seqs below this one; without `after` the page ends right
    /// before it (the newest messages below it).
    pub before: Option<i64>,
    /// At most this many messages.
    pub limit: u32,
}

/// Which end of the window a page is taken from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HistoryEnd {
    /// The oldest messages of the window (with `after`): read upward.
    Oldest,
    /// The newest messages of the window (no `after`): read downward,
    /// shown oldest first.
    Newest,
}

impl HistoryWindow {
    /// The window a request asks for, or why it is refused.
    pub fn new(
        after: Option<i64>,
        before: Option<i64>,
        limit: Option<i64>,
    ) -> Result<HistoryWindow, String> {
        if after.is_some_and(|after| after < 0) {
            return Err("after must be a room seq (0 or more)".to_owned());
        }
        if before.is_some_and(|before| before < 1) {
            return Err("before must be a room seq (1 or more)".to_owned());
        }
        if let (Some(after), Some(before)) = (after, before)
            && after >= before
        {
            return Err(format!(
                "after ({after}) must be below before ({before}): the page lies between them"
            ));
        }
        let limit = match limit {
            None => DEFAULT_HISTORY_LIMIT,
            Some(limit) => u32::try_from(limit)
                .ok()
                .filter(|limit| (1..=MAX_HISTORY_LIMIT).contains(limit))
                .ok_or_else(|| {
                    format!("limit must be from 1 to {MAX_HISTORY_LIMIT}, got {limit}")
                })?,
        };
        Ok(HistoryWindow {
            after,
            before,
            limit,
        })
    }

    /// Which end of the window the page is read from.
    pub fn end(&self) -> HistoryEnd {
        if self.after.is_some() {
            HistoryEnd::Oldest
        } else {
            HistoryEnd::Newest
        }
    }
}

/// The cursors of a page: `next` (its last seq, when newer messages
/// exist: give it as `after`) and `prev` (its first seq, when older ones
/// exist: give it as `before`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HistoryCursors {
    pub next: Option<i64>,
    pub prev: Option<i64>,
}

/// The cursors of a page whose seqs run from `first` to `last` (none for an
/// empty page), in a room whose last seq is `room_last_seq`.
pub fn history_cursors(seqs: Option<(i64, i64)>, room_last_seq: i64) -> HistoryCursors {
    match seqs {
        None => HistoryCursors::default(),
        Some((first, last)) => HistoryCursors {
            next: (last < room_last_seq).then_some(last),
            prev: (first > 1).then_some(first),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_table() {
        let ok = |after, before, limit| HistoryWindow {
            after,
            before,
            limit,
        };
        type Case = (
            Option<i64>,
            Option<i64>,
            Option<i64>,
            Result<HistoryWindow, &'static str>,
        );
        let table: [Case; 10] = [
            (None, None, None, Ok(ok(None, None, DEFAULT_HISTORY_LIMIT))),
            (Some(0), None, Some(3), Ok(ok(Some(0), None, 3))),
            (None, Some(7), Some(100), Ok(ok(None, Some(7), 100))),
            (Some(2), Some(9), None, Ok(ok(Some(2), Some(9), 50))),
            (Some(-1), None, None, Err("after")),
            (None, Some(0), None, Err("before")),
            (Some(5), Some(5), None, Err("below")),
            (None, None, Some(0), Err("limit")),
            (None, None, Some(101), Err("limit")),
            (None, None, Some(i64::MAX), Err("limit")),
        ];
        for (after, before, limit, expected) in table {
            let got = HistoryWindow::new(after, before, limit);
            match expected {
                Ok(window) => assert_eq!(got, Ok(window), "{after:?} {before:?} {limit:?}"),
                Err(word) => {
                    let err = got.expect_err("refused");
                    assert!(err.contains(word), "{err}");
                }
            }
        }
        assert_eq!(ok(Some(0), None, 5).end(), HistoryEnd::Oldest);
        assert_eq!(ok(None, Some(9), 5).end(), HistoryEnd::Newest);
        assert_eq!(ok(None, None, 5).end(), HistoryEnd::Newest);
    }

    #[test]
    fn cursor_table() {
        let table = [
            (None, 20, None, None),
            (Some((1, 20)), 20, None, None),
            (Some((1, 5)), 20, Some(5), None),
            (Some((16, 20)), 20, None, Some(16)),
            (Some((6, 10)), 20, Some(10), Some(6)),
            // A message came after the page was read from the newest end.
            (Some((18, 20)), 21, Some(20), Some(18)),
        ];
        for (seqs, last, next, prev) in table {
            assert_eq!(
                history_cursors(seqs, last),
                HistoryCursors { next, prev },
                "{seqs:?} of {last}"
            );
        }
    }
}
