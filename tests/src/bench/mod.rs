//! The benchmark behind BENCHMARKS.md: it starts its own durable PostgreSQL,
//! measures pgbench on it as the baseline, then the release
//! `relayger-server` and `relayger worker run` processes, and prints every
//! figure next to its ratio to the baseline.
//!
//! ```text
//! bench [all|baseline|p1|p2|p3|p4|p5|p6|p7|peers] [--quick] [--json] [--keep] [size options]
//! ```
//!
//! `bench peers` runs the baseline, P1, P2 and then the peer job queues
//! (graphile-worker, pg-boss: [`peers`]) on the same cluster, with P1's
//! number of samples and P2's number of jobs and worker processes.

mod cluster;
mod growth;
mod idle;
mod latency;
mod load;
mod peers;
mod procs;
mod report;
mod setup;
mod timings;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};

use crate::temp_dir;
use cluster::{Cluster, ClusterSettings, DbProfile, Pgbench};
use procs::Server;
use setup::Identities;

const USAGE: &str =
    "usage: bench [all|baseline|p1|p2|p3|p4|p5|p6|p7|peers] [--quick] [--json] [--keep]
  [--questions N] [--p2-questions N] [--p2-rooms N] [--p2-workers N] [--idle-secs N]
  [--p4-rooms N] [--p4-claims N] [--p5-secs N] [--p6-backlog N] [--p6-claims N]
  [--p7-history N] [--p7-questions N] [--pgbench-secs N]";

/// What to run and how big.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    pub(crate) figures: Vec<&'static str>,
    pub(crate) json: bool,
    pub(crate) keep: bool,
    pub(crate) quick: bool,
    pub(crate) questions: usize,
    pub(crate) p2_questions: usize,
    pub(crate) p2_rooms: usize,
    pub(crate) p2_workers: usize,
    pub(crate) idle_secs: u64,
    pub(crate) p4_rooms: usize,
    pub(crate) p4_claims: usize,
    pub(crate) p5_secs: u64,
    /// P6: pending jobs in the large case (the small one has 100).
    pub(crate) p6_backlog: usize,
    pub(crate) p6_claims: usize,
    /// P7: messages already in the long room.
    pub(crate) p7_history: usize,
    /// P7: questions per room.
    pub(crate) p7_questions: usize,
    pub(crate) pgbench_secs: u32,
}

/// P6's small backlog.
const P6_SMALL_BACKLOG: usize = 100;

impl Options {
    pub(crate) fn parse(args: &[String]) -> anyhow::Result<Options> {
        let mut options = Options {
            figures: Vec::new(),
            json: false,
            keep: false,
            quick: false,
            questions: 2_000,
            p2_questions: 20_000,
            p2_rooms: 200,
            p2_workers: 4,
            idle_secs: 60,
            p4_rooms: 10_000,
            p4_claims: 200,
            p5_secs: 15,
            p6_backlog: 100_000,
            p6_claims: 200,
            p7_history: 100_000,
            p7_questions: 1_000,
            pgbench_secs: 15,
        };
        // --quick first, so explicit sizes given with it still win.
        if args.iter().any(|a| a == "--quick") {
            options.quick = true;
            options.questions = 200;
            options.p2_questions = 2_000;
            options.p2_rooms = 50;
            options.idle_secs = 10;
            options.p4_rooms = 1_000;
            options.p4_claims = 50;
            options.p5_secs = 5;
            options.p6_backlog = 10_000;
            options.p6_claims = 50;
            options.p7_history = 10_000;
            options.p7_questions = 100;
            options.pgbench_secs = 5;
        }
        let mut command = None;
        let mut rest = args.iter();
        while let Some(arg) = rest.next() {
            let mut number = |name: &str| -> anyhow::Result<u64> {
                rest.next()
                    .and_then(|v| v.parse().ok())
                    .with_context(|| format!("{name} needs a number\n{USAGE}"))
            };
            match arg.as_str() {
                "--quick" => {}
                "--json" => options.json = true,
                "--keep" => options.keep = true,
                "--questions" => options.questions = number(arg)? as usize,
                "--p2-questions" => options.p2_questions = number(arg)? as usize,
                "--p2-rooms" => options.p2_rooms = number(arg)?.max(1) as usize,
                "--p2-workers" => options.p2_workers = number(arg)?.max(1) as usize,
                "--idle-secs" => options.idle_secs = number(arg)?,
                "--p4-rooms" => options.p4_rooms = number(arg)?.max(1) as usize,
                "--p4-claims" => options.p4_claims = number(arg)?.max(1) as usize,
                "--p5-secs" => options.p5_secs = number(arg)?.max(1),
                "--p6-backlog" => options.p6_backlog = number(arg)?.max(1) as usize,
                "--p6-claims" => options.p6_claims = number(arg)?.max(1) as usize,
                "--p7-history" => options.p7_history = number(arg)? as usize,
                "--p7-questions" => options.p7_questions = number(arg)?.max(1) as usize,
                "--pgbench-secs" => options.pgbench_secs = number(arg)?.max(1) as u32,
                "-h" | "--help" => bail!("{USAGE}"),
                other if other.starts_with('-') => bail!("unknown option {other}\n{USAGE}"),
                other if command.is_none() => command = Some(other.to_owned()),
                other => bail!("unexpected argument {other}\n{USAGE}"),
            }
        }
        options.figures = match command.as_deref().unwrap_or("all") {
            "all" => vec!["p1", "p2", "p3", "p4", "p5", "p6", "p7"],
            "baseline" => vec![],
            "p1" => vec!["p1"],
            "p2" => vec!["p2"],
            "p3" => vec!["p3"],
            "p4" => vec!["p4"],
            "p5" => vec!["p5"],
            "p6" => vec!["p6"],
            "p7" => vec!["p7"],
            "peers" => vec!["p1", "p2", "peers"],
            other => bail!("unknown command {other}\n{USAGE}"),
        };
        Ok(options)
    }

    /// The baseline is needed by the figures compared with it.
    fn needs_baseline(&self) -> bool {
        self.figures.is_empty()
            || self
                .figures
                .iter()
                .any(|f| ["p1", "p2", "p5", "peers"].contains(f))
    }
}

/// Latency figures in milliseconds.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub(crate) struct Summary {
    pub(crate) n: usize,
    pub(crate) mean_ms: f64,
    pub(crate) p50_ms: f64,
    pub(crate) p90_ms: f64,
    pub(crate) p99_ms: f64,
    pub(crate) max_ms: f64,
}

/// Nearest-rank percentiles.
pub(crate) fn summarize(samples: &[Duration]) -> Summary {
    let mut ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1e3).collect();
    ms.sort_by(f64::total_cmp);
    let rank = |q: f64| -> f64 {
        if ms.is_empty() {
            return 0.0;
        }
        let index = ((q * ms.len() as f64).ceil() as usize).clamp(1, ms.len()) - 1;
        ms[index]
    };
    Summary {
        n: ms.len(),
        mean_ms: ms.iter().sum::<f64>() / ms.len().max(1) as f64,
        p50_ms: rank(0.50),
        p90_ms: rank(0.90),
        p99_ms: rank(0.99),
        max_ms: ms.last().copied().unwrap_or(0.0),
    }
}

/// Removes the benchmark's directory (cluster data, profiles, logs) unless
/// asked to keep it.
#[derive(Debug)]
struct DirGuard {
    path: PathBuf,
    keep: bool,
}

impl Drop for DirGuard {
    fn drop(&mut self) {
        if self.keep {
            eprintln!("bench: kept {}", self.path.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// Everything a figure needs. Fields drop in order: the server stops before
/// PostgreSQL, and the directory goes last.
#[derive(Debug)]
pub(crate) struct Bench {
    server: Server,
    cluster: Cluster,
    _dir: DirGuard,
    postmaster: u32,
    ids: Identities,
    out: PathBuf,
}

/// Where a measured stretch began: the database's and the server's counters.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ProfileStart {
    xact: cluster::XactCounters,
    sent: procs::Sent,
}

impl Bench {
    /// Starts a measured stretch (see [`Cluster::profile_start`]) and reads
    /// the server's statement counters.
    pub(crate) async fn profile_start(&self) -> anyhow::Result<ProfileStart> {
        let sent = self.server.sent().await?;
        let xact = self.cluster.profile_start()?;
        Ok(ProfileStart { xact, sent })
    }

    /// The database's profile of the stretch, with what the server sent.
    pub(crate) async fn profile_end(&self, start: ProfileStart) -> anyhow::Result<DbProfile> {
        let mut db = self.cluster.profile_end(start.xact)?;
        db.sent = self.server.sent().await?.since(&start.sent);
        Ok(db)
    }
}

/// The baseline: pgbench on the same cluster.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Baseline {
    pub(crate) one: Pgbench,
    pub(crate) sixteen: Pgbench,
}

/// Every result of one run.
#[derive(Debug, Default)]
pub(crate) struct Results {
    pub(crate) settings: Option<ClusterSettings>,
    pub(crate) baseline: Option<Baseline>,
    pub(crate) p1: Option<latency::P1>,
    pub(crate) p2: Option<load::P2>,
    pub(crate) p3: Option<idle::P3>,
    pub(crate) p4: Option<latency::P4>,
    pub(crate) p5: Option<load::P5>,
    pub(crate) p6: Option<growth::P6>,
    pub(crate) p7: Option<growth::P7>,
    pub(crate) peers: Vec<peers::PeerRun>,
    /// `/proc/loadavg` at the start and after each figure: how busy the
    /// machine was (other work shares it).
    pub(crate) loads: Vec<(String, String)>,
}

/// The 1, 5 and 15 minute load averages.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// Runs the benchmark; stops everything it started on return, on error and
/// on Ctrl-C.
pub async fn main(args: Vec<String>) -> anyhow::Result<()> {
    let options = Options::parse(&args)?;
    let run = run(&options);
    let results = tokio::select! {
        results = run => results?,
        _ = tokio::signal::ctrl_c() => bail!("interrupted"),
    };
    if options.json {
        report::print_json(&options, &results);
    } else {
        report::print_table(&options, &results);
    }
    Ok(())
}

async fn run(options: &Options) -> anyhow::Result<Results> {
    let dir = temp_dir("bench")?;
    let guard = DirGuard {
        path: dir.clone(),
        keep: options.keep,
    };
    let out = dir.join("logs");
    std::fs::create_dir_all(&out)?;
    eprintln!("bench: working in {}", dir.display());
    let cluster = Cluster::start(&dir.join("db"))?;
    let mut results = Results {
        settings: Some(cluster.settings()?),
        loads: vec![("at the start".into(), load_average())],
        ..Results::default()
    };
    if options.needs_baseline() {
        eprintln!("bench: pgbench -i");
        cluster.pgbench_init(10)?;
        let secs = options.pgbench_secs;
        eprintln!("bench: pgbench -N -c1 -j1 -T {secs}");
        let one = cluster.pgbench_run(1, 1, secs)?;
        eprintln!("bench: pgbench -N -c16 -j2 -T {secs}");
        let sixteen = cluster.pgbench_run(16, 2, secs)?;
        results.baseline = Some(Baseline { one, sixteen });
        results.loads.push(("after pgbench".into(), load_average()));
    }
    if options.figures.is_empty() {
        return Ok(results);
    }
    let server = Server::start(&cluster.relayger_url(), &out.join("server.log"))?;
    let home = dir.join("profiles");
    let bench = Bench {
        postmaster: cluster.postmaster_pid()?,
        ids: Identities::new(&home, server.base_url()),
        server,
        cluster,
        _dir: guard,
        out,
    };
    for figure in &options.figures {
        eprintln!("bench: {figure}");
        match *figure {
            "p1" => results.p1 = Some(latency::p1(&bench, options.questions).await?),
            "p2" => {
                results.p2 = Some(
                    load::p2(
                        &bench,
                        options.p2_questions,
                        options.p2_rooms,
                        options.p2_workers,
                    )
                    .await?,
                );
            }
            "p3" => {
                results.p3 = Some(idle::p3(&bench, Duration::from_secs(options.idle_secs)).await?);
            }
            "p4" => {
                results.p4 = Some(latency::p4(&bench, options.p4_rooms, options.p4_claims).await?);
            }
            "p5" => results.p5 = Some(load::p5(&bench, 16, options.p5_secs).await?),
            "p6" => {
                results.p6 = Some(
                    growth::p6(
                        &bench,
                        P6_SMALL_BACKLOG,
                        options.p6_backlog,
                        options.p6_claims,
                    )
                    .await?,
                );
            }
            "p7" => {
                results.p7 =
                    Some(growth::p7(&bench, options.p7_history, options.p7_questions).await?);
            }
            "peers" => {
                results.peers = peers::peers(
                    &bench,
                    options.questions,
                    options.p2_questions,
                    options.p2_workers,
                )
                .await?;
            }
            _ => {}
        }
        results
            .loads
            .push((format!("after {figure}"), load_average()));
    }
    Ok(results)
}

#[cfg(test)]
mod tests {
    use super::Options;

    fn parse(args: &[&str]) -> anyhow::Result<Options> {
        Options::parse(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn peers_runs_the_baseline_p1_and_p2_with_the_peers() {
        let options = parse(&["peers"]).expect("peers");
        assert_eq!(options.figures, ["p1", "p2", "peers"]);
        assert!(options.needs_baseline());
        assert_eq!(
            (options.questions, options.p2_questions, options.p2_workers),
            (2_000, 20_000, 4)
        );
        let quick = parse(&["peers", "--quick", "--p2-workers", "2"]).expect("quick peers");
        assert_eq!(
            (quick.questions, quick.p2_questions, quick.p2_workers),
            (200, 2_000, 2)
        );
        let all = parse(&[]).expect("all");
        assert!(
            !all.figures.contains(&"peers"),
            "bench all stays without the peers (they need npm)"
        );
        assert!(parse(&["peer"]).is_err());
        assert!(parse(&["peers", "p1"]).is_err());
    }
}
