//! `relayger-soak`: the chaos soak (see `relayger_tests::soak`).
//!
//! ```text
//! relayger-soak [--questions N | --quick] [--seed S] [--json] …
//! ```
//! Prints the figures as a table (or one JSON object with `--json`) and
//! exits non-zero when a check fails. `relayger-soak handle` is the job
//! handler the workers start through the process ABI.

use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use relayger_tests::soak::net::{self, NetOptions};
use relayger_tests::soak::{External, Figures, Options, RunLocks, handle_job, run};

#[derive(Debug, Parser)]
#[command(
    name = "relayger-soak",
    about = "Chaos soak of the persistent listener"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Questions to ask (default 5000; 300 with --quick).
    #[arg(long)]
    questions: Option<usize>,
    /// The short form run by the test suite.
    #[arg(long)]
    quick: bool,
    /// Run PostgreSQL as a primary with a synchronous streaming standby,
    /// two servers on a multi-host URL (`target_session_attrs=read-write`)
    /// sharing the workers and senders,
    /// and instead of restarting PostgreSQL kill the primary
    /// (`pg_ctl stop -m immediate`) and promote the standby.
    #[arg(long)]
    failover: bool,
    /// Use this (empty) database instead of a PostgreSQL of the soak's own,
    /// with two servers as with --failover (`scripts/ha-demo`).
    #[arg(long, requires = "failover_command", conflicts_with = "failover")]
    database_url: Option<String>,
    /// With --database-url: run this with `sh -c` at 30 % of the replies to
    /// take the primary away (in place of --failover's kill and promote).
    #[arg(long, requires = "database_url")]
    failover_command: Option<String>,
    /// With --database-url: the two servers' listen addresses (repeat).
    #[arg(long, requires = "database_url")]
    listen: Vec<String>,
    /// With --database-url: the second server's workers and askers use this
    /// URL (a load balancer over both servers) instead of that server.
    #[arg(long, requires = "database_url")]
    api_url: Option<String>,
    #[arg(long, default_value_t = 4)]
    senders: usize,
    #[arg(long, default_value_t = 3)]
    workers: usize,
    /// SIGKILL a random worker about this often (±50 %).
    #[arg(long, default_value_t = 3000)]
    kill_every_ms: u64,
    /// SIGINT a random worker (and start a new one) about this often (±50 %).
    #[arg(long, default_value_t = 5000)]
    interrupt_every_ms: u64,
    /// The server's --lease-ms.
    #[arg(long, default_value_t = 3000)]
    lease_ms: u64,
    /// The runtime policy's concurrency.
    #[arg(long, default_value_t = 8)]
    concurrency: u32,
    /// The handler sleeps a random 0..=N ms per job (default 300; 1000 with
    /// --net).
    #[arg(long)]
    max_delay_ms: Option<u64>,
    /// The seed of every random choice (default: from the clock; printed).
    #[arg(long)]
    seed: Option<u64>,
    /// Give up after this many seconds (default: 60 + questions / 10).
    #[arg(long)]
    timeout_s: Option<u64>,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
    /// Keep the working directory (logs, NDJSON, data) after a passing run.
    #[arg(long)]
    keep: bool,
    /// The network-fault soak instead (needs root): PostgreSQL, two servers
    /// and every worker in network namespaces of their own, Rust and
    /// JavaScript workers, silent cuts, a server cut from PostgreSQL,
    /// half-open connections, slow links and skewed clocks.
    #[arg(long, conflicts_with_all = ["failover", "database_url"])]
    net: bool,
    /// --net: JavaScript workers (beside --workers Rust ones).
    #[arg(long, default_value_t = 2)]
    js_workers: usize,
    /// --net: every kind of fault at least this often (default 50; 1 with
    /// --quick).
    #[arg(long)]
    faults_each: Option<u64>,
    /// --net: only these kinds of fault (repeat; the figures then fail the
    /// run for the kinds left out), to look into one kind.
    #[arg(long)]
    only: Vec<String>,
    /// --net: at most this many worker faults at once.
    #[arg(long, default_value_t = 2)]
    parallel_faults: usize,
    /// --net: each sender waits this long after each question (default
    /// 1000; 1000 with --quick).
    #[arg(long)]
    pace_ms: Option<u64>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Answer one job on stdin (the workers' --process handler).
    #[command(hide = true)]
    Handle {
        #[arg(long)]
        seed: u64,
        #[arg(long)]
        max_delay_ms: u64,
        /// Hold a lock on DIR/<jobKey> while handling (the network soak).
        #[arg(long)]
        locks: Option<std::path::PathBuf>,
        /// Note runs that found their job's lock held in FILE.
        #[arg(long)]
        concurrent: Option<std::path::PathBuf>,
    },
}

fn main() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse();
    if let Some(Command::Handle {
        seed,
        max_delay_ms,
        locks,
        concurrent,
    }) = cli.command
    {
        handle_job(seed, max_delay_ms, &RunLocks { locks, concurrent })?;
        return Ok(ExitCode::SUCCESS);
    }
    let questions = cli.questions.unwrap_or(if cli.quick { 300 } else { 5000 });
    let seed = cli.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() ^ u64::from(d.subsec_nanos()))
            .unwrap_or_default()
    });
    let timeout_s = cli
        .timeout_s
        .unwrap_or(60 + u64::try_from(questions / 10).unwrap_or(u64::MAX));
    if cli.net {
        let options = NetOptions {
            questions,
            senders: cli.senders.max(1),
            rust_workers: cli.workers.max(1),
            js_workers: cli.js_workers,
            lease_ms: cli.lease_ms,
            concurrency: cli.concurrency,
            max_delay_ms: cli.max_delay_ms.unwrap_or(1000),
            pace_ms: cli.pace_ms.unwrap_or(1000),
            faults_each: cli.faults_each.unwrap_or(if cli.quick { 1 } else { 50 }),
            parallel_faults: cli.parallel_faults.max(1),
            only: cli.only,
            seed,
            timeout: Duration::from_secs(cli.timeout_s.unwrap_or(600 + questions as u64)),
            keep_dir: cli.keep,
        };
        return finish(cli.json, run_until_interrupted(net::run(&options))?);
    }
    let options = Options {
        questions,
        senders: cli.senders.max(1),
        workers: cli.workers.max(1),
        kill_every_ms: cli.kill_every_ms,
        interrupt_every_ms: cli.interrupt_every_ms,
        lease_ms: cli.lease_ms,
        concurrency: cli.concurrency,
        max_delay_ms: cli.max_delay_ms.unwrap_or(300),
        seed,
        timeout: Duration::from_secs(timeout_s),
        keep_dir: cli.keep,
        failover: cli.failover,
        external: cli.database_url.map(|database_url| External {
            database_url,
            failover_command: cli.failover_command.unwrap_or_default(),
            listen: cli.listen,
            api_url: cli.api_url,
        }),
    };
    finish(cli.json, run_until_interrupted(run(&options))?)
}

/// Runs a soak until it ends or SIGINT/SIGTERM comes (`None`).
fn run_until_interrupted(
    soak: impl Future<Output = anyhow::Result<Figures>>,
) -> anyhow::Result<Option<Figures>> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        tokio::select! {
            figures = soak => figures.map(Some),
            // Dropping the run stops everything it started.
            _ = interrupted() => Ok(None),
        }
    })
}

/// Prints the figures; the exit code says whether every check passed.
fn finish(json: bool, figures: Option<Figures>) -> anyhow::Result<ExitCode> {
    let Some(figures) = figures else {
        eprintln!("soak: interrupted; everything it started was stopped");
        return Ok(ExitCode::from(130));
    };
    if json {
        println!("{}", figures.to_json());
    } else {
        print!("{}", figures.table());
    }
    Ok(if figures.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

async fn interrupted() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminate => {}
    }
}
