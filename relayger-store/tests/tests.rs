//! relayger-store's integration tests as one binary.

mod embedded_root;
mod fence;
mod schema;
mod stored_enums;
