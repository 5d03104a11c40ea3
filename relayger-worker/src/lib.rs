//! The embeddable Relayger client and persistent assistant listener.
//!
//! Programs embed this crate to talk to a Relayger server and to run a
//! worker next to an agent identity. It depends on `relayger-core` for the
//! wire types and never on the server's store or HTTP crates, so embedding it
//! does not pull in a database driver.
//!
//! - [`Client`]: one typed method per route of the wire table
//!   (`relayger_core::wire`), sealing ([`Client::send_sealed`]) and opening
//!   ([`Client::open_message`]) end-to-end encrypted messages; the runtime
//!   routes under [`Client::runtimes`]; the signal sockets
//!   ([`Client::socket`], [`Runtimes::socket`]).
//! - [`run_worker`] with [`WorkerOptions`]: the persistent assistant
//!   listener. A [`Handler`] (an `async fn`, a closure through
//!   [`handler_fn`], or a [`BuiltinHandler`]) gets a [`HandlerInput`] and
//!   returns a [`HandlerOutput`] or a [`HandlerError`]; progress arrives as
//!   [`WorkerEvent`]s through an [`EventSink`].
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

#![warn(missing_docs)]

mod client;
pub mod handlers;
mod profile;
mod runtimes;
mod sealing;
mod socket;
mod worker;

pub use client::{Client, ClientError, ThreadQuery};
pub use handlers::{
    HandlerConfigError, HandlerJob, HandlerOutcome, NodeModuleHandler, ProcessHandler,
};
pub use profile::{
    CURRENT_FILE, DEFAULT_PROFILE, HOME_ENV, Profile, ProfileDir, ProfileEntry, ProfileError,
};
pub use runtimes::{Claim, Runtimes};
pub use sealing::OpenedMessage;
pub use socket::SignalSocket;
pub use tokio_util::sync::CancellationToken;
pub use worker::{
    BuiltinHandler, DEFAULT_FALLBACK_INTERVAL, EventSink, Handler, HandlerError, HandlerFn,
    HandlerInput, HandlerOutput, SocketState, StopReason, WorkerError, WorkerEvent, WorkerOptions,
    handler_fn, run_worker,
};
