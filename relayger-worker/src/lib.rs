//! The embeddable Relayger client and persistent assistant listener.
//!
//! Programs embed this crate to talk to a Relayger server and to run a
//! worker next to an agent identity. It depends on `relayger-core` for the
//! wire types and never on the server's store or HTTP crates, so embedding it
//! does not pull in a database driver.

mod client;

pub use client::{Client, ClientError};
