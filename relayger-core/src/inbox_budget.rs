//! How much one inbox page may hold: a message count and a byte budget over
//! the messages' content, so a response (and what the server loads for it)
//! stays bounded however many rooms and however large their messages are.

/// Messages in a page when the caller does not ask for fewer.
pub const DEFAULT_MESSAGES: u32 = 200;
/// The most messages a caller may ask for in one page.
pub const MAX_MESSAGES: u32 = 500;
/// The most messages of one room in a page (the oldest unacknowledged).
pub const MAX_PER_ROOM: u32 = 100;
/// Content bytes (text and sealed ciphertext) one page may carry; a single
/// message larger than this is still returned alone, so a page always moves.
pub const MAX_BYTES: usize = 1024 * 1024;
/// Rooms with news looked at per page.
pub const MAX_ROOMS: u32 = 100;

/// What is left of one page's budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboxBudget {
    messages: u32,
    bytes: usize,
    taken: u32,
}

impl InboxBudget {
    /// A page of at most `limit` messages (`None`: the default), refusing a
    /// limit of 0 or above [`MAX_MESSAGES`].
    pub fn new(limit: Option<u32>) -> Result<InboxBudget, String> {
        let messages = limit.unwrap_or(DEFAULT_MESSAGES);
        if messages == 0 || messages > MAX_MESSAGES {
            return Err(format!("limit must be 1 to {MAX_MESSAGES}"));
        }
        Ok(InboxBudget {
            messages,
            bytes: MAX_BYTES,
            taken: 0,
        })
    }

    /// How many more messages of one room to load at most.
    pub fn room_allowance(&self) -> u32 {
        self.messages.min(MAX_PER_ROOM)
    }

    /// Takes a message of `bytes` content if it fits (the first of a page
    /// always does); false once the page is full.
    pub fn take(&mut self, bytes: usize) -> bool {
        if self.messages == 0 || (self.taken > 0 && bytes > self.bytes) {
            return false;
        }
        self.messages -= 1;
        self.bytes = self.bytes.saturating_sub(bytes);
        self.taken += 1;
        true
    }

    /// Nothing more fits.
    pub fn is_spent(&self) -> bool {
        self.messages == 0 || self.bytes == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_checked() {
        let table = [
            (None, true),
            (Some(0), false),
            (Some(1), true),
            (Some(MAX_MESSAGES), true),
            (Some(MAX_MESSAGES + 1), false),
        ];
        for (limit, ok) in table {
            assert_eq!(InboxBudget::new(limit).is_ok(), ok, "{limit:?}");
        }
    }

    #[test]
    fn a_page_stops_at_its_count_or_its_bytes_but_always_takes_one() {
        // (limit, message sizes, how many are taken)
        let table: [(u32, &[usize], usize); 5] = [
            (2, &[10, 10, 10], 2),
            (5, &[MAX_BYTES / 2, MAX_BYTES / 2, 1], 2),
            (5, &[MAX_BYTES + 1, 1], 1),
            (5, &[1, MAX_BYTES], 1),
            (3, &[], 0),
        ];
        for (limit, sizes, taken) in table {
            let mut budget = InboxBudget::new(Some(limit)).expect("limit");
            let got = sizes.iter().take_while(|&&size| budget.take(size)).count();
            assert_eq!(got, taken, "{limit} {sizes:?}");
        }
    }

    #[test]
    fn a_room_gets_at_most_its_share() {
        let budget = InboxBudget::new(Some(MAX_MESSAGES)).expect("limit");
        assert_eq!(budget.room_allowance(), MAX_PER_ROOM);
        let budget = InboxBudget::new(Some(7)).expect("limit");
        assert_eq!(budget.room_allowance(), 7);
    }
}
