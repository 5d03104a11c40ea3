//! No code: this crate only asks for dependency features (see its
//! Cargo.toml), so that `cargo build -p relayger-server` and a build of the
//! whole workspace build relayger-server's dependencies alike and share
//! them.
