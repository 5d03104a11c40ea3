//! One process at a time per data directory: a second `relayger-server` on
//! the same directory would otherwise run `initdb` beside the first one's,
//! adopt its cluster and stop it on exit. The lock is an advisory file lock
//! the kernel drops when the holder exits, however it exits, so a crash
//! leaves nothing to clean up.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use super::EmbeddedError;

/// The lock file, directly under the data directory.
const LOCK_FILE: &str = "relayger.lock";

/// The data directory held by this process until dropped.
#[derive(Debug)]
pub(super) struct DataDirLock {
    _file: File,
}

/// Takes the data directory's lock, or reports the process holding it.
/// The directory exists and has passed the ownership checks.
pub(super) fn lock_data_dir(data_dir: &Path) -> Result<DataDirLock, EmbeddedError> {
    let path = data_dir.join(LOCK_FILE);
    let io_error = |source| EmbeddedError::DataDir {
        path: path.clone(),
        source,
    };
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o644)
        .open(&path)
        .map_err(io_error)?;
    match file.try_lock() {
        Ok(()) => {
            file.set_len(0).map_err(io_error)?;
            file.rewind().map_err(io_error)?;
            writeln!(file, "{}", std::process::id()).map_err(io_error)?;
            Ok(DataDirLock { _file: file })
        }
        Err(TryLockError::WouldBlock) => {
            let mut holder = String::new();
            // The holder writes its id just after locking; a read in between
            // finds nothing, and the message says so.
            let _ = file.read_to_string(&mut holder);
            Err(EmbeddedError::InUse {
                path: data_dir.to_path_buf(),
                holder: match holder.trim().parse::<u32>() {
                    Ok(pid) => format!("process {pid}"),
                    Err(_) => "another process".to_owned(),
                },
            })
        }
        Err(TryLockError::Error(source)) => Err(io_error(source)),
    }
}
