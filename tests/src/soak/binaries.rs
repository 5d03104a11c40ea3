//! Finding the workspace binaries from the soak binary as well as from a
//! test: `relayger-soak` lives in `target/<profile>/` itself, where
//! [`crate::binary`] (made for `target/<profile>/deps/<test>`) does not look.

use std::path::PathBuf;

use anyhow::Context;

pub(crate) fn locate(name: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("current_exe")?;
    if let Some(dir) = exe.parent() {
        let beside = dir.join(name);
        if beside.is_file() {
            return Ok(beside);
        }
    }
    crate::binary(name)
}
