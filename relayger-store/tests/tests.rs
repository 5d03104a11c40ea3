//! relayger-store's integration tests as one binary.

mod embedded_root;
mod fence;
mod runtime_statements;
mod schema;
mod stored_enums;
