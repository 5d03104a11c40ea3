//! Reading a handler's pipes: the capped result, and its log lines, which go
//! to the worker's stderr with a prefix and never to its stdout.

use std::io::Write;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::task::JoinHandle;

const CHUNK: usize = 8192;
/// Longest log line (a handler's stderr, a stray stdout line) forwarded
/// whole.
pub(super) const MAX_LOG_LINE: usize = 8192;
/// How long a runner waits for a handler's pipes to close after its
/// process group ended. Only a process that left the group (`setsid`) and
/// kept a pipe open can make this matter.
pub(super) const PIPE_GRACE: Duration = Duration::from_secs(1);

/// Reads everything, keeping at most `max + 1` bytes (so the caller can tell
/// "exactly max" from "more"), and drains the rest so the writer never
/// blocks on a full pipe.
#[cfg(feature = "process")]
pub(super) async fn read_capped(mut reader: impl AsyncRead + Unpin, max: usize) -> Vec<u8> {
    let keep = max.saturating_add(1);
    let mut kept = Vec::new();
    let mut chunk = vec![0; CHUNK];
    while let Ok(read @ 1..) = reader.read(&mut chunk).await {
        let room = keep.saturating_sub(kept.len()).min(read);
        kept.extend_from_slice(&chunk[..room]);
    }
    kept
}

/// Hands each line of the stream (without its `\n` or `\r\n`) to `each`,
/// with `true` when it is whole; a line longer than `max_line` arrives as
/// its first `max_line` bytes with `false`, and the rest of it is dropped.
pub(super) async fn read_lines(
    mut reader: impl AsyncRead + Unpin,
    max_line: usize,
    mut each: impl FnMut(&[u8], bool),
) {
    let mut line = Vec::new();
    let mut cut = false;
    let mut chunk = vec![0; CHUNK];
    while let Ok(read @ 1..) = reader.read(&mut chunk).await {
        for piece in chunk[..read].split_inclusive(|&byte| byte == b'\n') {
            let (content, ends) = match piece.strip_suffix(b"\n") {
                Some(content) => (content, true),
                None => (piece, false),
            };
            if !cut {
                let room = max_line.saturating_sub(line.len());
                if content.len() > room {
                    line.extend_from_slice(&content[..room]);
                    each(&line, false);
                    cut = true;
                } else {
                    line.extend_from_slice(content);
                }
            }
            if ends {
                if !cut {
                    each(line.strip_suffix(b"\r").unwrap_or(&line), true);
                }
                line.clear();
                cut = false;
            }
        }
    }
    if !cut && !line.is_empty() {
        each(&line, true);
    }
}

/// Forwards every line of `stderr` to `log` until the pipe closes.
pub(super) fn forward_log(
    stderr: impl AsyncRead + Unpin + Send + 'static,
    mut log: HandlerLog,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        read_lines(stderr, MAX_LOG_LINE, |line, whole| log.line(line, whole)).await;
    })
}

/// Forwards a handler's log lines to the worker's stderr as
/// `PREFIX line`, up to a byte budget per job; past it, one notice and
/// silence. Each line is written under the stderr lock, so lines of
/// concurrent jobs never interleave mid-line.
#[derive(Debug)]
pub(super) struct HandlerLog {
    prefix: String,
    remaining: usize,
    silenced: bool,
}

impl HandlerLog {
    pub(super) fn new(prefix: String, max_bytes: usize) -> HandlerLog {
        HandlerLog {
            prefix,
            remaining: max_bytes,
            silenced: max_bytes == 0,
        }
    }

    pub(super) fn line(&mut self, line: &[u8], whole: bool) {
        if self.silenced {
            return;
        }
        let mut stderr = std::io::stderr().lock();
        if line.len() > self.remaining {
            let _ = writeln!(
                stderr,
                "{} [further output dropped: the per-job limit was reached]",
                self.prefix
            );
            self.silenced = true;
            return;
        }
        self.remaining -= line.len();
        let text = String::from_utf8_lossy(line);
        let cut = if whole { "" } else { " [line cut]" };
        let _ = writeln!(stderr, "{} {text}{cut}", self.prefix);
    }
}
