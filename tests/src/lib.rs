//! Support for the end-to-end tests: find the built binaries and drive a real
//! `relayger-server` process.
//!
//! A tests crate gets no `CARGO_BIN_EXE_*` for other packages' binaries, so
//! they are found next to the test executable (`target/<profile>/`).
//! `scripts/test` builds them once before the suite runs.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Context, anyhow, bail};

pub mod a2a_sdks;
pub mod fault_proxy;
pub mod pgbouncer;
pub mod soak;

pub mod bench;

/// How long a server may take to start (initdb on first start included).
pub const START_TIMEOUT: Duration = Duration::from_secs(90);
/// How long a server may take to stop after SIGINT/SIGTERM.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(60);

/// The path of a workspace binary built in the same profile as the running
/// program: beside it when that is a binary of this crate (the soak, the
/// benchmark: `target/<profile>/`), one level up when it is a test
/// (`target/<profile>/deps/<test>`).
pub fn binary(name: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("current_exe")?;
    let dirs = [exe.parent(), exe.parent().and_then(Path::parent)];
    for dir in dirs.into_iter().flatten() {
        let path = dir.join(name);
        if path.is_file() {
            return Ok(path);
        }
    }
    bail!(
        "{name} is not built next to {}; run `cargo build --workspace --bins` in the same profile (scripts/test does)",
        exe.display()
    )
}

/// A fresh directory PostgreSQL (which may run as another user) can enter.
pub fn temp_dir(label: &str) -> anyhow::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("relayger-{label}-{}", uuid_like()));
    std::fs::create_dir_all(&dir)?;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))?;
    Ok(dir)
}

fn uuid_like() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("{}-{nanos}", std::process::id())
}

/// Environment variables that would steer a server away from the test's
/// explicit settings.
const SERVER_ENV: &[&str] = &[
    "DATABASE_URL",
    "RELAYGER_LISTEN_DATABASE_URL",
    "RELAYGER_DATA_DIR",
    "RELAYGER_POSTGRES_USER",
    "RELAYGER_LISTEN",
    "RELAYGER_LEASE_MS",
];

/// A running `relayger-server`. Dropping it interrupts the process and waits,
/// so a failing test never leaves a server (or its PostgreSQL) behind.
#[derive(Debug)]
pub struct ServerProcess {
    child: Option<Child>,
    base_url: String,
    metrics_url: Option<String>,
}

impl ServerProcess {
    /// Starts `relayger-server ARGS` in `cwd` and waits for the line that
    /// says where it listens.
    pub fn start(cwd: &Path, args: &[&str]) -> anyhow::Result<ServerProcess> {
        ServerProcess::start_with(cwd, args, &[], Stdio::inherit())
    }

    /// Like [`ServerProcess::start`], with extra environment variables
    /// (e.g. `RELAYGER_LOG`) and the server's stderr going to `stderr`.
    pub fn start_with(
        cwd: &Path,
        args: &[&str],
        env: &[(&str, &str)],
        stderr: Stdio,
    ) -> anyhow::Result<ServerProcess> {
        let mut command = Command::new(binary("relayger-server")?);
        command
            .args(args)
            .current_dir(cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr);
        for var in SERVER_ENV {
            command.env_remove(var);
        }
        command.envs(env.iter().copied());
        let mut child = command.spawn().context("spawn relayger-server")?;
        let stdout = child.stdout.take().context("server stdout")?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(url) = line.strip_prefix("relayger-server metrics on ") {
                    let _ = tx.send((false, url.to_owned()));
                }
                if let Some(url) = line.strip_prefix("relayger-server listening on ") {
                    let _ = tx.send((true, url.to_owned()));
                }
            }
        });
        let mut server = ServerProcess {
            child: Some(child),
            base_url: String::new(),
            metrics_url: None,
        };
        // The metrics line, when there is one, comes before the address.
        loop {
            let (is_address, url) = rx.recv_timeout(START_TIMEOUT).map_err(|_| {
                anyhow!("relayger-server did not report its address within {START_TIMEOUT:?}")
            })?;
            if is_address {
                server.base_url = url;
                return Ok(server);
            }
            server.metrics_url = Some(url);
        }
    }

    /// `http://127.0.0.1:PORT`.
    /// The server process's id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// `http://127.0.0.1:PORT/metrics` when started with `--metrics-listen`.
    pub fn metrics_url(&self) -> Option<&str> {
        self.metrics_url.as_deref()
    }

    /// Sends `signal` (e.g. "INT", "TERM") and waits for the process to exit.
    pub fn stop_with(mut self, signal: &str) -> anyhow::Result<ExitStatus> {
        let child = self.child.take().context("already stopped")?;
        send_signal(child.id(), signal)?;
        wait_timeout(child, STOP_TIMEOUT)
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if let Some(child) = self.child.take() {
            let pid = child.id();
            let _ = send_signal(pid, "INT");
            if wait_timeout(child, STOP_TIMEOUT).is_err() {
                let _ = send_signal(pid, "KILL");
            }
        }
    }
}

fn send_signal(pid: u32, signal: &str) -> anyhow::Result<()> {
    let status = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .context("run kill")?;
    if !status.success() {
        bail!("kill -{signal} {pid} failed");
    }
    Ok(())
}

/// Waits for a child to exit, giving up after `timeout` (the child is then
/// left to the caller to kill by pid).
pub fn wait_timeout(mut child: Child, timeout: Duration) -> anyhow::Result<ExitStatus> {
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    match rx.recv_timeout(timeout) {
        Ok(status) => Ok(status?),
        Err(_) => bail!("process {pid} did not exit within {timeout:?}"),
    }
}

/// Runs `relayger-server ARGS` to completion (for one-shot commands).
pub fn run_server_command(cwd: &Path, args: &[&str]) -> anyhow::Result<std::process::Output> {
    let mut command = Command::new(binary("relayger-server")?);
    command.args(args).current_dir(cwd).stdin(Stdio::null());
    for var in SERVER_ENV {
        command.env_remove(var);
    }
    command.output().context("run relayger-server")
}

/// Environment variables that would point the CLI at another profile or
/// profile directory than the test's.
const CLI_ENV: &[&str] = &[
    "RELAYGER_PROFILE",
    "RELAYGER_HOME",
    "RELAYGER_SERVER",
    "RELAYGER_TOKEN",
    "RELAYGER_SECRET_KEY",
    "RELAYGER_ALLOW_INSECURE_HTTP",
];

/// What one run of the `relayger` binary printed and how it ended.
#[derive(Debug)]
pub struct CliOutput {
    /// The exit code (`None` when killed by a signal).
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl CliOutput {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }
}

/// The real `relayger` binary with a profile directory of its own
/// (`RELAYGER_HOME`), so tests never see each other's or the user's profiles.
#[derive(Debug, Clone)]
pub struct RelaygerCli {
    home: PathBuf,
}

impl RelaygerCli {
    /// Profiles under `home` (created by the CLI when it first saves one).
    pub fn new(home: impl Into<PathBuf>) -> RelaygerCli {
        RelaygerCli { home: home.into() }
    }

    /// The profile directory.
    pub fn home(&self) -> &Path {
        &self.home
    }

    /// Runs `relayger ARGS` to completion with stdin closed.
    pub fn run(&self, args: &[&str]) -> anyhow::Result<CliOutput> {
        let mut command = Command::new(binary("relayger")?);
        command.args(args).stdin(Stdio::null());
        for var in CLI_ENV {
            command.env_remove(var);
        }
        command.env("RELAYGER_HOME", &self.home);
        let output = command.output().context("run relayger")?;
        Ok(CliOutput {
            code: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        })
    }
}

/// Sends `signal` (e.g. "INT", "KILL") to process `pid`.
pub fn signal_process(pid: u32, signal: &str) -> anyhow::Result<()> {
    send_signal(pid, signal)
}

impl RelaygerCli {
    /// A `relayger` command with this profile directory and without the
    /// environment variables that would point elsewhere, for a test that
    /// needs another working directory, environment, stdin, or to spawn it.
    pub fn command(&self) -> anyhow::Result<Command> {
        let mut command = Command::new(binary("relayger")?);
        for var in CLI_ENV {
            command.env_remove(var);
        }
        command.env("RELAYGER_HOME", &self.home);
        Ok(command)
    }

    /// `sh -c LINE` in `cwd`, with the built `relayger` first on the PATH:
    /// a documented command line run exactly as written.
    pub fn shell_command(&self, line: &str, cwd: &Path) -> anyhow::Result<Command> {
        let bin_dir = binary("relayger")?
            .parent()
            .map(Path::to_path_buf)
            .context("binary directory")?;
        let path = match std::env::var_os("PATH") {
            Some(path) => {
                let mut dirs = vec![bin_dir];
                dirs.extend(std::env::split_paths(&path));
                std::env::join_paths(dirs).context("PATH")?
            }
            None => bin_dir.into_os_string(),
        };
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(line)
            .current_dir(cwd)
            .env("PATH", path);
        for var in CLI_ENV {
            command.env_remove(var);
        }
        command.env("RELAYGER_HOME", &self.home);
        Ok(command)
    }

    /// Runs [`RelaygerCli::shell_command`] to completion with stdin closed
    /// (unless the line pipes into `relayger` itself).
    pub fn shell(&self, line: &str, cwd: &Path) -> anyhow::Result<CliOutput> {
        let output = self
            .shell_command(line, cwd)?
            .stdin(Stdio::null())
            .output()
            .context("run sh")?;
        Ok(CliOutput {
            code: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        })
    }
}

/// Runs `relayger-soak ARGS --json` and returns its figures, panicking
/// (with its output) unless it ran and every check passed.
pub fn passing_soak_figures(args: &[&str]) -> serde_json::Value {
    let output = Command::new(binary("relayger-soak").expect("relayger-soak is built"))
        .args(args)
        .arg("--json")
        .stdin(Stdio::null())
        .output()
        .expect("run relayger-soak");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let figures: serde_json::Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|err| panic!("no JSON figures ({err}): {stdout}\n{stderr}"));
    assert!(
        output.status.success() && figures["ok"] == true,
        "the soak failed ({:?}): {figures:#}\n{stderr}",
        output.status
    );
    figures
}

/// The checks every soak run must pass: nothing lost, duplicated, stale,
/// wrong or backwards, every question handled or dead-lettered, every
/// unfinished attempt explained.
pub fn assert_nothing_lost(figures: &serde_json::Value) {
    let number = |name: &str| soak_number(figures, name);
    assert_eq!(number("lost"), 0, "{figures:#}");
    assert_eq!(number("duplicateReplies"), 0, "{figures:#}");
    assert_eq!(number("staleFinishes"), 0, "{figures:#}");
    assert_eq!(number("wrongReplies"), 0, "{figures:#}");
    assert_eq!(number("checkpointRegressions"), 0, "{figures:#}");
    assert!(number("checkpointSamples") > 0, "{figures:#}");
    assert_eq!(
        number("handled") + number("deadLettered"),
        number("questions"),
        "{figures:#}"
    );
    assert_eq!(number("unfinishedUnexplained"), 0, "{figures:#}");
}

/// The figure `name` of a soak run, which must be there.
pub fn soak_number(figures: &serde_json::Value, name: &str) -> u64 {
    figures[name]
        .as_u64()
        .unwrap_or_else(|| panic!("{name} missing: {figures}"))
}

/// The checks of a run with one failover (`--failover`):
/// one failover and no PostgreSQL restart, a recovery time, and
/// [`assert_nothing_lost`].
pub fn assert_nothing_lost_in_failover(figures: &serde_json::Value) {
    let number = |name: &str| soak_number(figures, name);
    assert_eq!(number("failovers"), 1, "{figures:#}");
    assert_eq!(number("pgRestarts"), 0, "{figures:#}");
    assert!(number("recoveryMs") > 0, "{figures:#}");
    assert_nothing_lost(figures);
    // The time to recover, for the record (nextest shows it with --no-capture).
    eprintln!("recovered from the failover in {} ms", number("recoveryMs"));
}

/// `npm ci` in `dir` when its `node_modules` is missing or older than the
/// lock (the bench's peers, the network soak's JavaScript workers).
pub async fn npm_ci_if_stale(dir: &Path) -> anyhow::Result<()> {
    let modified = |path: PathBuf| std::fs::metadata(path).and_then(|m| m.modified());
    let stale = match (
        modified(dir.join("node_modules/.package-lock.json")),
        modified(dir.join("package-lock.json")),
    ) {
        (Ok(installed), Ok(lock)) => lock > installed,
        _ => true,
    };
    if stale {
        eprintln!("npm ci in {}", dir.display());
        let status = tokio::process::Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund"])
            .current_dir(dir)
            .stdout(Stdio::null())
            .status()
            .await
            .context("run npm ci (Node and npm are needed)")?;
        if !status.success() {
            bail!("npm ci in {} failed", dir.display());
        }
    }
    Ok(())
}
