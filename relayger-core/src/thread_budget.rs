//! The byte budget of a thread (context) response.
//!
//! A handler asks for the thread around a message with a byte budget so the
//! context it feeds a model has a known size. The budget applies to the
//! exact HTTP body, `{"messages":[E1,E2,…],"next":N}`, so the packing counts
//! every bracket, comma and the digits of `next` that will actually be
//! written, and the body is built by [`render_thread_body`] from the same
//! numbers.

use std::fmt::Write as _;

/// The budget when the request names none.
pub const DEFAULT_THREAD_MAX_BYTES: usize = 8192;
/// Smaller budgets could not hold even one ordinary envelope.
pub const MIN_THREAD_MAX_BYTES: usize = 512;
/// Larger contexts belong in several pages, not one response.
pub const MAX_THREAD_MAX_BYTES: usize = 65_536;
/// The most messages one page returns.
pub const MAX_THREAD_LIMIT: usize = 100;
/// Without `--limit` the byte budget alone decides, up to the maximum.
pub const DEFAULT_THREAD_LIMIT: usize = MAX_THREAD_LIMIT;

const BODY_PREFIX: &str = "{\"messages\":[";
const BODY_MIDDLE: &str = "],\"next\":";
const BODY_SUFFIX: &str = "}";
const NULL: &str = "null";
/// Bytes of the body that do not depend on the items or on `next`.
const FIXED_BYTES: usize = BODY_PREFIX.len() + BODY_MIDDLE.len() + BODY_SUFFIX.len();

/// Why a thread page cannot be produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ThreadBudgetError {
    /// `maxBytes` outside 512..=65536.
    #[error(
        "maxBytes must be from {MIN_THREAD_MAX_BYTES} to {MAX_THREAD_MAX_BYTES}, got {max_bytes}"
    )]
    MaxBytesOutOfRange { max_bytes: u64 },
    /// `limit` outside 1..=100.
    #[error("limit must be from 1 to {MAX_THREAD_LIMIT}, got {limit}")]
    LimitOutOfRange { limit: u64 },
    /// The next message alone is bigger than the budget; returning nothing
    /// with a `next` would page forever, so the caller must raise the budget
    /// or read that message through the single-message endpoint.
    #[error(
        "a single message envelope of {envelope_bytes} bytes does not fit a {max_bytes}-byte thread response"
    )]
    ContextItemTooLarge {
        envelope_bytes: usize,
        max_bytes: usize,
    },
}

/// Checks a requested byte budget.
pub fn validate_max_bytes(max_bytes: u64) -> Result<usize, ThreadBudgetError> {
    usize::try_from(max_bytes)
        .ok()
        .filter(|bytes| (MIN_THREAD_MAX_BYTES..=MAX_THREAD_MAX_BYTES).contains(bytes))
        .ok_or(ThreadBudgetError::MaxBytesOutOfRange { max_bytes })
}

/// Checks a requested message count.
pub fn validate_limit(limit: u64) -> Result<usize, ThreadBudgetError> {
    usize::try_from(limit)
        .ok()
        .filter(|count| (1..=MAX_THREAD_LIMIT).contains(count))
        .ok_or(ThreadBudgetError::LimitOutOfRange { limit })
}

/// The outcome of packing: the first `count` items go into the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PackedThread {
    /// How many leading items go into the body.
    pub count: usize,
    /// The room seq of the last returned item when more may follow (the
    /// caller pages on with `--after next`), `None` at the end of the thread.
    pub next: Option<i64>,
}

/// Chooses the longest prefix of `items` (room seq, serialized compact
/// envelope) whose whole response body fits in `max_bytes`, with at most
/// `limit` items. `more_after_items` says whether the thread continues past
/// the given items, so that `next` is written when they all fit but the
/// thread does not end there. An empty `items` gives an empty page with
/// `next: null`.
pub fn pack_thread(
    items: &[(i64, &str)],
    more_after_items: bool,
    max_bytes: usize,
    limit: usize,
) -> Result<PackedThread, ThreadBudgetError> {
    validate_max_bytes(u64::try_from(max_bytes).unwrap_or(u64::MAX))?;
    validate_limit(u64::try_from(limit).unwrap_or(u64::MAX))?;
    let next_for = |count: usize| -> Option<i64> {
        (count < items.len() || more_after_items)
            .then(|| count.checked_sub(1).map(|last| items[last].0))
            .flatten()
    };

    let mut best = None;
    let mut item_bytes = 0_usize;
    for (index, (_, envelope)) in items.iter().take(limit).enumerate() {
        item_bytes += envelope.len() + usize::from(index > 0);
        // `next` takes at least one byte, so once this overflows, no longer
        // prefix can fit either.
        if FIXED_BYTES + item_bytes + 1 > max_bytes {
            break;
        }
        // `null` is longer than a one-digit seq, so a longer prefix can
        // fit where a shorter one did not: keep looking for the longest.
        let count = index + 1;
        let next = next_for(count);
        if FIXED_BYTES + item_bytes + next_len(next) <= max_bytes {
            best = Some(PackedThread { count, next });
        }
    }

    match (best, items.first()) {
        (Some(packed), _) => Ok(packed),
        (None, None) => Ok(PackedThread {
            count: 0,
            next: None,
        }),
        (None, Some((_, first))) => Err(ThreadBudgetError::ContextItemTooLarge {
            envelope_bytes: first.len(),
            max_bytes,
        }),
    }
}

fn next_len(next: Option<i64>) -> usize {
    match next {
        None => NULL.len(),
        Some(seq) => {
            let sign = usize::from(seq < 0);
            let mut magnitude = seq.unsigned_abs();
            let mut digits = 1;
            while magnitude >= 10 {
                magnitude /= 10;
                digits += 1;
            }
            sign + digits
        }
    }
}

/// Builds the exact response body for a packing result.
pub fn render_thread_body(items: &[(i64, &str)], packed: &PackedThread) -> String {
    let chosen = &items[..packed.count.min(items.len())];
    let item_bytes: usize = chosen.iter().map(|(_, envelope)| envelope.len() + 1).sum();
    let mut body = String::with_capacity(FIXED_BYTES + item_bytes + 20);
    body.push_str(BODY_PREFIX);
    for (index, (_, envelope)) in chosen.iter().enumerate() {
        if index > 0 {
            body.push(',');
        }
        body.push_str(envelope);
    }
    body.push_str(BODY_MIDDLE);
    match packed.next {
        // Writing to a String cannot fail.
        Some(seq) => {
            let _ = write!(body, "{seq}");
        }
        None => body.push_str(NULL),
    }
    body.push_str(BODY_SUFFIX);
    body
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn envelope(seq: i64, text_len: usize) -> String {
        serde_json::json!({"seq": seq, "text": "x".repeat(text_len)}).to_string()
    }

    #[test]
    fn limits_table() {
        let bytes = [
            (0, false),
            (511, false),
            (512, true),
            (8192, true),
            (65_536, true),
            (65_537, false),
            (u64::MAX, false),
        ];
        for (value, ok) in bytes {
            assert_eq!(validate_max_bytes(value).is_ok(), ok, "maxBytes {value}");
        }
        let limits = [(0, false), (1, true), (100, true), (101, false)];
        for (value, ok) in limits {
            assert_eq!(validate_limit(value).is_ok(), ok, "limit {value}");
        }
    }

    #[test]
    fn next_len_matches_formatting() {
        for seq in [0, 7, 9, 10, 99, 100, 12_345, -1, -10, i64::MAX, i64::MIN] {
            assert_eq!(next_len(Some(seq)), seq.to_string().len(), "{seq}");
        }
        assert_eq!(next_len(None), 4);
    }

    /// (name, items, more after, max bytes, limit, expected)
    type Case<'a> = (
        &'a str,
        &'a [(i64, &'a str)],
        bool,
        usize,
        usize,
        Result<PackedThread, ThreadBudgetError>,
    );

    #[test]
    fn packing_table() {
        let small: Vec<String> = (1..=5).map(|seq| envelope(seq, 100)).collect();
        let small_items: Vec<(i64, &str)> = small
            .iter()
            .enumerate()
            .map(|(i, e)| (i as i64 + 1, e.as_str()))
            .collect();
        // k small items with a one-digit next take FIXED + k * (envelope + 1).
        let fitting = (512 - FIXED_BYTES) / (small[0].len() + 1);
        let huge = envelope(1, 600);
        let huge_items = [(1_i64, huge.as_str())];

        let page = |count, next| Ok(PackedThread { count, next });
        let none: &[(i64, &str)] = &[];
        let cases: Vec<Case<'_>> = vec![
            (
                "all fit, thread ends",
                &small_items,
                false,
                8192,
                100,
                page(5, None),
            ),
            (
                "all fit, thread continues",
                &small_items,
                true,
                8192,
                100,
                page(5, Some(5)),
            ),
            ("limit cuts", &small_items, false, 8192, 2, page(2, Some(2))),
            (
                "budget cuts",
                &small_items,
                false,
                512,
                100,
                page(fitting, Some(fitting as i64)),
            ),
            ("empty page", none, false, 512, 100, page(0, None)),
            (
                "empty page, more after",
                none,
                true,
                512,
                100,
                page(0, None),
            ),
            (
                "first item too large",
                &huge_items,
                false,
                512,
                100,
                Err(ThreadBudgetError::ContextItemTooLarge {
                    envelope_bytes: huge.len(),
                    max_bytes: 512,
                }),
            ),
            (
                "budget out of range",
                &small_items,
                false,
                511,
                100,
                Err(ThreadBudgetError::MaxBytesOutOfRange { max_bytes: 511 }),
            ),
            (
                "limit out of range",
                &small_items,
                false,
                512,
                0,
                Err(ThreadBudgetError::LimitOutOfRange { limit: 0 }),
            ),
        ];
        assert!(
            (1..5).contains(&fitting),
            "the table assumes 512 bytes cut the small items"
        );
        for (name, items, more, max_bytes, limit, expected) in cases {
            let packed = pack_thread(items, more, max_bytes, limit);
            assert_eq!(packed, expected, "{name}");
            if let Ok(packed) = packed {
                let body = render_thread_body(items, &packed);
                assert!(body.len() <= max_bytes, "{name}: {} bytes", body.len());
                let parsed: serde_json::Value = serde_json::from_str(&body).expect("valid JSON");
                assert_eq!(
                    parsed["messages"].as_array().map(Vec::len),
                    Some(packed.count),
                    "{name}"
                );
            }
        }
    }

    #[test]
    fn exact_fit_counts_every_byte() {
        // One item and `"next":7` is FIXED + envelope + 1 digit: pad the
        // envelope so that this is exactly 512, then one byte more.
        let padding = 512 - (FIXED_BYTES + envelope(7, 0).len() + 1);
        let exact = envelope(7, padding);
        let items = [(7_i64, exact.as_str()), (8, exact.as_str())];
        let packed = pack_thread(&items, false, 512, 100);
        assert_eq!(
            packed,
            Ok(PackedThread {
                count: 1,
                next: Some(7)
            })
        );
        assert_eq!(
            render_thread_body(
                &items,
                &PackedThread {
                    count: 1,
                    next: Some(7)
                }
            )
            .len(),
            512
        );
        let over = envelope(7, padding + 1);
        let items = [(7_i64, over.as_str()), (8, over.as_str())];
        assert_eq!(
            pack_thread(&items, false, 512, 100),
            Err(ThreadBudgetError::ContextItemTooLarge {
                envelope_bytes: over.len(),
                max_bytes: 512
            })
        );
        assert_eq!(
            pack_thread(&items, false, 8192, 100),
            Ok(PackedThread {
                count: 2,
                next: None
            })
        );
    }

    #[test]
    fn a_longer_prefix_can_fit_where_a_shorter_one_did_not() {
        // One item with a 19-digit next does not fit, but two items ending the
        // thread (next null) do, because the second envelope is tiny.
        let big_seq = 1_000_000_000_000_000_000_i64;
        let tiny = "{}";
        let base = 512 - FIXED_BYTES - 4 - 1 - tiny.len();
        let first = format!("\"{}\"", "x".repeat(base - 2));
        let items = [(big_seq, first.as_str()), (big_seq + 1, tiny)];
        let packed = pack_thread(&items, false, 512, 100).expect("fits");
        assert_eq!(
            packed,
            PackedThread {
                count: 2,
                next: None
            }
        );
        assert_eq!(render_thread_body(&items, &packed).len(), 512);
        assert!(FIXED_BYTES + first.len() + next_len(Some(big_seq)) > 512);
    }

    fn arbitrary_items() -> impl Strategy<Value = (Vec<(i64, String)>, bool)> {
        (
            proptest::collection::vec((any::<i64>(), ".{0,40}", 0_usize..2_500), 0..60),
            any::<bool>(),
        )
            .prop_map(|(raw, more)| {
                let items = raw
                    .into_iter()
                    .map(|(seq, text, padding)| {
                        let text = format!("{text}{}", "é".repeat(padding / 2));
                        let envelope = serde_json::json!({"seq": seq, "text": text}).to_string();
                        (seq, envelope)
                    })
                    .collect();
                (items, more)
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn rendered_body_never_exceeds_the_budget(
            (owned, more) in arbitrary_items(),
            max_bytes in MIN_THREAD_MAX_BYTES..=MAX_THREAD_MAX_BYTES,
            limit in 1_usize..=MAX_THREAD_LIMIT,
        ) {
            let items: Vec<(i64, &str)> = owned.iter().map(|(seq, e)| (*seq, e.as_str())).collect();
            let reachable = items.len().min(limit);
            let body_for = |count: usize| {
                let next = (count < items.len() || more).then(|| items[count - 1].0);
                render_thread_body(&items, &PackedThread { count, next })
            };
            match pack_thread(&items, more, max_bytes, limit) {
                Ok(packed) => {
                    prop_assert!(packed.count <= reachable);
                    let body = render_thread_body(&items, &packed);
                    prop_assert!(body.len() <= max_bytes);
                    let parsed: serde_json::Value = serde_json::from_str(&body).expect("valid JSON");
                    prop_assert_eq!(parsed["messages"].as_array().map(Vec::len), Some(packed.count));
                    let expected_next = if packed.count == 0 { None } else if packed.count < items.len() || more { Some(items[packed.count - 1].0) } else { None };
                    prop_assert_eq!(packed.next, expected_next);
                    prop_assert_eq!(parsed["next"].as_i64(), expected_next);
                    for longer in packed.count + 1..=reachable {
                        prop_assert!(body_for(longer).len() > max_bytes, "{} items would also fit", longer);
                    }
                }
                Err(ThreadBudgetError::ContextItemTooLarge { .. }) => {
                    prop_assert!(!items.is_empty());
                    for count in 1..=reachable {
                        prop_assert!(body_for(count).len() > max_bytes);
                    }
                }
                Err(other) => prop_assert!(false, "unexpected {other}"),
            }
        }
    }
}
