//! Page sizes of the list routes (rooms, contacts, contact requests,
//! tokens, dead letters, a runtime's jobs): each answers at most a fixed number of items and a `next`
//! cursor (the last item's id, passed back as `after`), so a response stays
//! bounded however many items an identity has.

/// The page sizes of one list route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageLimits {
    /// Items in a page when the caller does not ask for fewer.
    pub default: u32,
    /// The most items a caller may ask for.
    pub max: u32,
}

/// `GET /v1/rooms`: every room carries its members (at most
/// [`crate::wire::MAX_ROOM_MEMBERS`]), so pages are short.
pub const ROOMS: PageLimits = PageLimits {
    default: 50,
    max: 100,
};

/// `GET /v1/contacts`: a contact is one identity and its direct room.
pub const CONTACTS: PageLimits = PageLimits {
    default: 100,
    max: 500,
};

/// `GET /v1/contacts/requests` (both directions together).
pub const CONTACT_REQUESTS: PageLimits = PageLimits {
    default: 100,
    max: 500,
};

/// `GET /v1/runtimes/{id}/dead-letters`: newest dead letter first.
pub const DEAD_LETTERS: PageLimits = PageLimits {
    default: 100,
    max: 500,
};

/// `GET /v1/runtimes/{id}/jobs`: every job carries its question, so pages
/// are short.
pub const JOBS: PageLimits = PageLimits {
    default: 25,
    max: 100,
};

/// `GET /v1/tokens`.
pub const TOKENS: PageLimits = PageLimits {
    default: 100,
    max: 500,
};

impl PageLimits {
    /// The page size for a requested `limit` (`None`: the default),
    /// refusing 0 and anything above the maximum.
    pub fn page_size(self, limit: Option<u32>) -> Result<u32, String> {
        match limit.unwrap_or(self.default) {
            size @ 1.. if size <= self.max => Ok(size),
            _ => Err(format!("limit must be 1 to {}", self.max)),
        }
    }
}

/// Cuts a page loaded with one extra item (`page_size + 1` rows) to
/// `page_size` and tells the cursor that continues: the last kept item's
/// key when the extra one was there, else `None`.
pub fn cut_page<T, K>(
    mut items: Vec<T>,
    page_size: u32,
    key: impl Fn(&T) -> K,
) -> (Vec<T>, Option<K>) {
    let size = page_size as usize;
    if items.len() <= size {
        return (items, None);
    }
    items.truncate(size);
    let next = items.last().map(key);
    (items, next)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_sizes_are_checked() {
        let limits = PageLimits {
            default: 10,
            max: 20,
        };
        let table = [
            (None, Ok(10)),
            (Some(0), Err(())),
            (Some(1), Ok(1)),
            (Some(20), Ok(20)),
            (Some(21), Err(())),
        ];
        for (limit, expected) in table {
            assert_eq!(
                limits.page_size(limit).map_err(|_| ()),
                expected,
                "{limit:?}"
            );
        }
        for limits in [ROOMS, CONTACT_REQUESTS, TOKENS] {
            assert!(limits.default >= 1 && limits.default <= limits.max);
        }
    }

    #[test]
    fn a_page_with_its_extra_row_has_a_next() {
        // (rows loaded, page size, rows kept, next)
        type Case = (&'static [u32], u32, &'static [u32], Option<u32>);
        let table: [Case; 4] = [
            (&[], 2, &[], None),
            (&[1, 2], 2, &[1, 2], None),
            (&[1, 2, 3], 2, &[1, 2], Some(2)),
            (&[1], 1, &[1], None),
        ];
        for (rows, size, kept, next) in table {
            let (page, got) = cut_page(rows.to_vec(), size, |row| *row);
            assert_eq!((page.as_slice(), got), (kept, next), "{rows:?} {size}");
        }
    }
}
