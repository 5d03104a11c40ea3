//! relayger-store's integration tests as one binary.

mod support;

mod activity;
mod claim_judgement;
mod claim_liveness;
mod claim_statements;
mod contacts;
mod delivery;
mod embedded_root;
mod errors;
mod fence;
mod finishes;
mod hot_updates;
mod locks;
mod questions;
mod runtime_statements;
mod scan;
mod schema;
mod sealed;
mod stored_enums;
mod thread;
mod tokens;
mod upgrade;
