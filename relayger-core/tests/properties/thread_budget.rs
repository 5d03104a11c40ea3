//! The thread-budget packing of context reads.

use super::*;

fn envelope() -> impl Strategy<Value = MessageEnvelope> {
    (
        (any::<i64>(), any::<u128>(), any::<u128>(), 0_u64..1_000_000),
        (
            prop::option::of("\\PC{0,30}"),
            prop_oneof![3 => 0_usize..200, 1 => 0_usize..3000],
        ),
        (any::<bool>(), any::<bool>(), any::<bool>()),
        (
            prop::option::of(0_i64..4_000_000_000),
            prop::option::of(any::<u128>()),
            0_i64..4_000_000_000,
        ),
    )
        .prop_map(
            |(
                (seq, room, id, sender),
                (text, padding),
                (agent, ask, by_runtime),
                (deadline, reply_to, created),
            )| {
                let at = |seconds: i64| {
                    Timestamp(OffsetDateTime::from_unix_timestamp(seconds).expect("in range"))
                };
                MessageEnvelope {
                    conversation_id: Uuid::from_u128(room),
                    message_id: Uuid::from_u128(id),
                    seq,
                    sender: IdentityRef {
                        id: Uuid::from_u128(id.rotate_left(17)),
                        number: IdentityNumber::from_sequence(sender).expect("in range"),
                        kind: if agent {
                            IdentityKind::Agent
                        } else {
                            IdentityKind::Person
                        },
                    },
                    text: text.map(|text| format!("{text}{}", "é".repeat(padding))),
                    sealed: None,
                    ask,
                    deadline: deadline.map(at),
                    reply_to: reply_to.map(Uuid::from_u128),
                    by_runtime,
                    created_at: at(created),
                }
            },
        )
}

fn budget() -> impl Strategy<Value = usize> {
    prop_oneof![
        4 => MIN_THREAD_MAX_BYTES..=MAX_THREAD_MAX_BYTES,
        2 => MIN_THREAD_MAX_BYTES..=2 * MIN_THREAD_MAX_BYTES,
        1 => prop::sample::select(vec![0, 511, 65_537, usize::MAX]),
    ]
}

fn limit() -> impl Strategy<Value = usize> {
    prop_oneof![
        6 => 1..=MAX_THREAD_LIMIT,
        1 => prop::sample::select(vec![0, MAX_THREAD_LIMIT + 1, usize::MAX]),
    ]
}

/// Raw `(seq, body)` items: seqs at the edges of their range, bodies as
/// `text` generates them.
fn raw_items(
    text: &'static str,
    len: std::ops::Range<usize>,
) -> impl Strategy<Value = Vec<(i64, String)>> {
    vec(
        (
            prop_oneof![Just(i64::MIN), Just(-1_i64), 0_i64..10, any::<i64>()],
            text,
        ),
        len,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// Real envelopes, any budget and limit: within budget, in order, the
    /// longest fitting prefix, a valid `ThreadResponse`.
    #[test]
    fn thread_packing_of_envelopes(
        envelopes in vec(envelope(), 0..24),
        more_after in any::<bool>(),
        max_bytes in budget(),
        limit in limit(),
    ) {
        invariants::check_thread_envelopes(&envelopes, more_after, max_bytes, limit);
    }

    /// Budgets at and around the exact size of some prefix's body, where an
    /// off-by-one in the packing would show.
    #[test]
    fn thread_packing_at_the_budget_edges(
        items in raw_items("[a-z]{0,3}|x{20,400}", 1..40),
        more_after in any::<bool>(),
        pick in any::<prop::sample::Index>(),
        delta in -3_isize..=3,
        limit in 1..=MAX_THREAD_LIMIT,
    ) {
        let borrowed: Vec<(i64, &str)> = items.iter().map(|(seq, e)| (*seq, e.as_str())).collect();
        let count = pick.index(items.len()) + 1;
        let next = (count < items.len() || more_after).then(|| items[count - 1].0);
        let exact = render_thread_body(&borrowed, &PackedThread { count, next }).len();
        let max_bytes = exact
            .saturating_add_signed(delta)
            .clamp(MIN_THREAD_MAX_BYTES, MAX_THREAD_MAX_BYTES);
        invariants::check_thread_packing(&items, more_after, max_bytes, limit);
    }

    /// Tiny raw items near the smallest budget, where `null` versus a long
    /// seq decides which prefix fits.
    #[test]
    fn thread_packing_of_small_items(
        items in raw_items("[a-z]{0,3}|x{100,490}", 0..30),
        more_after in any::<bool>(),
        max_bytes in MIN_THREAD_MAX_BYTES..=MIN_THREAD_MAX_BYTES + 64,
        limit in limit(),
    ) {
        invariants::check_thread_packing(&items, more_after, max_bytes, limit);
    }

    /// The 413 case: a first envelope that cannot fit even with a one-byte
    /// `next` is refused, naming its size, whatever follows it.
    #[test]
    fn a_first_item_over_the_budget_is_refused(
        max_bytes in MIN_THREAD_MAX_BYTES..=MAX_THREAD_MAX_BYTES,
        over in 0_usize..64,
        rest in vec("[a-z]{0,3}", 0..5),
        more_after in any::<bool>(),
        limit in 1..=MAX_THREAD_LIMIT,
    ) {
        // The fixed part `{"messages":[` + `],"next":` + `}` is 23 bytes.
        let first = "x".repeat(max_bytes - 23 + over);
        let mut items = vec![(1_i64, first.as_str())];
        items.extend(rest.iter().map(|text| (2_i64, text.as_str())));
        let result = pack_thread(&items, more_after, max_bytes, limit);
        prop_assert_eq!(
            result,
            Err(ThreadBudgetError::ContextItemTooLarge { envelope_bytes: first.len(), max_bytes })
        );
    }
}
