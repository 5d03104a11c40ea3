//! Tests for sealed messages, with the helpers they share.

use std::convert::Infallible;
use std::sync::OnceLock;

use base64::Engine as _;
use hpke::rand_core::{TryCryptoRng, TryRng};
// Shared by the test modules below (they `use super::*`).
use hpke::{Deserializable, Kem as _, Serializable};
use serde_json::json;
use uuid::Uuid;

use super::*;
use crate::wire::{SEALED_SUITE, SEALED_VERSION, SealedPayload};

mod content;
mod fuzz;
pub(crate) mod interop;
mod keys;
mod open_binding;
mod open_failures;
mod seal_open;
mod shape;

fn hex(text: &str) -> Vec<u8> {
    assert!(text.len().is_multiple_of(2), "odd hex length");
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex digit"))
        .collect()
}

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// RFC 7748 `decodeScalar25519` bit clamping.
fn clamp(scalar: &[u8]) -> Vec<u8> {
    let mut out = scalar.to_vec();
    out[0] &= 248;
    out[31] &= 127;
    out[31] |= 64;
    out
}

fn b64(bytes: &[u8]) -> String {
    B64.encode(bytes)
}

fn unb64(text: &str) -> Vec<u8> {
    B64.decode(text).expect("valid base64")
}

/// Hands out exactly the bytes it was given, in order: reproduces published
/// ephemeral keys. Running dry is a test bug, so it panics.
struct Scripted {
    bytes: Vec<u8>,
    at: usize,
}

impl Scripted {
    fn new(chunks: &[&[u8]]) -> Scripted {
        Scripted {
            bytes: chunks.concat(),
            at: 0,
        }
    }
}

impl TryRng for Scripted {
    type Error = Infallible;

    fn try_next_u32(&mut self) -> Result<u32, Infallible> {
        let mut b = [0u8; 4];
        self.try_fill_bytes(&mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    fn try_next_u64(&mut self) -> Result<u64, Infallible> {
        let mut b = [0u8; 8];
        self.try_fill_bytes(&mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Infallible> {
        let end = self.at + dst.len();
        assert!(end <= self.bytes.len(), "scripted randomness ran out");
        dst.copy_from_slice(&self.bytes[self.at..end]);
        self.at = end;
        Ok(())
    }
}

impl TryCryptoRng for Scripted {}

struct Member {
    id: Uuid,
    keys: KeyPair,
}

fn member() -> Member {
    Member {
        id: Uuid::now_v7(),
        keys: KeyPair::generate().expect("random source"),
    }
}

/// A room: the sender first, then `others` more members.
struct Room {
    binding: SealBinding,
    members: Vec<Member>,
}

impl Room {
    fn new(others: usize) -> Room {
        let members: Vec<Member> = (0..=others).map(|_| member()).collect();
        Room {
            binding: SealBinding {
                room_id: Uuid::now_v7(),
                message_id: Uuid::now_v7(),
                sender_id: members[0].id,
                ask: false,
                deadline: None,
                reply_to: None,
            },
            members,
        }
    }

    fn sender(&self) -> &Member {
        &self.members[0]
    }

    fn others(&self) -> &[Member] {
        &self.members[1..]
    }

    /// The recipients a client passes: the other members (the sender's copy
    /// is added by `seal`).
    fn recipients(&self) -> Vec<(Uuid, [u8; KEY_BYTES])> {
        self.others()
            .iter()
            .map(|m| (m.id, m.keys.public_key()))
            .collect()
    }

    fn ids(&self) -> Vec<Uuid> {
        self.members.iter().map(|m| m.id).collect()
    }

    fn seal(&self, content: &SealedContent) -> SealedPayload {
        seal(
            content,
            &self.binding,
            &self.sender().keys,
            &self.recipients(),
        )
        .expect("seal")
    }

    fn open_as(&self, payload: &SealedPayload, who: &Member) -> Result<SealedContent, OpenError> {
        open(
            payload,
            &self.binding,
            &self.sender().keys.public_key(),
            who.id,
            &who.keys,
        )
    }
}

fn text(text: &str) -> SealedContent {
    SealedContent::Text {
        text: text.to_owned(),
    }
}

fn sample_contents() -> Vec<SealedContent> {
    vec![
        text("hello, sealed world"),
        text(""),
        text("ünïcödé ✓ \"quoted\" \n newline"),
        SealedContent::Structured {
            schema: "relayger.test/order@1".to_owned(),
            data: json!({"items": [1, 2, 3], "rush": true}),
            text: Some("three items, rush".to_owned()),
        },
        SealedContent::Structured {
            schema: "x".to_owned(),
            data: serde_json::Value::Null,
            text: None,
        },
    ]
}

/// One sealed message, made once, for the many tests that only read it.
struct Fixture {
    room: Room,
    payload: SealedPayload,
    content: SealedContent,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let room = Room::new(2);
        let content = text("hi");
        let payload = room.seal(&content);
        Fixture {
            room,
            payload,
            content,
        }
    })
}
