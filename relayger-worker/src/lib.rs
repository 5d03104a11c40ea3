//! The embeddable Relayger client and persistent assistant listener.
//!
//! Programs embed this crate to talk to a Relayger server and to run a
//! worker next to an agent identity. It depends on `relayger-core` for the
//! wire types and never on the server's store or HTTP crates, so embedding it
//! does not pull in a database driver.
//!
//! - [`Client`]: one typed method per route of the wire table
//!   (`relayger_core::wire`), sealing ([`Client::send_sealed`]) and opening
//!   ([`Client::open_message`]) end-to-end encrypted messages.
//! - [`ProfileDir`] / [`Profile`]: the local profile files
//!   (`$RELAYGER_HOME/<name>.json`, mode 0600) that hold a server URL, a
//!   token and the identity's key pair.

#![warn(missing_docs)]

mod client;
mod profile;
mod sealing;

pub use client::{Client, ClientError, ThreadQuery};
pub use profile::{DEFAULT_PROFILE, HOME_ENV, Profile, ProfileDir, ProfileEntry, ProfileError};
pub use sealing::OpenedMessage;
