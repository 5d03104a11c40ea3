//! What a sealed message is bound to: the bytes used as HPKE `info` and AEAD
//! `aad`, per payload version.

use uuid::Uuid;

use crate::wire::{MessageEnvelope, Timestamp};

/// The payload versions this build reads. Sealing always writes
/// [`SealVersion::CURRENT`]; older versions still open so stored messages
/// stay readable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SealVersion {
    /// Binds the room, message, sender and recipient ids only: the server
    /// could change the envelope's `ask`, `deadline` and `replyTo`.
    V1,
    /// Also binds `ask`, `deadline` and `replyTo`.
    V2,
}

impl SealVersion {
    /// What [`super::seal`] writes.
    pub const CURRENT: SealVersion = SealVersion::V2;

    /// The version a payload's `version` number names, if this build knows it.
    pub fn from_wire(version: u32) -> Option<SealVersion> {
        match version {
            1 => Some(SealVersion::V1),
            2 => Some(SealVersion::V2),
            _ => None,
        }
    }

    /// The payload's `version` number.
    pub fn number(self) -> u32 {
        match self {
            SealVersion::V1 => 1,
            SealVersion::V2 => 2,
        }
    }

    /// The ASCII prefix of `info`/`aad`; it names the version, so a
    /// ciphertext of one version never opens as another.
    pub fn prefix(self) -> &'static [u8] {
        match self {
            SealVersion::V1 => b"relayger/sealed/v1",
            SealVersion::V2 => b"relayger/sealed/v2",
        }
    }

    /// Length of `info`/`aad`: v1 is the prefix and four 16-byte ids
    /// (82 bytes); v2 adds `ask` (1), `deadline` (1 + 8) and `replyTo`
    /// (1 + 16), 109 bytes.
    pub fn context_bytes(self) -> usize {
        let ids = self.prefix().len() + 4 * 16;
        match self {
            SealVersion::V1 => ids,
            SealVersion::V2 => ids + 1 + (1 + 8) + (1 + 16),
        }
    }
}

/// Everything a sealed message is bound to, as the envelope carries it. The
/// sender must choose the message id before sealing (the server keeps the id
/// it is given), and every reader passes the values from the envelope it
/// received; if any differ from what was sealed, the message does not open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SealBinding {
    /// The room (the envelope's `conversationId`).
    pub room_id: Uuid,
    /// The message (the envelope's `messageId`).
    pub message_id: Uuid,
    /// The sending identity (the envelope's `sender.id`).
    pub sender_id: Uuid,
    /// The envelope's `ask` (bound from version 2).
    pub ask: bool,
    /// The envelope's `deadline` (bound from version 2, to the microsecond:
    /// [`super::seal`] refuses a finer one, which the server could not store).
    pub deadline: Option<Timestamp>,
    /// The envelope's `replyTo` (bound from version 2).
    pub reply_to: Option<Uuid>,
}

impl SealBinding {
    /// The binding a reader checks a received envelope against.
    pub fn of_envelope(envelope: &MessageEnvelope) -> SealBinding {
        SealBinding {
            room_id: envelope.conversation_id,
            message_id: envelope.message_id,
            sender_id: envelope.sender.id,
            ask: envelope.ask,
            deadline: envelope.deadline,
            reply_to: envelope.reply_to,
        }
    }

    /// The bytes used as both HPKE `info` and AEAD `aad` for one recipient
    /// (`docs/sealed-messages.md` has the table):
    ///
    /// - v1: `relayger/sealed/v1` ‖ room id ‖ message id ‖ sender id ‖
    ///   recipient id;
    /// - v2: `relayger/sealed/v2` ‖ the same four ids ‖ `ask` (one byte,
    ///   0 or 1) ‖ deadline present (0 or 1) ‖ the deadline as signed
    ///   big-endian microseconds since the Unix epoch (8 zero bytes when
    ///   absent) ‖ replyTo present (0 or 1) ‖ the replyTo id (16 zero bytes
    ///   when absent).
    ///
    /// Each id is its 16 bytes in RFC 9562 order (the order of the hex digits
    /// in its text form). Every field has a fixed length, so two bindings
    /// never give the same bytes. Public so other code and tests can show
    /// exactly what is bound.
    pub fn context(&self, version: SealVersion, recipient_id: Uuid) -> Vec<u8> {
        let mut out = Vec::with_capacity(version.context_bytes());
        out.extend_from_slice(version.prefix());
        for id in [self.room_id, self.message_id, self.sender_id, recipient_id] {
            out.extend_from_slice(id.as_bytes());
        }
        if version == SealVersion::V2 {
            out.push(u8::from(self.ask));
            let deadline = self.deadline.map(deadline_micros);
            out.push(u8::from(deadline.is_some()));
            out.extend_from_slice(&deadline.unwrap_or(0).to_be_bytes());
            out.push(u8::from(self.reply_to.is_some()));
            out.extend_from_slice(self.reply_to.unwrap_or_default().as_bytes());
        }
        out
    }

    /// Whether the deadline, if any, is a whole number of microseconds (what
    /// the server stores, and so what a reader's envelope shows).
    pub(super) fn deadline_fits(&self) -> bool {
        self.deadline
            .is_none_or(|deadline| deadline.0.unix_timestamp_nanos() % 1000 == 0)
    }
}

/// Microseconds since the Unix epoch, rounded towards minus infinity. Every
/// [`Timestamp`] fits: `time` keeps years within ±9999.
fn deadline_micros(deadline: Timestamp) -> i64 {
    let micros = deadline.0.unix_timestamp_nanos().div_euclid(1000);
    i64::try_from(micros).unwrap_or(if micros < 0 { i64::MIN } else { i64::MAX })
}
