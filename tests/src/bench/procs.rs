//! The processes under test (release `relayger-server` and `relayger worker
//! run`), stopped by their guards whatever happens, and what `/proc` says
//! about their CPU time and memory.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, anyhow, bail};

use crate::{START_TIMEOUT, STOP_TIMEOUT, binary, signal_process, wait_timeout};

/// Environment variables that would steer the processes away from the
/// benchmark's explicit settings.
const STEERING_ENV: &[&str] = &[
    "DATABASE_URL",
    "RELAYGER_DATA_DIR",
    "RELAYGER_LISTEN",
    "RELAYGER_LEASE_MS",
    "RELAYGER_LOG",
    "RELAYGER_PROFILE",
    "RELAYGER_HOME",
];

/// A child that is interrupted (then killed) when the guard goes away.
#[derive(Debug)]
struct Guarded {
    child: Option<Child>,
    label: String,
}

impl Guarded {
    fn pid(&self) -> u32 {
        self.child.as_ref().map(Child::id).unwrap_or(0)
    }

    fn stop(&mut self, timeout: Duration) {
        if let Some(child) = self.child.take() {
            let pid = child.id();
            let _ = signal_process(pid, "INT");
            if wait_timeout(child, timeout).is_err() {
                eprintln!("bench: {} ({pid}) did not stop; killing it", self.label);
                let _ = signal_process(pid, "KILL");
            }
        }
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        self.stop(STOP_TIMEOUT);
    }
}

/// The release `relayger-server` against the benchmark's database.
#[derive(Debug)]
pub(crate) struct Server {
    process: Guarded,
    base_url: String,
    metrics_url: String,
}

impl Server {
    /// Starts `relayger-server serve --database-url URL --listen
    /// 127.0.0.1:0` without rate limits, its log in `log`, and waits for its
    /// address.
    pub(crate) fn start(database_url: &str, log: &Path) -> anyhow::Result<Server> {
        let mut command = Command::new(binary("relayger-server")?);
        for var in STEERING_ENV {
            command.env_remove(var);
        }
        command
            .args(["serve", "--database-url", database_url])
            .args(["--listen", "127.0.0.1:0", "--registration", "open"])
            .args(["--metrics-listen", "127.0.0.1:0"])
            // The bench measures throughput, not the per-token and
            // per-address rate limits (a full-size P2 asker sends faster
            // than the default token rate allows).
            .args([
                "--token-rate",
                "0",
                "--address-rate",
                "0",
                "--lookup-rate",
                "0",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(File::create(log).context("server log")?);
        let mut child = command.spawn().context("spawn relayger-server")?;
        let stdout = child.stdout.take().context("server stdout")?;
        let process = Guarded {
            child: Some(child),
            label: "relayger-server".into(),
        };
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            // The metrics line comes first, then the API address.
            let mut metrics = None;
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(url) = line.strip_prefix("relayger-server metrics on ") {
                    metrics = Some(url.to_owned());
                }
                if let Some(url) = line.strip_prefix("relayger-server listening on ") {
                    let _ = tx.send((url.to_owned(), metrics.take()));
                }
            }
        });
        let (base_url, metrics_url) = rx
            .recv_timeout(START_TIMEOUT)
            .map_err(|_| anyhow!("relayger-server did not report its address; see {log:?}"))?;
        let metrics_url = metrics_url
            .ok_or_else(|| anyhow!("relayger-server did not report its metrics address"))?;
        Ok(Server {
            process,
            base_url,
            metrics_url,
        })
    }

    /// What the server has sent to PostgreSQL so far, from its `/metrics`.
    pub(crate) async fn sent(&self) -> anyhow::Result<Sent> {
        Ok(Sent::parse(&self.scrape().await?))
    }

    /// Where its time went so far, from its `/metrics`.
    pub(crate) async fn timings(&self) -> anyhow::Result<super::timings::Timings> {
        Ok(super::timings::Timings::parse(&self.scrape().await?))
    }

    async fn scrape(&self) -> anyhow::Result<String> {
        Ok(reqwest::get(&self.metrics_url)
            .await
            .context("scrape the server's metrics")?
            .error_for_status()?
            .text()
            .await?)
    }

    pub(crate) fn base_url(&self) -> &str {
        &self.base_url
    }

    pub(crate) fn pid(&self) -> u32 {
        self.process.pid()
    }
}

/// The server's `relayger_db_*_total` counters: what its connections sent
/// to PostgreSQL.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Sent {
    pub(crate) statements: u64,
    pub(crate) prepares_cached: u64,
    pub(crate) prepares_uncached: u64,
    pub(crate) round_trips: u64,
}

impl Sent {
    /// Reads the counters from Prometheus text (missing ones are 0).
    pub(crate) fn parse(text: &str) -> Sent {
        let value = |name: &str| -> u64 {
            text.lines()
                .find_map(|line| {
                    let (key, value) = line.rsplit_once(' ')?;
                    (key == name).then(|| value.parse::<f64>().ok())?
                })
                .map_or(0, |v| v as u64)
        };
        Sent {
            statements: value("relayger_db_statements_total"),
            prepares_cached: value("relayger_db_prepares_total{statement=\"cached\"}"),
            prepares_uncached: value("relayger_db_prepares_total{statement=\"uncached\"}"),
            round_trips: value("relayger_db_round_trips_total"),
        }
    }

    /// What was sent between `earlier` and this reading.
    pub(crate) fn since(&self, earlier: &Sent) -> Sent {
        Sent {
            statements: self.statements.saturating_sub(earlier.statements),
            prepares_cached: self.prepares_cached.saturating_sub(earlier.prepares_cached),
            prepares_uncached: self
                .prepares_uncached
                .saturating_sub(earlier.prepares_uncached),
            round_trips: self.round_trips.saturating_sub(earlier.round_trips),
        }
    }

    pub(crate) fn prepares(&self) -> u64 {
        self.prepares_cached + self.prepares_uncached
    }
}

/// One `relayger --json worker run …` process. Its NDJSON is drained in the
/// background (a full pipe would stall the worker) and counted.
#[derive(Debug)]
pub(crate) struct Worker {
    process: Guarded,
    started: mpsc::Receiver<serde_json::Value>,
    stderr: PathBuf,
    last_error: Arc<Mutex<Option<String>>>,
}

impl Worker {
    /// Spawns `relayger --profile PROFILE --json worker run ARGS…` with the
    /// profiles under `home`; stderr goes to `stderr`.
    pub(crate) fn spawn(
        home: &Path,
        profile: &str,
        args: &[&str],
        stderr: &Path,
    ) -> anyhow::Result<Worker> {
        let mut command = Command::new(binary("relayger")?);
        for var in STEERING_ENV {
            command.env_remove(var);
        }
        command
            .env("RELAYGER_HOME", home)
            .args(["--profile", profile, "--json", "worker", "run"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(File::create(stderr).context("worker log")?);
        let mut child = command.spawn().context("spawn relayger worker")?;
        let stdout = child.stdout.take().context("worker stdout")?;
        let (tx, rx) = mpsc::channel();
        let last_error = Arc::new(Mutex::new(None));
        let mut events = std::io::BufWriter::new(
            File::create(stderr.with_extension("ndjson")).context("worker events file")?,
        );
        {
            let last_error = Arc::clone(&last_error);
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                    let _ = writeln!(events, "{line}");
                    // Only the rare events are parsed; job events are dropped.
                    if (line.contains("\"started\"") || line.contains("rror"))
                        && let Ok(event) = serde_json::from_str::<serde_json::Value>(&line)
                    {
                        if event["event"] == "started" {
                            let _ = tx.send(event);
                        } else if let Ok(mut slot) = last_error.lock() {
                            *slot = Some(line.clone());
                        }
                    }
                }
                let _ = events.flush();
            });
        }
        Ok(Worker {
            process: Guarded {
                child: Some(child),
                label: format!("worker {profile}"),
            },
            started: rx,
            stderr: stderr.to_path_buf(),
            last_error,
        })
    }

    /// Waits for the `started` event; the runtime id it names.
    pub(crate) fn wait_started(&self, timeout: Duration) -> anyhow::Result<String> {
        let event = self.started.recv_timeout(timeout).map_err(|_| {
            let log = std::fs::read_to_string(&self.stderr).unwrap_or_default();
            anyhow!("the worker did not start within {timeout:?}: {log}")
        })?;
        event["runtimeId"]
            .as_str()
            .map(str::to_owned)
            .context("started event without runtimeId")
    }

    pub(crate) fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// The last error-like event it printed, if any.
    pub(crate) fn last_error(&self) -> Option<String> {
        self.last_error.lock().ok().and_then(|slot| slot.clone())
    }

    /// Stops it with SIGINT (as an operator's Ctrl-C).
    pub(crate) fn stop(mut self) {
        self.process.stop(Duration::from_secs(20));
    }
}

/// Clock ticks per second for `/proc/*/stat` times.
pub(crate) fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8_lossy(&out.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

/// Fields of `/proc/PID/stat` after the command name.
fn stat_fields(pid: u32) -> Option<Vec<u64>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    Some(
        rest.split_whitespace()
            .skip(1) // state
            .map(|field| field.parse().unwrap_or(0))
            .collect(),
    )
}

/// utime + stime of `pid` in ticks (0 once it is gone).
pub(crate) fn cpu_ticks(pid: u32) -> u64 {
    stat_fields(pid)
        .map(|f| f.get(10).copied().unwrap_or(0) + f.get(11).copied().unwrap_or(0))
        .unwrap_or(0)
}

/// The whole cluster's CPU ticks: the postmaster, the children it already
/// reaped (cutime + cstime) and every live child (backends, WAL writer,
/// checkpointer, …).
pub(crate) fn postgres_ticks(postmaster: u32) -> u64 {
    let own = stat_fields(postmaster)
        .map(|f| f.iter().skip(10).take(4).sum::<u64>())
        .unwrap_or(0);
    let children: u64 = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(stat_fields)
        .filter(|f| f.first().copied() == Some(u64::from(postmaster)))
        .map(|f| f.get(10).copied().unwrap_or(0) + f.get(11).copied().unwrap_or(0))
        .sum();
    own + children
}

/// The bench process's own CPU ticks (its HTTP clients and timers).
pub(crate) fn own_ticks() -> u64 {
    cpu_ticks(std::process::id())
}

/// VmRSS of `pid` in KiB.
pub(crate) fn rss_kib(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("read /proc/{pid}/status"))?;
    for line in status.lines() {
        if let Some(value) = line.strip_prefix("VmRSS:") {
            return value
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse()
                .context("VmRSS");
        }
    }
    bail!("no VmRSS for {pid}")
}

/// Samples a process's RSS every `every` in the background and keeps the peak.
#[derive(Debug)]
pub(crate) struct RssSampler {
    peak: Arc<AtomicU64>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RssSampler {
    pub(crate) fn start(pid: u32, every: Duration) -> RssSampler {
        let peak = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let thread = {
            let peak = Arc::clone(&peak);
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if let Ok(kib) = rss_kib(pid) {
                        peak.fetch_max(kib, Ordering::Relaxed);
                    }
                    std::thread::sleep(every);
                }
            })
        };
        RssSampler {
            peak,
            stop,
            thread: Some(thread),
        }
    }

    /// Stops sampling; the peak in KiB.
    pub(crate) fn finish(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        self.peak.load(Ordering::Relaxed)
    }
}

impl Drop for RssSampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// CPU seconds of the server, the workers, PostgreSQL and the bench itself
/// over one measured stretch.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub(crate) struct CpuSplit {
    pub(crate) wall_s: f64,
    pub(crate) server_s: f64,
    pub(crate) workers_s: f64,
    pub(crate) postgres_s: f64,
    pub(crate) bench_s: f64,
}

/// A snapshot to subtract from a later one.
#[derive(Debug, Clone)]
pub(crate) struct CpuMark {
    at: std::time::Instant,
    server: u64,
    workers: u64,
    postgres: u64,
    bench: u64,
}

impl CpuMark {
    pub(crate) fn take(server: u32, workers: &[u32], postmaster: u32) -> CpuMark {
        CpuMark {
            at: std::time::Instant::now(),
            server: cpu_ticks(server),
            workers: workers.iter().map(|pid| cpu_ticks(*pid)).sum(),
            postgres: postgres_ticks(postmaster),
            bench: own_ticks(),
        }
    }

    pub(crate) fn since(&self, earlier: &CpuMark) -> CpuSplit {
        let hz = clock_ticks();
        let secs = |now: u64, then: u64| now.saturating_sub(then) as f64 / hz;
        CpuSplit {
            wall_s: self.at.duration_since(earlier.at).as_secs_f64(),
            server_s: secs(self.server, earlier.server),
            workers_s: secs(self.workers, earlier.workers),
            postgres_s: secs(self.postgres, earlier.postgres),
            bench_s: secs(self.bench, earlier.bench),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Sent;

    #[test]
    fn reads_the_servers_statement_counters() {
        let text = "# HELP relayger_db_statements_total Statements sent\n\
                    # TYPE relayger_db_statements_total counter\n\
                    relayger_db_statements_total 1200\n\
                    relayger_db_prepares_total{statement=\"cached\"} 14\n\
                    relayger_db_prepares_total{statement=\"uncached\"} 30\n\
                    relayger_db_round_trips_total 1244\n\
                    relayger_db_pool_max 16\n";
        let sent = Sent::parse(text);
        assert_eq!(
            sent,
            Sent {
                statements: 1200,
                prepares_cached: 14,
                prepares_uncached: 30,
                round_trips: 1244,
            }
        );
        assert_eq!(sent.prepares(), 44);
        let later = Sent {
            statements: 1300,
            prepares_cached: 14,
            prepares_uncached: 40,
            round_trips: 1354,
        };
        assert_eq!(
            later.since(&sent),
            Sent {
                statements: 100,
                prepares_cached: 0,
                prepares_uncached: 10,
                round_trips: 110,
            }
        );
        assert_eq!(
            Sent::parse(""),
            Sent::default(),
            "no server counters: zeros"
        );
    }
}
