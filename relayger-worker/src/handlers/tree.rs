//! Everything a handler started, and ending all of it.
//!
//! On POSIX each handler runs as the leader of its own process group
//! (`process_group(0)` at spawn), so one signal reaches every child and
//! grandchild that did not deliberately leave the group (`setsid`). On
//! Windows the tree is ended with `taskkill /T /F`.

use std::process::ExitStatus;

use std::process::Stdio;

use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};

use super::one_line;

/// A handler process started in its own tree, with its three pipes.
#[derive(Debug)]
pub(super) struct Piped {
    pub(super) child: Child,
    pub(super) tree: ProcessTree,
    pub(super) stdin: ChildStdin,
    pub(super) stdout: ChildStdout,
    pub(super) stderr: ChildStderr,
}

/// The process group (POSIX) or process tree (Windows) of one handler run.
/// Dropping it without [`ProcessTree::end`] (the run's future was dropped)
/// kills the whole tree at once.
#[derive(Debug)]
pub(super) struct ProcessTree {
    pid: Option<u32>,
    ended: bool,
}

impl ProcessTree {
    /// Starts `command` in a tree of its own.
    pub(super) fn spawn(command: &mut Command) -> std::io::Result<(Child, ProcessTree)> {
        #[cfg(unix)]
        command.process_group(0);
        command.kill_on_drop(true);
        let child = command.spawn()?;
        let tree = ProcessTree {
            pid: child.id(),
            ended: false,
        };
        Ok((child, tree))
    }

    /// Starts `command` in a tree of its own with stdin, stdout and stderr
    /// piped. A failure is the run's `spawn_failed` reason, naming
    /// `program`.
    pub(super) async fn spawn_piped(command: &mut Command, program: &str) -> Result<Piped, String> {
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let (mut child, mut tree) = ProcessTree::spawn(command).map_err(|error| {
            format!("spawn_failed: {program}: {}", one_line(&error.to_string()))
        })?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            tree.end(&mut child, None).await;
            return Err(format!("spawn_failed: {program} has no pipes"));
        };
        Ok(Piped {
            child,
            tree,
            stdin,
            stdout,
            stderr,
        })
    }

    /// Ends the tree and reaps the leader: the polite signal to all of it,
    /// then, after [`STOP_GRACE`](super::STOP_GRACE), the hard one to
    /// whatever is left. Called after every run, also when the leader has
    /// already exited (`leader` is then its status), so no child outlives
    /// the job. Returns the leader's exit status when it could be read.
    pub(super) async fn end(
        &mut self,
        child: &mut Child,
        leader: Option<ExitStatus>,
    ) -> Option<ExitStatus> {
        let status = match self.pid {
            Some(pid) => platform::end(pid, child, leader).await,
            None => leader,
        };
        self.ended = true;
        match status {
            Some(status) => Some(status),
            None => child.wait().await.ok(),
        }
    }
}

impl Drop for ProcessTree {
    fn drop(&mut self) {
        if let (false, Some(pid)) = (self.ended, self.pid) {
            platform::kill_now(pid);
        }
    }
}

#[cfg(unix)]
mod platform {
    use std::process::ExitStatus;
    use std::time::Duration;

    use nix::sys::signal::{Signal, killpg};
    use nix::unistd::Pid;
    use tokio::process::Child;
    use tokio::time::Instant;

    use super::super::STOP_GRACE;

    const POLL: Duration = Duration::from_millis(20);

    /// Sends `signal` to the group; `None` checks whether anyone is left.
    /// A group whose last member is gone answers ESRCH (an unreaped zombie
    /// still counts as a member, so a leftover one costs the grace).
    fn signal_group(pid: u32, signal: Option<Signal>) -> bool {
        match i32::try_from(pid) {
            Ok(raw) => killpg(Pid::from_raw(raw), signal).is_ok(),
            Err(_) => false,
        }
    }

    pub(super) async fn end(
        pid: u32,
        child: &mut Child,
        mut leader: Option<ExitStatus>,
    ) -> Option<ExitStatus> {
        if !signal_group(pid, Some(Signal::SIGTERM)) {
            return leader;
        }
        let deadline = Instant::now() + STOP_GRACE;
        loop {
            if leader.is_none() {
                leader = child.try_wait().ok().flatten();
            }
            if leader.is_some() && !signal_group(pid, None) {
                return leader;
            }
            if Instant::now() >= deadline {
                signal_group(pid, Some(Signal::SIGKILL));
                return leader;
            }
            tokio::time::sleep(POLL).await;
        }
    }

    pub(super) fn kill_now(pid: u32) {
        signal_group(pid, Some(Signal::SIGKILL));
    }
}

#[cfg(windows)]
mod platform {
    use std::process::{ExitStatus, Stdio};

    use tokio::process::Child;

    /// `taskkill /T /F`: the process and every process it started. Windows
    /// has no polite signal for console programs, so the tree is ended at
    /// once. A tree whose leader has exited cannot be found by its pid any
    /// more; reaching such orphans would need a Job Object.
    fn taskkill(pid: u32) -> std::io::Result<std::process::Child> {
        std::process::Command::new("taskkill")
            .args(["/T", "/F", "/PID", &pid.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
    }

    pub(super) async fn end(
        pid: u32,
        child: &mut Child,
        leader: Option<ExitStatus>,
    ) -> Option<ExitStatus> {
        if leader.is_some() {
            return leader;
        }
        if let Ok(mut killer) = taskkill(pid) {
            let _ = tokio::task::spawn_blocking(move || killer.wait()).await;
        }
        child.wait().await.ok()
    }

    pub(super) fn kill_now(pid: u32) {
        let _ = taskkill(pid);
    }
}
