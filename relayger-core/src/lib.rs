//! Relayger's pure domain rules and wire types.
//!
//! This crate does no I/O: no sockets, no files, no async runtime, no database.
//! Everything here is deterministic and unit-tested with tables, except the
//! two things read from outside, each in one place: randomness (`random`,
//! for lease owners and sealing) and the clock (`wire::Timestamp::now`,
//! which no rule calls: rules take `now` as an argument). The server
//! (`relayger-store`, `relayger-api`) and the client (`relayger-worker`) share
//! these definitions, so the wire format and the rules exist exactly once.

pub mod a2a;
pub mod builtin;
pub mod canonical;
pub mod claim_pacing;
pub mod claim_plan;
pub mod claim_rule;
#[cfg(test)]
mod code_map_tests;
#[cfg(test)]
mod contract_tests;
pub mod delivery;
pub mod error;
pub mod fingerprint;
pub mod finish_route;
pub mod handler_timeout;
pub mod history;
pub mod ids;
pub mod inbox_budget;
pub mod job;
pub mod job_filter;
pub mod job_result;
pub mod lease;
pub mod limits;
pub mod lookup;
pub mod naming;
pub mod notes;
#[cfg(feature = "openapi")]
mod openapi;
pub mod paging;
pub mod peers;
pub mod policy;
pub mod process_abi;
mod random;
pub mod room_view;
pub mod runtime_name;
pub mod sealed;
pub mod thread_budget;
pub mod transport;
pub mod wire;

pub use error::{ErrorBody, ErrorCode, ErrorEnvelope};
