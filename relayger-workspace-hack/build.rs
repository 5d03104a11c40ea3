//! Empty: cargo resolves a crate's build dependencies (here, the features
//! the workspace's proc-macros build syn with) only when it has a build
//! script.

fn main() {}
