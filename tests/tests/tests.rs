//! The end-to-end tests as one binary (one link instead of one per file);
//! each file is a module, named `module::test` in the runner's output.

mod cli_support;

mod a2a_client;
mod a2a_server;
mod cli_bad_input;
mod cli_delivery;
mod cli_everyday;
mod cli_identities;
mod cli_local;
mod cli_messages;
mod cli_operators;
mod cli_sealed;
mod cli_transport;
mod dashboard;
mod deploy;
mod ha_failover;
mod ha_instances;
mod ha_pooler;
mod mcp_http;
mod mcp_modern;
mod observability;
mod server;
mod shipped;
mod soak;
mod worker_cli;
mod worker_crash;
mod worker_durability;
mod worker_example;
mod worker_fencing;
mod worker_handlers;
mod worker_library;
mod worker_restart;
mod worker_seed;
mod worker_skips;
mod worker_wake;
