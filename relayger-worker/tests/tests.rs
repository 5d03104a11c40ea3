//! relayger-worker's integration tests as one binary; each runner's tests
//! are a module, built when its feature is on.

#![cfg(all(unix, any(feature = "node", feature = "process")))]

mod handlers_support;

#[cfg(feature = "node")]
mod handlers_node;
#[cfg(feature = "process")]
mod handlers_process;
