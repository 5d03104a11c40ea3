//! Sealed messages on the client: sealing to every current room member
//! before sending, and opening what the local key can open — reporting what
//! it cannot, never dropping it.

use std::collections::HashMap;
use std::sync::Mutex;

use relayger_core::ids::IdentityNumber;
use relayger_core::sealed::{SealBinding, SealedContent, open, parse_public_key, seal};
use relayger_core::wire::{MessageEnvelope, SealedPayload, SendRequest};
use uuid::Uuid;

use crate::client::{Client, ClientError};

/// The client has no key pair (it was not made from a profile).
const NO_KEY_PAIR: &str = "no_key_pair";
/// The sender's public key could not be fetched or is missing.
const SENDER_KEY_UNAVAILABLE: &str = "sender_key_unavailable";
/// The server returned a public key that is not an X25519 key.
const SENDER_KEY_INVALID: &str = "sender_key_invalid";

/// Senders' public keys by identity id, or why one is unusable; kept per
/// client so a thread of many messages costs one lookup per sender.
pub(crate) type SenderKeys = Mutex<HashMap<Uuid, Result<[u8; 32], &'static str>>>;

/// A message as read by this client: the envelope, plus for a sealed
/// message either `opened` (its content) or `openError` (why this client
/// cannot open it). Serializes as the envelope's fields followed by those
/// two; the process ABI's thread context carries the same shape, so it is
/// the one core type.
pub use relayger_core::process_abi::ContextMessage as OpenedMessage;

impl Client {
    /// `POST /v1/messages` with `content` sealed end to end for every
    /// current member of the room (this identity included, with the local
    /// public key, so it keeps a readable copy).
    ///
    /// The room is `request.room_id`, or the direct room shared with contact
    /// `request.to`; members and their public keys come from
    /// `GET /v1/rooms/{room}`. The message id is `request.message_id` or a
    /// new UUID v7 (it is bound into the ciphertext, as are `ask`,
    /// `deadline` and `replyTo`, so the server cannot change them; a
    /// deadline finer than a microsecond is refused; resending the same id
    /// and payload is idempotent). `request.text` and `request.sealed` must
    /// be empty. If the membership changes between reading the room and
    /// sending, the server refuses the recipient set; send again.
    pub async fn send_sealed(
        &self,
        request: &SendRequest,
        content: &SealedContent,
    ) -> Result<MessageEnvelope, ClientError> {
        let keys = self.keys.clone().ok_or_else(|| {
            ClientError::Sealing("this client has no key pair; create it from a profile".into())
        })?;
        if request.text.is_some() || request.sealed.is_some() {
            return Err(ClientError::Sealing(
                "pass the content separately: text and sealed must be empty".into(),
            ));
        }
        let room_id = match (&request.to, request.room_id) {
            (None, Some(room)) => room,
            (Some(number), None) => self.direct_room(number).await?,
            _ => {
                return Err(ClientError::Sealing(
                    "give exactly one of a contact's number or a room".into(),
                ));
            }
        };
        let room = self.room(room_id).await?;
        let mut recipients = Vec::with_capacity(room.members.len());
        for member in &room.members {
            let key = if member.id == keys.identity_id {
                keys.public_key
            } else {
                let text = member.public_key.as_deref().ok_or_else(|| {
                    ClientError::Sealing(format!("member {} has no public key", member.number))
                })?;
                parse_public_key(text).map_err(|err| {
                    ClientError::Sealing(format!(
                        "member {} has an invalid public key: {err}",
                        member.number
                    ))
                })?
            };
            recipients.push((member.id, key));
        }
        let message_id = request.message_id.unwrap_or_else(Uuid::now_v7);
        let binding = SealBinding {
            room_id,
            message_id,
            sender_id: keys.identity_id,
            ask: request.ask,
            deadline: request.deadline,
            reply_to: request.reply_to,
        };
        let sealed = seal(content, &binding, &keys.key_pair, &recipients)
            .map_err(|err| ClientError::Sealing(err.to_string()))?;
        let body = SendRequest {
            to: None,
            room_id: Some(room_id),
            message_id: Some(message_id),
            text: None,
            sealed: Some(sealed),
            ..request.clone()
        };
        self.send(&body).await
    }

    /// `envelope` with its sealed content opened by this client's key, or
    /// the reason it cannot be. Plain messages come back as they are. The
    /// sender's public key is fetched with `GET /v1/identities/{number}`
    /// once per client.
    pub async fn open_message(&self, envelope: MessageEnvelope) -> OpenedMessage {
        let (opened, open_error) = match &envelope.sealed {
            None => (None, None),
            Some(payload) => match self.open_sealed(&envelope, payload).await {
                Ok(content) => (Some(content), None),
                Err(reason) => (None, Some(reason.to_owned())),
            },
        };
        OpenedMessage {
            envelope,
            opened,
            open_error,
        }
    }

    async fn open_sealed(
        &self,
        envelope: &MessageEnvelope,
        payload: &SealedPayload,
    ) -> Result<SealedContent, &'static str> {
        let keys = self.keys.clone().ok_or(NO_KEY_PAIR)?;
        let sender = &envelope.sender;
        let sender_public = if sender.id == keys.identity_id {
            keys.public_key
        } else {
            self.sender_key(sender.id, &sender.number).await?
        };
        open(
            payload,
            &SealBinding::of_envelope(envelope),
            &sender_public,
            keys.identity_id,
            &keys.key_pair,
        )
        .map_err(|err| err.reason())
    }

    /// The public key of identity `id` (number `number`), cached per client,
    /// failures included.
    async fn sender_key(
        &self,
        id: Uuid,
        number: &IdentityNumber,
    ) -> Result<[u8; 32], &'static str> {
        if let Some(cached) = self.cached_sender_key(id) {
            return cached;
        }
        let fetched = match self.identity(number).await {
            // The number must still name the identity that sent the message.
            Ok(identity) if identity.id == id => match identity.public_key {
                Some(text) => parse_public_key(&text).map_err(|_| SENDER_KEY_INVALID),
                None => Err(SENDER_KEY_UNAVAILABLE),
            },
            Ok(_) => Err(SENDER_KEY_UNAVAILABLE),
            Err(ClientError::Api { status, .. }) if status < 500 => Err(SENDER_KEY_UNAVAILABLE),
            // A network or server failure may pass: try again next time.
            Err(_) => return Err(SENDER_KEY_UNAVAILABLE),
        };
        if let Ok(mut cache) = self.sender_keys.lock() {
            cache.insert(id, fetched);
        }
        fetched
    }

    fn cached_sender_key(&self, id: Uuid) -> Option<Result<[u8; 32], &'static str>> {
        self.sender_keys.lock().ok()?.get(&id).copied()
    }

    /// The direct room shared with contact `number`.
    async fn direct_room(&self, number: &IdentityNumber) -> Result<Uuid, ClientError> {
        self.contacts()
            .await?
            .contacts
            .into_iter()
            .find(|contact| &contact.number == number)
            .map(|contact| contact.room_id)
            .ok_or_else(|| ClientError::Sealing(format!("{number} is not one of your contacts")))
    }
}
