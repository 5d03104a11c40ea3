//! The soak's `relayger-server`: on a fixed port, so a restarted server is
//! found where the workers' profiles already point.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Context, anyhow, bail};

use crate::binary;
use crate::{START_TIMEOUT, signal_process, wait_timeout};

/// How long a stopped server may take to exit before it is killed.
const EXIT_TIMEOUT: Duration = Duration::from_secs(20);

#[derive(Debug)]
pub(crate) struct SoakServer {
    child: Option<Child>,
    cwd: PathBuf,
    database_url: String,
    listen: String,
    lease_ms: u64,
    /// The network namespace it runs in (`None`: this process's).
    netns: Option<String>,
}

impl SoakServer {
    pub(crate) fn start(
        cwd: &Path,
        database_url: &str,
        listen: &str,
        lease_ms: u64,
    ) -> anyhow::Result<SoakServer> {
        SoakServer::start_in(None, cwd, database_url, listen, lease_ms)
    }

    /// [`SoakServer::start`] inside network namespace `netns`.
    pub(crate) fn start_in(
        netns: Option<&str>,
        cwd: &Path,
        database_url: &str,
        listen: &str,
        lease_ms: u64,
    ) -> anyhow::Result<SoakServer> {
        let mut server = SoakServer {
            child: None,
            cwd: cwd.to_path_buf(),
            database_url: database_url.to_owned(),
            listen: listen.to_owned(),
            lease_ms,
            netns: netns.map(str::to_owned),
        };
        server.launch()?;
        Ok(server)
    }

    pub(crate) fn base_url(&self) -> String {
        format!("http://{}", self.listen)
    }

    /// Stops the server with `signal` ("TERM" or "KILL") and starts it again
    /// on the same address and database.
    pub(crate) fn restart(&mut self, signal: &str) -> anyhow::Result<()> {
        self.stop(signal)?;
        self.launch()
    }

    fn stop(&mut self, signal: &str) -> anyhow::Result<()> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        let pid = child.id();
        signal_process(pid, signal)?;
        let (tx, rx) = mpsc::channel();
        let waiter = std::thread::spawn(move || {
            let _ = tx.send(child.wait());
        });
        if rx.recv_timeout(EXIT_TIMEOUT).is_err() {
            // A graceful stop that hangs is a finding of its own, but the
            // soak must go on: the stop becomes a kill.
            eprintln!("soak: relayger-server ignored SIG{signal} for {EXIT_TIMEOUT:?}; killing it");
            signal_process(pid, "KILL")?;
            let _ = rx.recv_timeout(EXIT_TIMEOUT);
        }
        let _ = waiter.join();
        Ok(())
    }

    fn launch(&mut self) -> anyhow::Result<()> {
        // A just-killed server's port can take a moment to be free again.
        let mut last_error = None;
        for _ in 0..10 {
            match self.spawn_once() {
                Ok(child) => {
                    self.child = Some(child);
                    return Ok(());
                }
                Err(err) => {
                    last_error = Some(err);
                    std::thread::sleep(Duration::from_millis(300));
                }
            }
        }
        Err(last_error.unwrap_or_else(|| anyhow!("relayger-server did not start")))
    }

    fn spawn_once(&self) -> anyhow::Result<Child> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.cwd.join("server.log"))
            .context("server log")?;
        let lease = self.lease_ms.to_string();
        let program = binary("relayger-server")?;
        let mut command = match &self.netns {
            Some(netns) => {
                let mut command = Command::new("ip");
                command.args(["netns", "exec", netns]).arg(program);
                command
            }
            None => Command::new(program),
        };
        command
            .args(["--database-url", &self.database_url])
            .args(["--listen", &self.listen])
            .args(["--lease-ms", &lease])
            // Off loopback (in a namespace) registration is closed by default.
            .args(["--registration", "open"])
            .current_dir(&self.cwd)
            .env("RELAYGER_LOG", "warn")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log));
        for var in [
            "DATABASE_URL",
            "RELAYGER_DATA_DIR",
            "RELAYGER_LISTEN",
            "RELAYGER_LEASE_MS",
        ] {
            command.env_remove(var);
        }
        let mut child = command.spawn().context("spawn relayger-server")?;
        let stdout = child.stdout.take().context("server stdout")?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line.starts_with("relayger-server listening on ") {
                    let _ = tx.send(());
                }
            }
        });
        // The reader ends (and the channel closes) when the server exits, so
        // a server that cannot bind is noticed at once.
        if rx.recv_timeout(START_TIMEOUT).is_ok() {
            return Ok(child);
        }
        let _ = child.kill();
        let status = child.wait().ok();
        bail!(
            "relayger-server did not report listening on {} ({status:?})",
            self.listen
        )
    }
}

impl Drop for SoakServer {
    fn drop(&mut self) {
        if let Some(child) = self.child.take() {
            let pid = child.id();
            let _ = signal_process(pid, "TERM");
            if wait_timeout(child, EXIT_TIMEOUT).is_err() {
                let _ = signal_process(pid, "KILL");
            }
        }
    }
}
