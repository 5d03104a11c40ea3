//! Request and response bodies shared by the server and its clients: the one
//! place that knows the wire format.
//!
//! JSON fields are camelCase, event names and error codes snake_case, times
//! RFC 3339 UTC with `Z` ([`Timestamp`]). Every request body refuses unknown
//! fields, so a typo is an error rather than a silently ignored option.
//!
//! Routes (all under `/v1` except health; `Authorization: Bearer TOKEN`):
//!
//! | route | body → response |
//! | --- | --- |
//! | `GET /healthz` | → [`HealthResponse`] (no token) |
//! | `POST /v1/register` | [`RegisterRequest`] → 201 [`RegisterResponse`] (no token) |
//! | `POST /v1/agents` | [`CreateAgentRequest`] → 201 [`RegisterResponse`] |
//! | `GET /v1/me` | → [`Identity`] |
//! | `GET /v1/identities/{number}` | → [`Identity`] (public fields) |
//! | `POST /v1/tokens` | [`CreateTokenRequest`] → 201 [`CreatedToken`] |
//! | `GET /v1/tokens` | `?limit&after` → [`TokenList`] |
//! | `DELETE /v1/tokens/{id}` | → [`TokenInfo`] (revoked) |
//! | `GET /v1/contacts` | → [`ContactList`] |
//! | `GET /v1/contacts/requests` | `?as=AGENT&limit&after` → [`ContactRequests`] |
//! | `POST /v1/contacts/requests` | [`ContactNumber`] → 201 [`ContactRequestView`] |
//! | `POST /v1/contacts/requests/{number}/accept` | [`AnswerRequest`] → [`Contact`] |
//! | `POST /v1/contacts/requests/{number}/decline` | [`AnswerRequest`] → [`ContactRequestView`] |
//! | `DELETE /v1/contacts/requests/{number}` | → [`ContactRequestView`] (withdrawn) |
//! | `POST /v1/contacts/{number}/block` / `DELETE …/block` | → [`Done`] |
//! | `DELETE /v1/contacts/{number}` | → [`Done`] (removed) |
//! | `GET /v1/rooms` | `?limit&after` → [`RoomList`] |
//! | `POST /v1/rooms` | [`CreateRoomRequest`] → 201 [`Room`] |
//! | `GET /v1/rooms/{room}` | → [`Room`] |
//! | `POST /v1/rooms/{room}/members` | [`ContactNumber`] → [`Room`] |
//! | `POST /v1/rooms/{room}/leave` | → [`Done`] |
//! | `POST /v1/messages` | [`SendRequest`] → 201 [`MessageEnvelope`] (200 on an identical retry) |
//! | `GET /v1/rooms/{room}/messages` | `?after&before&limit` → [`HistoryPage`] |
//! | `GET /v1/rooms/{room}/messages/{message}` | → [`MessageEnvelope`] |
//! | `GET /v1/rooms/{room}/messages/{message}/thread` | `?after&limit&maxBytes` → [`ThreadResponse`] |
//! | `GET /v1/inbox` | `?limit&after` → [`InboxResponse`] |
//! | `GET /v1/rooms/{room}/messages/{message}/delivery` | → [`Delivery`] (members of the room) |
//! | `DELETE /v1/rooms/{room}/messages/{message}/ask` | → [`Delivery`] (the sender cancels its question) |
//! | `POST /v1/rooms/{room}/ack` | [`AckRequest`] → [`AckResponse`] |
//! | `GET /v1/socket` | WebSocket of [`SocketSignal`] text frames |
//!
//! A browser, which cannot set `Authorization` on a WebSocket, may instead
//! offer the subprotocols `relayger.v1` and `relayger.token.TOKEN` on either
//! socket; the server answers `relayger.v1` (never the token). `GET /` and
//! `/dashboard/*` serve the web dashboard (no token).
//!
//! The runtime routes are listed in the `runtime` module's documentation,
//! the dashboard's reads of a runtime's jobs in the `activity` module's.

mod activity;
mod events;
mod health;
mod identity;
mod messages;
pub mod names;
mod rooms;
mod runtime;
mod time_format;

pub use activity::{
    ACTIVITY_MINUTES, ActivityMinute, AttemptView, JobDetail, JobSearchPage, JobSummary,
    RuntimeActivity,
};
pub use events::{SocketState, StopReason, WorkerEvent};
pub use health::{ClientHealth, ConnectionHealth, DatabaseHealth, HealthResponse};
pub use identity::{
    AnswerRequest, Contact, ContactList, ContactNumber, ContactRequestState, ContactRequestView,
    ContactRequests, CreateAgentRequest, CreateTokenRequest, CreatedToken, Done, Identity,
    IdentityKind, IdentityRef, RegisterRequest, RegisterResponse, RequestDirection, Scope,
    TokenInfo, TokenList,
};
pub use messages::{
    AckRequest, AckResponse, Delivery, DeliveryState, HistoryPage, InboxResponse, InboxRoom,
    MAX_TEXT_BYTES, MessageEnvelope, RecipientDelivery, SEALED_SUITE, SEALED_VERSION,
    SealedPayload, SealedRecipient, SendRequest, SocketSignal, ThreadResponse,
};
pub use rooms::{CreateRoomRequest, MAX_ROOM_MEMBERS, Room, RoomKind, RoomList, RoomMember};
pub use runtime::{
    ClaimRequest, ClaimResponse, ClaimedJob, ConfigureRequest, FinishBatchRequest,
    FinishBatchResponse, FinishOutcome, FinishRequest, FinishResponse, HeartbeatResponse,
    JobCounts, JobFinish, JobFinishResult, JobList, JobResult, JobView, LeaseRequest, LogPage,
    LogRecord, MAX_FINISHES_PER_BATCH, Note, NoteInput, NoteList, NoteWrite,
    RegisterRuntimeRequest, Runtime, RuntimeBacklog, RuntimeList, RuntimeStats, StartFrom, Usage,
};
pub use time_format::Timestamp;
