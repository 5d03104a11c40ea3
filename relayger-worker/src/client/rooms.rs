//! Rooms, members, messages, threads, the inbox and acks.

use relayger_core::ids::IdentityNumber;
use relayger_core::wire::{
    AckRequest, AckResponse, ContactNumber, CreateRoomRequest, Delivery, Done, HistoryPage,
    InboxResponse, MessageEnvelope, Room, RoomList, SendRequest, ThreadResponse,
};
use reqwest::Method;
use uuid::Uuid;

use super::pages::all_pages;
use super::{Client, ClientError, decode};

/// Paging and budget for [`Client::thread`]; `None` leaves the server's
/// default (no `after`, server limit, 8192 bytes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ThreadQuery {
    /// Return only messages with a room seq above this one (the previous
    /// page's `next`).
    pub after: Option<i64>,
    /// At most this many messages (the server caps it at 100).
    pub limit: Option<u32>,
    /// The HTTP JSON byte budget (512–65536).
    pub max_bytes: Option<u32>,
}

/// Which page of a room's history [`Client::history`] reads; `None`
/// leaves the server's default (the newest 50).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HistoryQuery {
    /// Only messages with a room seq above this one (a page's `next`).
    pub after: Option<i64>,
    /// Only messages with a room seq below this one (a page's `prev`).
    pub before: Option<i64>,
    /// At most this many messages (the server caps it at 100).
    pub limit: Option<u32>,
}

impl Client {
    /// `GET /v1/rooms`: all the rooms the caller is a member of (every
    /// page, following `next`).
    pub async fn rooms(&self) -> Result<RoomList, ClientError> {
        all_pages(|after| self.rooms_page(after, None)).await
    }

    /// One page of `GET /v1/rooms`: rooms after `after` (a previous page's
    /// `next`), at most `limit` (default 50, at most 100).
    pub async fn rooms_page(
        &self,
        after: Option<Uuid>,
        limit: Option<u32>,
    ) -> Result<RoomList, ClientError> {
        self.get_page("/v1/rooms", &[], after, limit).await
    }

    /// `GET /v1/rooms/{room}`: one room with its current members and their
    /// public keys.
    pub async fn room(&self, room: Uuid) -> Result<Room, ClientError> {
        self.get(&format!("/v1/rooms/{room}")).await
    }

    /// `POST /v1/rooms`: a group room with the caller and these contacts.
    pub async fn create_room(&self, body: &CreateRoomRequest) -> Result<Room, ClientError> {
        self.post("/v1/rooms", body).await
    }

    /// `POST /v1/rooms/{room}/members`: adds one of the caller's contacts.
    pub async fn add_member(
        &self,
        room: Uuid,
        number: &IdentityNumber,
    ) -> Result<Room, ClientError> {
        let body = ContactNumber {
            number: number.clone(),
        };
        self.post(&format!("/v1/rooms/{room}/members"), &body).await
    }

    /// `POST /v1/rooms/{room}/leave`.
    pub async fn leave_room(&self, room: Uuid) -> Result<Done, ClientError> {
        self.send_json(
            Method::POST,
            &format!("/v1/rooms/{room}/leave"),
            None::<&()>,
        )
        .await
    }

    /// `POST /v1/messages`: a plain message (or an already sealed one).
    ///
    /// ```no_run
    /// # async fn example(client: relayger_worker::Client) -> Result<(), relayger_worker::ClientError> {
    /// use relayger_worker::wire::SendRequest;
    ///
    /// let sent = client
    ///     .send(&SendRequest {
    ///         to: Some("100000042".parse().expect("a number")),
    ///         text: Some("What is the status?".into()),
    ///         ask: true,
    ///         ..SendRequest::default()
    ///     })
    ///     .await?;
    /// println!("sent #{} to {}", sent.seq, sent.conversation_id);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn send(&self, body: &SendRequest) -> Result<MessageEnvelope, ClientError> {
        self.post("/v1/messages", body).await
    }

    /// `GET /v1/rooms/{room}/messages/{message}`: one message, without any
    /// byte filter.
    pub async fn message(&self, room: Uuid, message: Uuid) -> Result<MessageEnvelope, ClientError> {
        self.get(&format!("/v1/rooms/{room}/messages/{message}"))
            .await
    }

    /// `GET /v1/rooms/{room}/messages/{message}/delivery`: what became of a
    /// question, for each other member of its room (readable by members).
    pub async fn delivery(&self, room: Uuid, message: Uuid) -> Result<Delivery, ClientError> {
        self.get(&format!("/v1/rooms/{room}/messages/{message}/delivery"))
            .await
    }

    /// `DELETE /v1/rooms/{room}/messages/{message}/ask`: the sender cancels
    /// its question: jobs not yet taken end `canceled`, a worker holding one
    /// learns it at its next heartbeat. Idempotent; answers the delivery.
    pub async fn cancel_question(
        &self,
        room: Uuid,
        message: Uuid,
    ) -> Result<Delivery, ClientError> {
        self.send_json(
            Method::DELETE,
            &format!("/v1/rooms/{room}/messages/{message}/ask"),
            None::<&()>,
        )
        .await
    }

    /// `GET /v1/rooms/{room}/messages/{message}/thread`: the root and its
    /// reply chain in room-seq order, one page within the byte budget.
    pub async fn thread(
        &self,
        room: Uuid,
        message: Uuid,
        query: ThreadQuery,
    ) -> Result<ThreadResponse, ClientError> {
        let mut params: Vec<(&str, String)> = Vec::new();
        if let Some(after) = query.after {
            params.push(("after", after.to_string()));
        }
        if let Some(limit) = query.limit {
            params.push(("limit", limit.to_string()));
        }
        if let Some(max_bytes) = query.max_bytes {
            params.push(("maxBytes", max_bytes.to_string()));
        }
        self.check_transport()?;
        let request = self
            .request(
                Method::GET,
                &format!("/v1/rooms/{room}/messages/{message}/thread"),
            )
            .query(&params);
        decode(request.send().await?).await
    }

    /// `GET /v1/rooms/{room}/messages`: one page of the room's history,
    /// oldest first: after `after`, before `before`, or (neither) the
    /// newest; `next`/`prev` continue it either way.
    pub async fn history(
        &self,
        room: Uuid,
        query: HistoryQuery,
    ) -> Result<HistoryPage, ClientError> {
        let params: Vec<(&str, String)> = [
            ("after", query.after.map(|seq| seq.to_string())),
            ("before", query.before.map(|seq| seq.to_string())),
            ("limit", query.limit.map(|limit| limit.to_string())),
        ]
        .into_iter()
        .filter_map(|(name, value)| Some((name, value?)))
        .collect();
        self.check_transport()?;
        let request = self
            .request(Method::GET, &format!("/v1/rooms/{room}/messages"))
            .query(&params);
        decode(request.send().await?).await
    }

    /// `GET /v1/inbox`: per room, the messages after the caller's ACK cursor.
    /// The first page: see [`Client::inbox_page`] for the rest.
    pub async fn inbox(&self) -> Result<InboxResponse, ClientError> {
        self.inbox_page(None, None).await
    }

    /// One inbox page: rooms after `after` (a previous page's `next`), at
    /// most `limit` messages in all (default 200, at most 500).
    pub async fn inbox_page(
        &self,
        after: Option<Uuid>,
        limit: Option<u32>,
    ) -> Result<InboxResponse, ClientError> {
        self.get_page("/v1/inbox", &[], after, limit).await
    }

    /// `POST /v1/rooms/{room}/ack`: everything up to `seq` has been seen.
    pub async fn ack(&self, room: Uuid, seq: i64) -> Result<AckResponse, ClientError> {
        self.post(&format!("/v1/rooms/{room}/ack"), &AckRequest { seq })
            .await
    }
}
