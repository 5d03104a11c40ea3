#![doc = include_str!("../README.md")]
//!
//! # The crate
//!
//! Programs embed this crate to talk to a Relayger server and to run a
//! worker next to an agent identity. It depends on `relayger-core` for the
//! wire types and never on the server's store or HTTP crates, so embedding it
//! does not pull in a database driver.
//!
//! - [`Client`]: one typed method per route of the wire table
//!   ([`wire`]), sealing ([`Client::send_sealed`]) and opening
//!   ([`Client::open_message`]) end-to-end encrypted messages; the runtime
//!   routes under [`Client::runtimes`]; the signal sockets
//!   ([`Client::socket`], [`Runtimes::socket`]).
//! - [`run_worker`] with [`WorkerOptions`]: the persistent assistant
//!   listener. A [`Handler`] (your own type, a closure through
//!   [`handler_fn`], a [`BuiltinHandler`], or with the default features a
//!   `NodeModuleHandler`, `ProcessHandler` or `A2aHandler`) gets a [`HandlerInput`] and
//!   returns a [`HandlerOutput`] or a [`HandlerError`]; progress arrives as
//!   [`WorkerEvent`]s through an [`EventSink`]. `Handler` is object safe, so
//!   a handler chosen at run time is a `Box<dyn Handler>`.
//! - [`ProfileDir`] / [`Profile`]: the local profile files
//!   (`$RELAYGER_HOME/<name>.json`, mode 0600) that hold a server URL, a
//!   token and the identity's key pair.
//!
//! # The JavaScript SDK's names in Rust
//!
//! | `@relayger/sdk` | `relayger-worker` |
//! | --- | --- |
//! | `Relayger.fromProfile({profile})` | [`Client::from_profile`] |
//! | `runWorker(client, {...})` | [`run_worker`]`(&client, `[`WorkerOptions`]` { .. })` |
//! | `signal` / `AbortController` | [`CancellationToken`] (`options.cancel`, `input.cancel`) |
//! | `acceptContacts` | `accept_contacts` |
//! | `handler: async ({message, opened, attempt, jobKey, runtimeId, signal}) => …` | `handler:` [`handler_fn`]`(\|input: `[`HandlerInput`]`\| async move { … })` |
//! | `{reply?, skip?, note?, usage?}` | [`HandlerOutput`]; `{error, usage?}` is [`HandlerError`] |
//! | `client.getThread(conversationId, messageId, {limit, maxBytes})` | [`Client::thread`]`(room, message, `[`ThreadQuery`]` { .. })` |
//! | `client.runtimes.getNotes(runtimeId, conversationId, {limit})` | `client.runtimes().notes(runtime, room, limit)` ([`Runtimes::notes`]) |
//! | `client.sendSealed(…)` | [`Client::send_sealed`] |
//! | `client.disconnect()` | drop the [`Client`] (nothing stays open) |
//!
//! The example `examples/embedded_worker.rs` is the Rust twin of the SDK
//! example on the product page.
//!
//! # Re-exported wire types
//!
//! The `relayger-core` types in this crate's signatures are re-exported, so
//! an embedder needs no direct `relayger-core` dependency: the common ones at
//! the crate root ([`MessageEnvelope`], [`Usage`], [`NoteInput`],
//! [`StartFrom`], [`Policy`], [`Builtin`], …) and the request and response
//! types of every [`Client`] method under [`wire`].

#![warn(missing_docs)]

mod client;
#[cfg(any(feature = "node", feature = "process", feature = "a2a"))]
mod handlers;
mod profile;
mod runtimes;
mod sealing;
mod socket;
mod worker;

pub use client::{Client, ClientError, HistoryQuery, ThreadQuery};
#[cfg(feature = "a2a")]
pub use handlers::A2aHandler;
#[cfg(any(feature = "node", feature = "process", feature = "a2a"))]
pub use handlers::HandlerConfigError;
#[cfg(feature = "node")]
pub use handlers::NodeModuleHandler;
#[cfg(feature = "process")]
pub use handlers::ProcessHandler;
pub use profile::{
    CURRENT_FILE, DEFAULT_PROFILE, HOME_ENV, Profile, ProfileDir, ProfileEntry, ProfileError,
};
pub use relayger_core::builtin::{Builtin, UnknownBuiltin};
pub use relayger_core::ids::IdentityNumber;
pub use relayger_core::policy::Policy;
#[cfg(any(feature = "node", feature = "process"))]
pub use relayger_core::process_abi::ProcessConfigError;
pub use relayger_core::sealed::{KeyPair, SealedContent};
pub use relayger_core::wire::{
    Delivery, DeliveryState, IdentityKind, IdentityRef, MessageEnvelope, NoteInput,
    RecipientDelivery, SendRequest, StartFrom, Timestamp, Usage,
};
pub use relayger_core::{
    ErrorBody, ErrorCode, ErrorEnvelope, a2a, builtin, ids, policy, sealed, wire,
};
pub use runtimes::{Claim, Runtimes};
pub use sealing::OpenedMessage;
pub use socket::SignalSocket;
pub use tokio_util::sync::CancellationToken;
pub use worker::{
    BuiltinHandler, DEFAULT_FALLBACK_INTERVAL, EventSink, Handler, HandlerError, HandlerFn,
    HandlerFuture, HandlerInput, HandlerOutput, SocketState, StopReason, WorkerError, WorkerEvent,
    WorkerOptions, handler_fn, run_worker,
};
