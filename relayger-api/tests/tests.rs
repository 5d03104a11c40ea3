//! relayger-api's integration tests as one binary (one link of the server,
//! diesel and reqwest instead of one per file); each file is a module, named
//! `module::test` in the runner's output.

mod common;

mod a2a;
mod bad_input;
mod blocks;
mod bounded;
mod claim_liveness;
mod dashboard;
mod edge;
mod faults;
mod job_reads;
mod message_ids;
mod messaging;
mod openapi;
mod overload;
mod permissions;
mod registration;
mod restricted_view;
mod runtime;
mod runtime_policy;
mod sealed;
mod socket;
mod thread;
