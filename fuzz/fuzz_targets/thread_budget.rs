//! Structured input: a list of message envelopes (or raw item strings, to
//! reach the tiny-item corners) and a byte budget. Packing never exceeds the
//! budget, keeps order, writes the documented `next`, picks the longest
//! prefix that fits, and answers 413 (`ContextItemTooLarge`) exactly when
//! nothing fits.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use relayger_core::ids::IdentityNumber;
use relayger_core::thread_budget::{
    MAX_THREAD_MAX_BYTES, MIN_THREAD_MAX_BYTES, PackedThread, render_thread_body,
};
use relayger_core::wire::{IdentityKind, IdentityRef, MessageEnvelope, Timestamp};
use time::OffsetDateTime;
use uuid::Uuid;

#[path = "../../relayger-core/tests/invariants/mod.rs"]
#[allow(dead_code)]
mod invariants;

#[derive(Debug, Arbitrary)]
struct Envelope {
    seq: i64,
    room: u128,
    id: u128,
    sender: u32,
    agent: bool,
    text: Option<String>,
    /// Repeats of a two-byte character, to reach realistic sizes cheaply.
    padding: u16,
    ask: bool,
    deadline: Option<u32>,
    reply_to: Option<u128>,
    by_runtime: bool,
    created: u32,
}

impl Envelope {
    fn build(self) -> MessageEnvelope {
        let at = |seconds: u32| {
            Timestamp(
                OffsetDateTime::from_unix_timestamp(i64::from(seconds))
                    .expect("a u32 of seconds is in range"),
            )
        };
        let number =
            IdentityNumber::from_sequence(u64::from(self.sender)).expect("a u32 sequence fits");
        MessageEnvelope {
            conversation_id: Uuid::from_u128(self.room),
            message_id: Uuid::from_u128(self.id),
            seq: self.seq,
            sender: IdentityRef {
                id: Uuid::from_u128(self.id.rotate_left(17)),
                number,
                kind: if self.agent {
                    IdentityKind::Agent
                } else {
                    IdentityKind::Person
                },
            },
            text: self.text.map(|text| {
                let padding = usize::from(self.padding % 4096);
                format!("{text}{}", "é".repeat(padding))
            }),
            sealed: None,
            ask: self.ask,
            deadline: self.deadline.map(at),
            reply_to: self.reply_to.map(Uuid::from_u128),
            by_runtime: self.by_runtime,
            created_at: at(self.created),
        }
    }
}

#[derive(Debug, Arbitrary)]
enum Items {
    Envelopes(Vec<Envelope>),
    Raw(Vec<(i64, String)>),
}

#[derive(Debug, Arbitrary)]
struct Input {
    items: Items,
    more_after_items: bool,
    /// When given, the budget is the exact body size of one prefix (picked
    /// by the first number) plus the second: the off-by-one corner.
    edge: Option<(u8, i8)>,
    /// Mostly in range; `raw_budget` taken as is otherwise.
    budget_in_range: bool,
    budget: u16,
    raw_budget: u32,
    limit: u8,
}

fuzz_target!(|input: Input| {
    let span = MAX_THREAD_MAX_BYTES - MIN_THREAD_MAX_BYTES + 1;
    let mut max_bytes = if input.budget_in_range {
        MIN_THREAD_MAX_BYTES + usize::from(input.budget) % span
    } else {
        input.raw_budget as usize
    };
    let limit = usize::from(input.limit);
    let (envelopes, items) = match input.items {
        Items::Envelopes(envelopes) => {
            let envelopes: Vec<MessageEnvelope> =
                envelopes.into_iter().map(Envelope::build).collect();
            let items = envelopes
                .iter()
                .map(|e| (e.seq, serde_json::to_string(e).expect("serializes")))
                .collect();
            (Some(envelopes), items)
        }
        Items::Raw(items) => (None, items),
    };
    if let (Some((pick, delta)), false) = (input.edge, items.is_empty()) {
        let borrowed: Vec<(i64, &str)> = items.iter().map(|(s, e)| (*s, e.as_str())).collect();
        let count = usize::from(pick) % items.len() + 1;
        let next = (count < items.len() || input.more_after_items).then(|| items[count - 1].0);
        let exact = render_thread_body(&borrowed, &PackedThread { count, next }).len();
        max_bytes = exact
            .saturating_add_signed(isize::from(delta))
            .clamp(MIN_THREAD_MAX_BYTES, MAX_THREAD_MAX_BYTES);
    }
    match envelopes {
        Some(envelopes) => {
            invariants::check_thread_envelopes(&envelopes, input.more_after_items, max_bytes, limit)
        }
        None => {
            invariants::check_thread_packing(&items, input.more_after_items, max_bytes, limit);
        }
    }
});
