//! relayger-store's integration tests as one binary.

mod embedded_root;
mod runtime_statements;
mod schema;
