//! relayger-store's integration tests as one binary.

mod embedded_root;
mod schema;
