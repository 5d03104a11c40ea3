//! Where the installed PostgreSQL server binaries are.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::EmbeddedError;

/// Finds a directory holding initdb, pg_ctl and postgres: `RELAYGER_PG_BIN_DIR`,
/// then PATH, then `pg_config --bindir`, then Debian's versioned directories
/// (newest first).
pub fn find_bin_dir() -> Result<PathBuf, EmbeddedError> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(dir) = std::env::var_os("RELAYGER_PG_BIN_DIR") {
        candidates.push(PathBuf::from(dir));
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            // Resolve symlinks so initdb finds its sibling `postgres`.
            if let Ok(real) = std::fs::canonicalize(dir.join("pg_ctl"))
                && let Some(parent) = real.parent()
            {
                candidates.push(parent.to_path_buf());
            }
        }
    }
    if let Ok(output) = Command::new("pg_config").arg("--bindir").output()
        && output.status.success()
    {
        candidates.push(PathBuf::from(
            String::from_utf8_lossy(&output.stdout).trim(),
        ));
    }
    let mut versioned: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_string_lossy().parse::<u32>().ok()?;
            Some((version, entry.path().join("bin")))
        })
        .collect();
    versioned.sort_by_key(|(version, _)| std::cmp::Reverse(*version));
    candidates.extend(versioned.into_iter().map(|(_, dir)| dir));
    candidates.push(PathBuf::from("/usr/local/pgsql/bin"));
    first_complete_bin_dir(candidates)
}

/// The first candidate that holds all three server binaries.
pub(super) fn first_complete_bin_dir(candidates: Vec<PathBuf>) -> Result<PathBuf, EmbeddedError> {
    let has_all = |dir: &Path| {
        ["initdb", "pg_ctl", "postgres"]
            .iter()
            .all(|b| dir.join(b).is_file())
    };
    candidates
        .into_iter()
        .find(|dir| has_all(dir))
        .ok_or(EmbeddedError::BinariesNotFound)
}
