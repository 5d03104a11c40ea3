//! Structured input: a list of message envelopes (or raw item strings, to
//! reach the tiny-item corners) and a byte budget. Packing never exceeds the
//! budget, keeps order, writes the documented `next`, picks the longest
//! prefix that fits, and answers 413 (`ContextItemTooLarge`) exactly when
//! nothing fits.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use relayger_core::ids::IdentityNumber;
use relayger_core::thread_budget::{MAX_THREAD_MAX_BYTES, MIN_THREAD_MAX_BYTES};
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
    /// Mostly in range; `raw_budget` taken as is otherwise.
    budget_in_range: bool,
    budget: u16,
    raw_budget: u32,
    limit: u8,
}

fuzz_target!(|input: Input| {
    let span = MAX_THREAD_MAX_BYTES - MIN_THREAD_MAX_BYTES + 1;
    let max_bytes = if input.budget_in_range {
        MIN_THREAD_MAX_BYTES + usize::from(input.budget) % span
    } else {
        input.raw_budget as usize
    };
    let limit = usize::from(input.limit);
    match input.items {
        Items::Envelopes(envelopes) => {
            let envelopes: Vec<MessageEnvelope> =
                envelopes.into_iter().map(Envelope::build).collect();
            invariants::check_thread_envelopes(
                &envelopes,
                input.more_after_items,
                max_bytes,
                limit,
            );
        }
        Items::Raw(items) => {
            invariants::check_thread_packing(&items, input.more_after_items, max_bytes, limit);
        }
    }
});
