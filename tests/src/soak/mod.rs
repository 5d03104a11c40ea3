//! The chaos soak behind `relayger-soak`: a throwaway PostgreSQL, a real
//! `relayger-server`, several `relayger worker run` processes of one
//! runtime, and senders asking questions, while workers are SIGKILLed or
//! interrupted (SIGINT, then replaced), PostgreSQL and the server restart. Afterwards the database must show one
//! reply per question (or a dead letter), no duplicate or stale replies,
//! checkpoints that never moved backwards and stats that add up.
//!
//! Every process the soak starts is owned by a guard that stops it on
//! drop, so an error or a panic leaves nothing running.

mod db;
mod handler;
pub mod net;
mod postgres;
mod report;
mod rng;
mod rows;
mod send;
mod server;
mod setup;
mod verify;
mod workers;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use tokio::task::block_in_place;
use uuid::Uuid;

use self::db::Db;
pub use self::handler::{RunLocks, handle_job};
use self::postgres::{SoakPostgres, SoakStandby};
pub(crate) use self::postgres::{cluster_owner, give_to_cluster_owner};
pub use self::report::Figures;
use self::rng::SplitMix64;
use self::server::SoakServer;
use self::verify::Outage;
use self::workers::{WorkerCommand, WorkerFleet};

/// The runtime name all worker processes share.
const RUNTIME: &str = "soak";
/// How often the chaos loop looks at the run.
const TICK: Duration = Duration::from_millis(100);
/// How long PostgreSQL stays down during its restart.
const PG_OUTAGE: Duration = Duration::from_secs(1);

/// How a soak runs.
#[derive(Debug, Clone)]
pub struct Options {
    pub questions: usize,
    pub senders: usize,
    pub workers: usize,
    /// A random worker is SIGKILLed (and replaced) about this often.
    pub kill_every_ms: u64,
    /// A random worker is interrupted (SIGINT, and replaced) about this
    /// often; its attempts must be finished or released, never burnt.
    pub interrupt_every_ms: u64,
    /// The server's `--lease-ms`.
    pub lease_ms: u64,
    /// The policy's `concurrency` (across all worker processes).
    pub concurrency: u32,
    /// The handler sleeps 0..=this per job.
    pub max_delay_ms: u64,
    pub seed: u64,
    /// The whole run, setup included.
    pub timeout: Duration,
    /// Keep the working directory (logs, NDJSON, PostgreSQL data) even on
    /// success; it is always kept on failure.
    pub keep_dir: bool,
    /// A primary with a synchronous standby; the PostgreSQL restart becomes
    /// a failover (kill the primary, promote the standby).
    pub failover: bool,
    /// A PostgreSQL of someone else's instead of the soak's own.
    pub external: Option<External>,
}

/// A database the soak does not run (the Patroni demo, `scripts/ha-demo`):
/// two servers use it, as with `failover`, and instead of killing a primary
/// of its own the soak runs `failover_command`.
#[derive(Debug, Clone)]
pub struct External {
    /// An empty database; the servers migrate it.
    pub database_url: String,
    /// Run with `sh -c` at 30 % of the replies: takes the primary away and
    /// returns (it may wait for the new one); the recovery is timed from
    /// its start to the first reply finished afterwards.
    pub failover_command: String,
    /// The two servers' listen addresses (free ports when empty).
    pub listen: Vec<String>,
    /// Where the second server's workers and askers go instead of to it: a
    /// load balancer over both servers.
    pub api_url: Option<String>,
}

fn log(message: impl std::fmt::Display) {
    eprintln!("soak: {message}");
}

pub(crate) fn wall_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or_default()
}

/// Removes the working directory when the run passed.
#[derive(Debug)]
struct WorkDir {
    path: PathBuf,
    remove: bool,
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if self.remove {
            let _ = std::fs::remove_dir_all(&self.path);
        } else {
            log(format!("logs and data kept in {}", self.path.display()));
        }
    }
}

/// The chaos that happened.
#[derive(Debug, Default)]
struct Chaos {
    kills: u64,
    interrupts: u64,
    pg_restarts: u64,
    failovers: u64,
    recovery_ms: Option<u64>,
    server_restarts: u64,
    server_signal: String,
    outages: Vec<Outage>,
    timed_out: bool,
}

/// Runs one soak and returns its figures (failed checks included); an
/// `Err` means the soak itself could not run.
pub async fn run(options: &Options) -> anyhow::Result<Figures> {
    let started = Instant::now();
    let mut workdir = WorkDir {
        path: crate::temp_dir("soak")?,
        remove: false,
    };
    let dir = workdir.path.clone();
    log(format!(
        "seed {}, working in {}",
        options.seed,
        dir.display()
    ));

    let (mut pg, mut standby, url) = match &options.external {
        Some(external) => (None, None, external.database_url.clone()),
        None => {
            let (pg, standby, url) = start_postgres(&dir, options.failover).await?;
            (Some(pg), standby, url)
        }
    };
    let listen_at = |n: usize| -> anyhow::Result<String> {
        match options.external.as_ref().and_then(|e| e.listen.get(n)) {
            Some(listen) => Ok(listen.clone()),
            None => Ok(format!("127.0.0.1:{}", free_port()?)),
        }
    };
    let two_servers = options.failover || options.external.is_some();
    let listen = listen_at(0)?;
    let mut server = block_in_place(|| SoakServer::start(&dir, &url, &listen, options.lease_ms))?;
    let home = dir.join("home");
    let cast = block_in_place(|| setup::register_cast(&home, &server.base_url(), options.senders))?;
    let (policy, handler) = setup::write_worker_files(
        &dir,
        options.seed,
        options.max_delay_ms,
        options.concurrency,
        &[],
    )?;
    // With --failover a second server instance serves every other worker
    // and sender (their profiles copied into a home of their own).
    let mut second_server = None;
    let mut homes = vec![home.clone()];
    if two_servers {
        let listen = listen_at(1)?;
        let cwd = dir.join("server-b");
        std::fs::create_dir_all(&cwd).context("second server directory")?;
        let other = block_in_place(|| SoakServer::start(&cwd, &url, &listen, options.lease_ms))?;
        let other_home = dir.join("home-b");
        let via = match options.external.as_ref().and_then(|e| e.api_url.clone()) {
            Some(api_url) => api_url,
            None => other.base_url(),
        };
        setup::copy_profiles(&home, &other_home, &via)?;
        log(format!(
            "a second server at {}; its workers and askers use {via}",
            other.base_url()
        ));
        homes.push(other_home);
        second_server = Some(other);
    }
    let mut fleet = WorkerFleet::start(
        worker_command(&homes, &dir, &policy, &handler),
        options.workers,
    )?;
    let workers = options.workers;
    block_in_place(|| {
        fleet.wait_until("started", Duration::from_secs(60), |r| r.started >= workers)
    })?;
    let agent_id: Uuid = cast.agent.id.parse().context("agent id")?;
    let mut db = Db::new(&url);
    let runtime_id = db::runtime_id(&mut db, agent_id, RUNTIME).await?;
    log(format!(
        "runtime {runtime_id}; {} workers started",
        options.workers
    ));

    let (stop_sampler, stop_rx) = tokio::sync::watch::channel(false);
    let sampler = tokio::spawn(db::watch_checkpoints(url.clone(), stop_rx));
    let questions = send::questions(options.questions, options.senders, options.seed);
    let mut sending = send::start(&homes, &cast, &questions, Duration::ZERO)?;

    let chaos = make_chaos(
        options,
        started,
        &mut fleet,
        pg.as_mut(),
        standby.as_mut(),
        options
            .external
            .as_ref()
            .map(|e| e.failover_command.as_str()),
        &mut server,
        &mut sending,
        &mut db,
        runtime_id,
    )
    .await?;
    let elapsed = started.elapsed();

    let _ = stop_sampler.send(true);
    let checkpoints = sampler.await.context("checkpoint sampler")?;
    let exits = block_in_place(|| fleet.stop_all(Duration::from_secs(30)));
    let stats = fetch_stats(&home, runtime_id).await;
    let record = std::mem::take(&mut *fleet.record());
    let question_ids: Vec<Uuid> = questions.iter().map(|q| q.id).collect();
    let rows = rows::load(db.conn().await?, runtime_id, &question_ids).await?;
    let cx = verify::Context {
        runtime_id,
        agent_id,
        record: &record,
        killed: fleet.killed(),
        interrupted: fleet.interrupted(),
        outages: &chaos.outages,
        lease_ms: options.lease_ms,
        stats: stats.as_ref(),
    };
    let mut verdict = verify::judge(&rows, &cx, options.questions);

    let count = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
    let mut figures = Figures {
        seed: options.seed,
        questions: count(options.questions),
        senders: count(options.senders),
        workers: count(options.workers),
        worker_processes: count(fleet.generations()),
        kills: chaos.kills,
        interrupts: chaos.interrupts,
        pg_restarts: chaos.pg_restarts,
        failovers: chaos.failovers,
        recovery_ms: chaos.recovery_ms,
        server_restarts: chaos.server_restarts,
        server_stop_signal: chaos.server_signal.clone(),
        timed_out: chaos.timed_out,
        ..checked_figures(&mut verdict, stats.as_ref(), &record, &checkpoints, elapsed)
    };
    figures.judge(&verdict.stats_mismatches);
    for (room, before, after) in checkpoints.regressions.iter().take(5) {
        figures.examples.push(format!(
            "checkpoint of room {room} moved from {before} back to {after}"
        ));
    }
    if checkpoints.vanished > 0 {
        figures.failures.push(format!(
            "checkpoints vanished in {} samples",
            checkpoints.vanished
        ));
    }
    // A worker stops only when told to, and then exits 0.
    let stopped_by_itself = record
        .stops
        .iter()
        .filter(|(_, reason, _)| reason != "interrupted")
        .map(|(generation, reason, code)| {
            format!("worker {generation} stopped by itself: {reason} {code:?}")
        });
    let interrupted = fleet
        .interrupted()
        .iter()
        .map(|(generation, _, code)| (*generation, *code));
    let exited_badly = exits
        .iter()
        .copied()
        .chain(interrupted)
        .filter(|(_, code)| *code != Some(0))
        .map(|(generation, code)| format!("worker {generation} exited with {code:?} after SIGINT"));
    figures
        .failures
        .extend(stopped_by_itself.chain(exited_badly));
    if record.unparsed > 0 {
        figures.failures.push(format!(
            "{} worker output lines were not JSON",
            record.unparsed
        ));
    }
    workdir.remove = figures.passed() && !options.keep_dir;
    // Stop in dependency order: workers, server, then PostgreSQL.
    drop(fleet);
    drop(server);
    drop(second_server);
    drop(standby);
    drop(pg);
    Ok(figures)
}

/// Pace the chaos until every question is handled or dead-lettered (or the
/// run times out): SIGKILL a random worker every `kill_every_ms` (±50 %,
/// at least once), SIGINT one every `interrupt_every_ms` (the same, the
/// first at 20 % of the replies), restart PostgreSQL at 30 % of the replies and the server
/// at 60 %.
#[allow(clippy::too_many_arguments)]
async fn make_chaos(
    options: &Options,
    started: Instant,
    fleet: &mut WorkerFleet,
    mut pg: Option<&mut SoakPostgres>,
    mut standby: Option<&mut SoakStandby>,
    failover_command: Option<&str>,
    server: &mut SoakServer,
    sending: &mut send::Sending,
    db: &mut Db,
    runtime_id: Uuid,
) -> anyhow::Result<Chaos> {
    let mut chaos = Chaos::default();
    let mut rng = SplitMix64::new(options.seed);
    let kill_every = options.kill_every_ms.max(100);
    let mut next_kill =
        Instant::now() + Duration::from_millis(kill_every / 2 + rng.below(kill_every));
    let interrupt_every = options.interrupt_every_ms.max(100);
    let mut next_interrupt =
        Instant::now() + Duration::from_millis(interrupt_every / 2 + rng.below(interrupt_every));
    let total = options.questions;
    let mut sent = false;
    // The failover's start and the replies recorded by then.
    let mut failed_over: Option<(i64, usize)> = None;
    loop {
        if started.elapsed() > options.timeout {
            chaos.timed_out = true;
            log("timed out waiting for the questions to be handled");
            return Ok(chaos);
        }
        let progress = fleet.record().replies.len();
        let first_kill_due = chaos.kills == 0 && progress * 10 >= total;
        if (Instant::now() >= next_kill || first_kill_due) && progress < total {
            let killed = block_in_place(|| fleet.kill_random(&mut rng))?;
            chaos.kills += 1;
            log(format!(
                "SIGKILLed worker {killed} at {progress}/{total} replies"
            ));
            next_kill =
                Instant::now() + Duration::from_millis(kill_every / 2 + rng.below(kill_every));
        }
        let first_interrupt_due = chaos.interrupts == 0 && progress * 10 >= total * 2;
        if (Instant::now() >= next_interrupt || first_interrupt_due) && progress < total {
            let stopped =
                block_in_place(|| fleet.interrupt_random(&mut rng, Duration::from_secs(30)))?;
            chaos.interrupts += 1;
            log(format!(
                "interrupted worker {stopped} at {progress}/{total} replies"
            ));
            next_interrupt = Instant::now()
                + Duration::from_millis(interrupt_every / 2 + rng.below(interrupt_every));
        }
        if let Some((start_ms, replies_then)) = failed_over
            && progress > replies_then
        {
            let outage = Outage {
                what: "PostgreSQL primary",
                start_ms,
                end_ms: wall_ms(),
                generations: None,
            };
            let recovery = u64::try_from(outage.end_ms - start_ms).unwrap_or(0);
            log(format!("recovered from the failover in {recovery} ms"));
            chaos.recovery_ms = Some(recovery);
            chaos.outages.push(outage);
            failed_over = None;
        }
        let pg_chaos_done = chaos.pg_restarts + chaos.failovers > 0;
        let fail_over = standby.is_some() || failover_command.is_some();
        if !pg_chaos_done && fail_over && progress * 10 >= total * 3 {
            let start_ms = wall_ms();
            block_in_place(|| -> anyhow::Result<()> {
                if let Some(command) = failover_command {
                    return run_failover_command(command);
                }
                if let (Some(pg), Some(standby)) = (pg.as_deref_mut(), standby.as_deref_mut()) {
                    pg.kill_immediate()?;
                    standby.promote()?;
                }
                Ok(())
            })?;
            chaos.failovers += 1;
            // Replies already in flight may still be recorded; the first
            // past them was finished on the new primary.
            let in_flight = usize::try_from(options.concurrency).unwrap_or(usize::MAX);
            failed_over = Some((start_ms, progress.saturating_add(in_flight)));
            let what = if failover_command.is_some() {
                "ran the failover command"
            } else {
                "killed the primary and promoted the standby"
            };
            log(format!(
                "{what} in {} ms at {progress}/{total} replies",
                wall_ms() - start_ms
            ));
        }
        if !pg_chaos_done
            && !fail_over
            && progress * 10 >= total * 3
            && let Some(pg) = pg.as_deref_mut()
        {
            let start_ms = wall_ms();
            block_in_place(|| -> anyhow::Result<()> {
                pg.stop()?;
                // The outage itself: the server and the workers ride it out.
                std::thread::sleep(PG_OUTAGE);
                pg.start_again()
            })?;
            chaos.pg_restarts += 1;
            let outage = Outage {
                what: "PostgreSQL",
                start_ms,
                end_ms: wall_ms(),
                generations: None,
            };
            log(format!("restarted {outage} at {progress}/{total} replies"));
            chaos.outages.push(outage);
        }
        if chaos.server_restarts == 0 && progress * 10 >= total * 6 {
            let signal = if rng.below(2) == 0 { "TERM" } else { "KILL" };
            let start_ms = wall_ms();
            block_in_place(|| server.restart(signal))?;
            chaos.server_restarts += 1;
            chaos.server_signal = signal.to_owned();
            let outage = Outage {
                what: "relayger-server",
                start_ms,
                end_ms: wall_ms(),
                generations: None,
            };
            log(format!(
                "restarted {outage} (SIG{signal}) at {progress}/{total} replies"
            ));
            chaos.outages.push(outage);
        }
        if !sent && sending.is_finished() {
            let tally = sending.join().await?;
            log(format!(
                "all {} questions sent ({} send retries)",
                tally.sent, tally.retries
            ));
            sent = true;
        }
        let chaos_done = chaos.pg_restarts + chaos.failovers == 1
            && failed_over.is_none()
            && chaos.server_restarts == 1;
        if sent
            && chaos_done
            && let Ok(tally) = db::job_tally(db, runtime_id).await
        {
            let all = i64::try_from(total).unwrap_or(i64::MAX);
            if tally.jobs >= all && tally.done == tally.jobs {
                return Ok(chaos);
            }
        }
        tokio::time::sleep(TICK).await;
    }
}

/// The soak's own PostgreSQL: one cluster, or with `failover` a primary and
/// its synchronous standby on a multi-host URL.
async fn start_postgres(
    dir: &Path,
    failover: bool,
) -> anyhow::Result<(SoakPostgres, Option<SoakStandby>, String)> {
    let mut pg = block_in_place(|| SoakPostgres::start(&dir.join("pg")))?;
    if !failover {
        let url = pg.url().to_owned();
        return Ok((pg, None, url));
    }
    let standby = block_in_place(|| -> anyhow::Result<SoakStandby> {
        pg.restart_as_primary()?;
        SoakStandby::start(&pg, &dir.join("standby"))
    })?;
    db::wait_for_synchronous_standby(&mut Db::new(pg.url()), Duration::from_secs(60)).await?;
    let url = multi_host_url(pg.url(), pg.port(), standby.port())?;
    log(format!(
        "primary on port {}, synchronous standby on port {}",
        pg.port(),
        standby.port()
    ));
    Ok((pg, Some(standby), url))
}

/// `sh -c command`, which must succeed.
fn run_failover_command(command: &str) -> anyhow::Result<()> {
    let status = std::process::Command::new("sh")
        .args(["-c", command])
        .stdin(std::process::Stdio::null())
        .status()
        .context("run the failover command")?;
    anyhow::ensure!(status.success(), "the failover command failed: {status}");
    Ok(())
}

fn worker_command(homes: &[PathBuf], dir: &Path, policy: &Path, handler: &Path) -> WorkerCommand {
    let args = [
        "--profile",
        setup::AGENT,
        "--json",
        "worker",
        "run",
        RUNTIME,
        "--from",
        "now",
    ];
    let mut args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    args.extend(["--policy".into(), policy.display().to_string()]);
    args.extend(["--process".into(), handler.display().to_string()]);
    WorkerCommand {
        homes: homes.to_vec(),
        cwd: dir.to_path_buf(),
        args,
        slots: Vec::new(),
    }
}

/// The runtime's stats through the API (the server may still be settling
/// after its restart, so transient errors are retried).
/// The figures every soak takes from its checker's verdict (whose examples
/// it moves), the runtime's stats, the workers' record and the checkpoint
/// samples; each soak adds its own (its faults, its options).
fn checked_figures(
    verdict: &mut verify::Verdict,
    stats: Option<&relayger_core::wire::RuntimeStats>,
    record: &workers::WorkerRecord,
    checkpoints: &db::CheckpointWatch,
    elapsed: Duration,
) -> Figures {
    let count = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
    Figures {
        handled: verdict.handled,
        dead_lettered: verdict.dead_lettered,
        lost: verdict.lost,
        duplicate_replies: verdict.duplicate_replies,
        stale_finishes: verdict.stale_finishes,
        wrong_replies: verdict.wrong_replies,
        claims: stats.map_or(0, |s| s.claims),
        attempts: verdict.attempts,
        unfinished: stats.map_or(0, |s| s.unfinished_attempts),
        unfinished_killed: verdict.unfinished_killed,
        unfinished_outage: verdict.unfinished_outage,
        unfinished_released: verdict.released,
        burnt_by_interrupt: verdict.burnt_by_interrupt,
        unfinished_unexplained: verdict.unexplained_unfinished,
        lease_lost_reports: record.failed.get("lease_lost").copied().unwrap_or(0),
        checkpoint_samples: checkpoints.samples,
        checkpoint_regressions: count(checkpoints.regressions.len()),
        elapsed_ms: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
        examples: std::mem::take(&mut verdict.examples),
        ..Figures::default()
    }
}

async fn fetch_stats(home: &Path, runtime_id: Uuid) -> Option<relayger_core::wire::RuntimeStats> {
    let client = setup::client(home, setup::AGENT).ok()?;
    for _ in 0..20 {
        match client.runtimes().stats(runtime_id).await {
            Ok(stats) => return Some(stats),
            Err(err) if err.is_transient() => tokio::time::sleep(Duration::from_millis(250)).await,
            Err(err) => {
                log(format!("stats: {err}"));
                return None;
            }
        }
    }
    None
}

/// `postgres://user@127.0.0.1:P/db` → the same URL naming both hosts, the
/// writable one chosen (`target_session_attrs=read-write`).
fn multi_host_url(url: &str, primary: u16, standby: u16) -> anyhow::Result<String> {
    let host = format!("127.0.0.1:{primary}");
    anyhow::ensure!(url.contains(&host), "the primary's URL names no {host}");
    let both = url.replacen(&host, &format!("{host},127.0.0.1:{standby}"), 1);
    let separator = if both.contains('?') { '&' } else { '?' };
    Ok(format!("{both}{separator}target_session_attrs=read-write"))
}

fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").context("bind a free port")?;
    Ok(listener.local_addr()?.port())
}
