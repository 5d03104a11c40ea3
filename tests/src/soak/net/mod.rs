//! The network-fault soak behind `relayger-soak --net`: PostgreSQL, two
//! `relayger-server`s and every worker process each in a network namespace
//! of its own (see [`netns`]), Rust workers (`relayger worker run`) and
//! JavaScript workers (the SDK's `runWorker`, `tests/soak/js-worker.mjs`)
//! side by side, each reaching its server through a fault proxy of its
//! own. While questions flow, faults of every [`faults::Kind`] come at
//! random moments: silent cuts of a worker's link (longer and shorter than
//! the lease), a server cut from PostgreSQL, a half-open connection, a slow
//! link, a worker whose wall clock is minutes off. The chaos soak's checks
//! ([`super::verify`]) then run on the database, and the recoveries are
//! measured ([`figures::NetFigures`]).

mod faults;
mod figures;
mod netns;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::sync::watch;
use tokio::task::{JoinHandle, block_in_place};
use uuid::Uuid;

use self::faults::{Fault, Kind};
use self::figures::{HALF_OPEN_BOUND_MS, SERVER_RECOVERY_BOUND_MS, TAKEOVER_SLACK_MS};
pub use self::figures::{NetFigures, Spread};
use self::netns::{Bridge, Net};
use super::db::{self, Db};
use super::postgres::SoakPostgres;
use super::rng::SplitMix64;
use super::server::SoakServer;
use super::verify::{self, Outage};
use super::workers::{SlotLaunch, WorkerCommand, WorkerFleet};
use super::{
    Figures, RUNTIME, TICK, WorkDir, checked_figures, fetch_stats, log, rows, send, setup, wall_ms,
};
use crate::fault_proxy::{Direction, FaultProxy};
use crate::{binary, npm_ci_if_stale};

/// The port each server listens on inside its namespace.
const SERVER_PORT: u16 = 8080;
/// The servers' `idle_in_transaction_session_timeout` and
/// `statement_timeout` (relayger-store's pool settings), and how late a
/// sample may see them passed (it samples once a second).
const IDLE_IN_TRANSACTION_LIMIT_MS: i64 = 15_000;
const STATEMENT_LIMIT_MS: i64 = 60_000;
const SAMPLE_SLACK_MS: i64 = 3000;
/// How long the skewed slot's worker may take to start (its server may be
/// cut from PostgreSQL then: it retries with a backoff of up to 30 s) and
/// to stop.
const RESTART_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a healed server may take to answer `/healthz` with 200.
const SERVER_RECOVERY_LIMIT: Duration = Duration::from_secs(60);

/// How a network soak runs.
#[derive(Debug, Clone)]
pub struct NetOptions {
    pub questions: usize,
    pub senders: usize,
    pub rust_workers: usize,
    pub js_workers: usize,
    pub lease_ms: u64,
    pub concurrency: u32,
    pub max_delay_ms: u64,
    /// Each sender waits this long after each question.
    pub pace_ms: u64,
    /// Every kind of fault at least this often.
    pub faults_each: u64,
    /// At most this many worker faults at once (and one server cut).
    pub parallel_faults: usize,
    /// Only these kinds (by name; empty: all), to look into one kind.
    pub only: Vec<String>,
    pub seed: u64,
    pub timeout: Duration,
    pub keep_dir: bool,
}

/// One worker slot: its namespace, its proxy to its server, its profiles.
#[derive(Debug)]
struct Slot {
    js: bool,
    server: usize,
    proxy: FaultProxy,
    launch: SlotLaunch,
}

/// Runs one network soak and returns its figures (failed checks
/// included); an `Err` means the soak itself could not run.
pub async fn run(options: &NetOptions) -> anyhow::Result<Figures> {
    let started = Instant::now();
    let mut workdir = WorkDir {
        path: crate::temp_dir("net-soak")?,
        remove: false,
    };
    let dir = workdir.path.clone();
    log(format!(
        "network soak, seed {}, working in {}",
        options.seed,
        dir.display()
    ));
    let faketime = find_libfaketime()?;
    let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk/js");
    if options.js_workers > 0 {
        npm_ci_if_stale(&sdk).await?;
    }

    // Dropped last: every process in a namespace is gone by then.
    let mut net = block_in_place(Net::create)?;
    block_in_place(|| -> anyhow::Result<()> {
        net.add_namespace("pg")?;
        net.join("pg", Bridge::Db, 2, "pg")?;
        for server in 0..2_u8 {
            let part = format!("server{server}");
            net.add_namespace(&part)?;
            net.join(&part, Bridge::App, 10 + server, &format!("s{server}app"))?;
            net.join(&part, Bridge::Db, 10 + server, &format!("s{server}db"))?;
        }
        Ok(())
    })?;
    let mut pg = block_in_place(|| SoakPostgres::start(&dir.join("pg")))?;
    let pg_address = net.address(Bridge::Db, 2);
    let allow = net.address(Bridge::App, 0).replace(".1.0", ".0.0/16");
    block_in_place(|| pg.move_into(&net.namespace("pg"), &pg_address, &allow))?;
    let url = pg.url().to_owned();
    log(format!("PostgreSQL in its namespace at {pg_address}"));

    let mut servers = Vec::new();
    let mut server_proxies = Vec::new();
    for server in 0..2_u8 {
        let address = format!("{}:{SERVER_PORT}", net.address(Bridge::App, 10 + server));
        let cwd = dir.join(format!("server{server}"));
        std::fs::create_dir_all(&cwd).context("server directory")?;
        let ns = net.namespace(&format!("server{server}"));
        let started = block_in_place(|| {
            SoakServer::start_in(Some(&ns), &cwd, &url, &address, options.lease_ms)
        })?;
        servers.push(started);
        // This process asks through a plain proxy on loopback (a token may
        // travel over plain HTTP to this machine only).
        let target: SocketAddr = address.parse().context("server address")?;
        server_proxies.push(FaultProxy::start(target).await?);
    }
    let home = dir.join("home");
    let cast =
        block_in_place(|| setup::register_cast(&home, &server_proxies[0].url(), options.senders))?;
    let home_b = dir.join("home-b");
    setup::copy_profiles(&home, &home_b, &server_proxies[1].url())?;
    let locks = dir.join("locks");
    std::fs::create_dir_all(&locks).context("locks directory")?;
    let concurrent = dir.join("concurrent.ndjson");
    let extra = [
        "--locks".to_owned(),
        locks.display().to_string(),
        "--concurrent".to_owned(),
        concurrent.display().to_string(),
    ];
    let (policy, handler) = setup::write_worker_files(
        &dir,
        options.seed,
        options.max_delay_ms,
        options.concurrency,
        &extra,
    )?;

    let slot_count = options.rust_workers + options.js_workers;
    anyhow::ensure!(
        options.rust_workers >= 1 && slot_count >= 2,
        "the network soak needs a Rust worker (its clock is skewed) and two workers"
    );
    let mut slots: Vec<Slot> = Vec::new();
    let mut js_left = options.js_workers;
    let mut rust_left = options.rust_workers - 1;
    for index in 0..slot_count {
        // Slot 0 is Rust (the skewed one); then JavaScript and Rust take turns.
        let js = index > 0 && ((index % 2 == 1 && js_left > 0) || rust_left == 0);
        if js {
            js_left -= 1;
        } else if index > 0 {
            rust_left -= 1;
        }
        let server = index % 2;
        let part = format!("w{index}");
        let ns = net.namespace(&part);
        let host = u8::try_from(100 + index).context("too many workers")?;
        block_in_place(|| -> anyhow::Result<()> {
            net.add_namespace(&part)?;
            net.join(&part, Bridge::App, host, &part)?;
            Ok(())
        })?;
        let target: SocketAddr = format!(
            "{}:{SERVER_PORT}",
            net.address(Bridge::App, 10 + u8::try_from(server).unwrap_or(0))
        )
        .parse()
        .context("server address")?;
        let bind: SocketAddr = format!("{}:0", net.address(Bridge::App, 1))
            .parse()
            .context("proxy address")?;
        let proxy = FaultProxy::start_on(bind, target).await?;
        let slot_home = dir.join(format!("home-w{index}"));
        setup::copy_profiles(&home, &slot_home, &proxy.url())?;
        let mut argv = vec!["ip".to_owned(), "netns".into(), "exec".into(), ns];
        if js {
            argv.push("node".into());
            argv.push(
                sdk.join("../../tests/soak/js-worker.mjs")
                    .display()
                    .to_string(),
            );
            argv.push(policy.display().to_string());
            argv.push(handler.display().to_string());
        } else {
            argv.push(binary("relayger")?.display().to_string());
            argv.extend(super::worker_command(&[], &dir, &policy, &handler).args);
        }
        let launch = SlotLaunch {
            argv,
            home: slot_home,
            env: vec![("RELAYGER_ALLOW_INSECURE_HTTP".into(), "1".into())],
        };
        slots.push(Slot {
            js,
            server,
            proxy,
            launch,
        });
    }
    let command = WorkerCommand {
        homes: vec![home.clone()],
        cwd: dir.clone(),
        args: Vec::new(),
        slots: slots.iter().map(|s| s.launch.clone()).collect(),
    };
    let mut fleet = WorkerFleet::start(command, slot_count)?;
    block_in_place(|| {
        fleet.wait_until("started", Duration::from_secs(90), |r| {
            r.started >= slot_count
        })
    })?;
    let agent_id: Uuid = cast.agent.id.parse().context("agent id")?;
    let mut db = Db::new(&url);
    let runtime_id = db::runtime_id(&mut db, agent_id, RUNTIME).await?;
    log(format!(
        "runtime {runtime_id}; {} Rust and {} JavaScript workers started",
        slots.iter().filter(|s| !s.js).count(),
        slots.iter().filter(|s| s.js).count()
    ));

    let (stop_sampler, stop_rx) = watch::channel(false);
    let sampler = tokio::spawn(db::watch_checkpoints(url.clone(), stop_rx.clone()));
    let server_addresses: Vec<String> = (0..2).map(|n| net.address(Bridge::Db, 10 + n)).collect();
    let lock_watch = tokio::spawn(watch_sessions(
        url.clone(),
        server_addresses.clone(),
        stop_rx,
    ));
    let questions = send::questions(options.questions, options.senders, options.seed);
    let mut sending = send::start(
        &[home.clone(), home_b.clone()],
        &cast,
        &questions,
        Duration::from_millis(options.pace_ms),
    )?;

    let skewed = SlotLaunch {
        env: {
            let mut env = slots[0].launch.env.clone();
            env.push(("LD_PRELOAD".into(), faketime.display().to_string()));
            env.push(("FAKETIME_DONT_FAKE_MONOTONIC".into(), "1".into()));
            env
        },
        ..slots[0].launch.clone()
    };
    let mut chaos = Chaos {
        options,
        net: &net,
        slots: &slots,
        fleet: &mut fleet,
        health_urls: server_proxies.iter().map(FaultProxy::url).collect(),
        database_url: url.clone(),
        server_addresses: server_addresses.clone(),
        skewed,
        rng: SplitMix64::new(options.seed),
        faults: Vec::new(),
        active: Vec::new(),
        probes: Vec::new(),
        started,
        timed_out: false,
    };
    chaos
        .run(started, &mut sending, &mut db, runtime_id)
        .await?;
    chaos.collect_probes().await?;
    let Chaos {
        faults, timed_out, ..
    } = chaos;
    let elapsed = started.elapsed();

    let _ = stop_sampler.send(true);
    let checkpoints = sampler.await.context("checkpoint sampler")?;
    let sessions = lock_watch.await.context("session sampler")?;
    let exits = block_in_place(|| fleet.stop_all(Duration::from_secs(30)));
    let stats = fetch_stats(&home, runtime_id).await;
    let record = std::mem::take(&mut *fleet.record());
    let question_ids: Vec<Uuid> = questions.iter().map(|q| q.id).collect();
    let rows = rows::load(db.conn().await?, runtime_id, &question_ids).await?;
    // A server cut explains attempts of every worker, not only its own: the
    // transaction it left open holds its locks until PostgreSQL ends it
    // (idle_in_transaction_session_timeout, 15 s), and an attempt on the
    // other server waiting on one of them can outlive a shorter lease.
    let outages: Vec<Outage> = faults
        .iter()
        .filter(|f| f.kind != Kind::ClockSkew)
        .map(|f| Outage {
            what: f.kind.name(),
            start_ms: f.start_ms,
            end_ms: f.heal_ms.unwrap_or_else(wall_ms)
                + if f.kind == Kind::DbCut {
                    IDLE_IN_TRANSACTION_LIMIT_MS
                } else {
                    0
                },
            generations: (f.kind != Kind::DbCut).then(|| f.generations.clone()),
        })
        .collect();
    let cx = verify::Context {
        runtime_id,
        agent_id,
        record: &record,
        killed: fleet.killed(),
        interrupted: fleet.interrupted(),
        outages: &outages,
        lease_ms: options.lease_ms,
        stats: stats.as_ref(),
    };
    let mut verdict = verify::judge(&rows, &cx, options.questions);
    let concurrent_runs = std::fs::read_to_string(&concurrent)
        .map(|text| text.lines().count())
        .unwrap_or(0);
    let slot_of = |generation: usize| fleet.slot_of(generation).unwrap_or(0);
    let mut net_figures = measure(
        options,
        &faults,
        &rows,
        &cx,
        &|generation| slots[slot_of(generation)].js,
        &|generation| slots[slot_of(generation)].server,
    );
    net_figures.concurrent_attempts = u64::try_from(concurrent_runs).unwrap_or(u64::MAX);
    let net_examples = std::mem::take(&mut net_figures.examples);
    net_figures.locks_past_limit = sessions.past_limit;
    net_figures.longest_idle_in_transaction_ms = sessions.longest_idle_ms;
    net_figures.rust_workers = u64::try_from(slots.iter().filter(|s| !s.js).count()).unwrap_or(0);
    net_figures.js_workers = u64::try_from(slots.iter().filter(|s| s.js).count()).unwrap_or(0);

    let count = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
    let mut figures = Figures {
        seed: options.seed,
        questions: count(options.questions),
        senders: count(options.senders),
        workers: count(slot_count),
        worker_processes: count(fleet.generations()),
        interrupts: count(fleet.interrupted().len()),
        timed_out,
        net: Some(net_figures),
        ..checked_figures(&mut verdict, stats.as_ref(), &record, &checkpoints, elapsed)
    };
    figures.judge(&verdict.stats_mismatches);
    figures.examples.extend(net_examples.into_iter().take(12));
    for (room, before, after) in checkpoints.regressions.iter().take(5) {
        figures.examples.push(format!(
            "checkpoint of room {room} moved from {before} back to {after}"
        ));
    }
    for (generation, reason, code) in &record.stops {
        if reason != "interrupted" {
            figures.failures.push(format!(
                "worker {generation} stopped by itself: {reason} {code:?}"
            ));
        }
    }
    let interrupted = fleet.interrupted().iter().map(|(g, _, code)| (*g, *code));
    for (generation, code) in exits.iter().copied().chain(interrupted) {
        if code != Some(0) {
            figures.failures.push(format!(
                "worker {generation} exited with {code:?} after SIGINT"
            ));
        }
    }
    if record.unparsed > 0 {
        figures.failures.push(format!(
            "{} worker output lines were not JSON",
            record.unparsed
        ));
    }
    workdir.remove = figures.passed() && !options.keep_dir;
    // Workers, servers, PostgreSQL, then the namespaces.
    drop(fleet);
    drop(servers);
    drop(pg);
    drop(net);
    Ok(figures)
}

/// A fault in force: the index of its record, when it heals, and for a
/// server cut the probe of the server's `/healthz`.
#[derive(Debug)]
struct Active {
    fault: usize,
    heal_at: Instant,
    probe: Option<(watch::Sender<Option<i64>>, JoinHandle<Probed>)>,
}

struct Chaos<'a> {
    options: &'a NetOptions,
    net: &'a Net,
    slots: &'a [Slot],
    fleet: &'a mut WorkerFleet,
    health_urls: Vec<String>,
    database_url: String,
    /// The servers' addresses on the database's bridge.
    server_addresses: Vec<String>,
    skewed: SlotLaunch,
    rng: SplitMix64,
    faults: Vec<Fault>,
    active: Vec<Active>,
    /// The probes of healed server cuts still waiting for a 200.
    probes: Vec<(usize, JoinHandle<Probed>)>,
    started: Instant,
    timed_out: bool,
}

impl Chaos<'_> {
    /// Faults at random moments until every kind reached its count, every
    /// question was sent and every job is done (or the run times out).
    async fn run(
        &mut self,
        started: Instant,
        sending: &mut send::Sending,
        db: &mut Db,
        runtime_id: Uuid,
    ) -> anyhow::Result<()> {
        let total = i64::try_from(self.options.questions).unwrap_or(i64::MAX);
        let mut sent = false;
        let mut next_fault = Instant::now() + Duration::from_secs(2);
        loop {
            if started.elapsed() > self.options.timeout {
                self.timed_out = true;
                log("timed out waiting for the questions to be handled");
                self.heal_all().await?;
                return Ok(());
            }
            self.heal_due().await?;
            let quota_met = Kind::ALL
                .iter()
                .filter(|kind| {
                    self.options.only.is_empty()
                        || self.options.only.contains(&kind.name().to_owned())
                })
                .all(|kind| self.count(*kind) >= self.options.faults_each);
            if !quota_met && Instant::now() >= next_fault {
                self.start_one()?;
                next_fault = Instant::now() + Duration::from_millis(300 + self.rng.below(1500));
            }
            if !sent && sending.is_finished() {
                let tally = sending.join().await?;
                log(format!(
                    "all {} questions sent ({} send retries)",
                    tally.sent, tally.retries
                ));
                sent = true;
            }
            // Every question answered: the run ends, and a kind short of its
            // count (a cut past the lease needs a handler running) fails it.
            if sent
                && self.active.is_empty()
                && let Ok(tally) = db::job_tally(db, runtime_id).await
                && tally.jobs >= total
                && tally.done == tally.jobs
            {
                if !quota_met {
                    log("every question was answered before every kind of fault reached its count");
                }
                return Ok(());
            }
            tokio::time::sleep(TICK).await;
        }
    }

    fn count(&self, kind: Kind) -> u64 {
        u64::try_from(self.faults.iter().filter(|f| f.kind == kind).count()).unwrap_or(0)
    }

    fn busy_slots(&self) -> Vec<usize> {
        self.active
            .iter()
            .map(|a| &self.faults[a.fault])
            .filter(|f| f.kind.on_worker())
            .map(|f| f.target)
            .collect()
    }

    /// Starts a fault of the kind injected least so far that has a free
    /// target.
    fn start_one(&mut self) -> anyhow::Result<()> {
        let busy = self.busy_slots();
        let server_cut_on = self
            .active
            .iter()
            .any(|a| !self.faults[a.fault].kind.on_worker());
        let free: Vec<usize> = (0..self.slots.len())
            .filter(|s| !busy.contains(s))
            .collect();
        // A cut past the lease goes to a worker with a handler running, a
        // half-open connection to one whose socket is open (else there is
        // nothing to notice).
        let (running, connected): (Vec<usize>, Vec<usize>) = {
            let record = self.fleet.record();
            let generation = |slot: &usize| self.fleet.generation_in(*slot);
            let running = free
                .iter()
                .filter(|slot| {
                    generation(slot)
                        .and_then(|g| record.in_flight.get(&g))
                        .is_some_and(|jobs| !jobs.is_empty())
                })
                .copied()
                .collect();
            let connected = free
                .iter()
                .filter(|slot| {
                    generation(slot).is_some_and(|g| record.socket_open.get(&g) == Some(&true))
                })
                .copied()
                .collect();
            (running, connected)
        };
        let mut candidates: Vec<Kind> = Kind::ALL
            .into_iter()
            .filter(|kind| self.count(*kind) < self.options.faults_each)
            .filter(|kind| {
                self.options.only.is_empty() || self.options.only.contains(&kind.name().to_owned())
            })
            .filter(|kind| match kind {
                // One at a time, and not before the last one's server
                // answered 200 again (its recovery is measured alone).
                Kind::DbCut => !server_cut_on && self.probes.iter().all(|(_, p)| p.is_finished()),
                // Restarting the skewed slot waits for its worker to run and
                // then to start again: only while its server can serve.
                Kind::ClockSkew => {
                    free.contains(&0)
                        && busy.len() < self.options.parallel_faults
                        && self.slot_worker_started(0)
                        && !self.server_cut_now(self.slots[0].server)
                }
                Kind::LongCut => !running.is_empty() && busy.len() < self.options.parallel_faults,
                Kind::HalfOpen => {
                    !connected.is_empty() && busy.len() < self.options.parallel_faults
                }
                _ => !free.is_empty() && busy.len() < self.options.parallel_faults,
            })
            .collect();
        let Some(least) = candidates.iter().map(|k| self.count(*k)).min() else {
            return Ok(());
        };
        candidates.retain(|k| self.count(*k) == least);
        let pick = |rng: &mut SplitMix64, n: usize| {
            usize::try_from(rng.below(u64::try_from(n).unwrap_or(1))).unwrap_or(0)
        };
        let kind = candidates[pick(&mut self.rng, candidates.len())];
        let duration = kind.duration(self.options.lease_ms, &mut self.rng);
        let target = match kind {
            Kind::DbCut => pick(&mut self.rng, 2),
            Kind::ClockSkew => 0,
            Kind::LongCut => running[pick(&mut self.rng, running.len())],
            Kind::HalfOpen => connected[pick(&mut self.rng, connected.len())],
            _ => free[pick(&mut self.rng, free.len())],
        };
        let start_ms = wall_ms();
        let (generations, detail, probe) = self.inject(kind, target)?;
        log(format!(
            "t+{:.1}s {} on {} {target} for {} ms{detail}",
            self.since_start(),
            kind.name(),
            if kind.on_worker() {
                "worker slot"
            } else {
                "server"
            },
            duration.as_millis()
        ));
        self.faults.push(Fault {
            kind,
            target,
            start_ms,
            heal_ms: None,
            generations,
            first_503_ms: None,
            healthy_ms: None,
            open_transactions: 0,
        });
        self.active.push(Active {
            fault: self.faults.len() - 1,
            heal_at: Instant::now() + duration,
            probe,
        });
        Ok(())
    }

    /// Puts a fault of `kind` on `target`: the generations it concerns, a
    /// detail for the log, the health probe of a server cut.
    #[allow(clippy::type_complexity)]
    fn inject(
        &mut self,
        kind: Kind,
        target: usize,
    ) -> anyhow::Result<(
        Vec<usize>,
        String,
        Option<(watch::Sender<Option<i64>>, JoinHandle<Probed>)>,
    )> {
        let current = |fleet: &WorkerFleet| fleet.generation_in(target).into_iter().collect();
        match kind {
            Kind::LongCut | Kind::ShortCut => {
                block_in_place(|| self.net.cut(&format!("w{target}")))?;
                Ok((current(self.fleet), String::new(), None))
            }
            Kind::HalfOpen => {
                self.slots[target].proxy.stall(Direction::ToClient);
                Ok((current(self.fleet), String::new(), None))
            }
            Kind::SlowLink => {
                let delay = 200 + self.rng.below(200);
                self.slots[target]
                    .proxy
                    .set_delay(Duration::from_millis(delay));
                Ok((current(self.fleet), format!(", {delay} ms each way"), None))
            }
            Kind::ClockSkew => {
                let minutes = 2 + self.rng.below(9);
                let sign = if self.rng.below(2) == 0 { "+" } else { "-" };
                let mut launch = self.skewed.clone();
                launch
                    .env
                    .push(("FAKETIME".into(), format!("{sign}{}", minutes * 60)));
                self.fleet.set_launch(0, launch);
                block_in_place(|| self.fleet.interrupt_slot(0, RESTART_TIMEOUT))?;
                Ok((
                    current(self.fleet),
                    format!(", wall clock {sign}{minutes} min"),
                    None,
                ))
            }
            Kind::DbCut => {
                block_in_place(|| self.net.cut(&format!("s{target}db")))?;
                let generations = (0..self.slots.len())
                    .filter(|s| self.slots[*s].server == target)
                    .filter_map(|s| self.fleet.generation_in(s))
                    .collect();
                let (healed, heal_rx) = watch::channel(None);
                let probe = tokio::spawn(probe_health(
                    format!("{}/healthz", self.health_urls[target]),
                    self.database_url.clone(),
                    self.server_addresses[target].clone(),
                    heal_rx,
                ));
                Ok((generations, String::new(), Some((healed, probe))))
            }
        }
    }

    /// Whether the worker in `slot` printed `started` (interrupting one
    /// that did not would wait for it).
    fn slot_worker_started(&self, slot: usize) -> bool {
        let generation = self.fleet.generation_in(slot);
        generation.is_some_and(|g| self.fleet.record().started_generations.contains(&g))
    }

    /// Whether `server` is cut from PostgreSQL now.
    fn server_cut_now(&self, server: usize) -> bool {
        self.active.iter().any(|a| {
            let fault = &self.faults[a.fault];
            fault.kind == Kind::DbCut && fault.target == server
        })
    }

    async fn heal_due(&mut self) -> anyhow::Result<()> {
        let now = Instant::now();
        let skewed_started = self.slot_worker_started(0);
        let due: Vec<Active> = {
            // A skewed worker not started yet (its server cut meanwhile) is
            // restarted once it has: the loop never blocks on it.
            let (due, keep) = std::mem::take(&mut self.active).into_iter().partition(|a| {
                a.heal_at <= now && (self.faults[a.fault].kind != Kind::ClockSkew || skewed_started)
            });
            self.active = keep;
            due
        };
        for active in due {
            self.heal(active).await?;
        }
        Ok(())
    }

    async fn heal_all(&mut self) -> anyhow::Result<()> {
        for active in std::mem::take(&mut self.active) {
            self.heal(active).await?;
        }
        Ok(())
    }

    async fn heal(&mut self, active: Active) -> anyhow::Result<()> {
        let (kind, target) = {
            let fault = &self.faults[active.fault];
            (fault.kind, fault.target)
        };
        match kind {
            Kind::LongCut | Kind::ShortCut => {
                block_in_place(|| self.net.heal(&format!("w{target}")))?;
            }
            Kind::HalfOpen => self.slots[target].proxy.heal(),
            Kind::SlowLink => self.slots[target].proxy.set_delay(Duration::ZERO),
            Kind::ClockSkew => {
                self.fleet.set_launch(0, self.slots[0].launch.clone());
                block_in_place(|| self.fleet.interrupt_slot(0, RESTART_TIMEOUT))?;
            }
            Kind::DbCut => block_in_place(|| self.net.heal(&format!("s{target}db")))?,
        }
        let heal_ms = wall_ms();
        self.faults[active.fault].heal_ms = Some(heal_ms);
        log(format!(
            "t+{:.1}s healed {} on {target}",
            self.since_start(),
            kind.name()
        ));
        if let Some((healed, probe)) = active.probe {
            let _ = healed.send(Some(heal_ms));
            // It ends once the server is healthy again (or gives up);
            // [`Chaos::collect_probes`] waits for it.
            self.probes.push((active.fault, probe));
        }
        Ok(())
    }

    /// The server cuts' probes: 503 during, 200 after.
    async fn collect_probes(&mut self) -> anyhow::Result<()> {
        for (fault, probe) in std::mem::take(&mut self.probes) {
            let probed = probe.await.context("health probe")?;
            self.faults[fault].first_503_ms = probed.first_503_ms;
            self.faults[fault].open_transactions = probed.open_transactions;
            self.faults[fault].healthy_ms = probed.healthy_ms;
            let f = &self.faults[fault];
            let after = |at: Option<i64>, from: Option<i64>| match (at, from) {
                (Some(at), Some(from)) => format!("{} ms", at - from),
                _ => "never".to_owned(),
            };
            log(format!(
                "server {} cut at t+{:.1}s: first 503 after {}, healthy {} after the heal, {} transactions caught open",
                f.target,
                self.started.elapsed().as_secs_f64() - (wall_ms() - f.start_ms) as f64 / 1000.0,
                after(probed.first_503_ms, Some(f.start_ms)),
                after(probed.healthy_ms, f.heal_ms),
                probed.open_transactions
            ));
        }
        Ok(())
    }

    fn since_start(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }
}

#[derive(Debug, Default)]
struct Probed {
    /// The server's transactions the cut caught open.
    open_transactions: u64,
    first_503_ms: Option<i64>,
    healthy_ms: Option<i64>,
}

#[derive(diesel::QueryableByName, Debug)]
struct Count {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    n: i64,
}

/// Right after a server's cut: its transactions caught open (from
/// PostgreSQL's side); then asks `url` (the server's `/healthz`) every
/// 250 ms: the first 503 before the heal, the first 200 after it.
async fn probe_health(
    url: String,
    database_url: String,
    server_address: String,
    healed: watch::Receiver<Option<i64>>,
) -> Probed {
    use diesel_async::RunQueryDsl;
    let mut probed = Probed::default();
    let mut db = Db::new(&database_url);
    if let Ok(conn) = db.conn().await {
        let open: Result<Vec<Count>, _> = diesel::sql_query(
            "SELECT count(*) AS n FROM pg_stat_activity
             WHERE backend_type = 'client backend' AND host(client_addr) = $1
               AND xact_start IS NOT NULL",
        )
        .bind::<diesel::sql_types::Text, _>(&server_address)
        .load(conn)
        .await;
        probed.open_transactions = open
            .ok()
            .and_then(|rows| <[Count]>::first(&rows).map(|c| u64::try_from(c.n).unwrap_or(0)))
            .unwrap_or(0);
    }
    drop(db);
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap_or_default();
    loop {
        let status = client.get(&url).send().await.map(|r| r.status().as_u16());
        let now = wall_ms();
        let heal = *healed.borrow();
        match (heal, status) {
            (None, Ok(503)) => {
                probed.first_503_ms.get_or_insert(now);
            }
            (Some(heal_ms), Ok(200)) if now > heal_ms => {
                probed.healthy_ms = Some(now);
                return probed;
            }
            (Some(heal_ms), _)
                if now - heal_ms
                    > i64::try_from(SERVER_RECOVERY_LIMIT.as_millis()).unwrap_or(i64::MAX) =>
            {
                return probed;
            }
            _ => {}
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[derive(Debug, Default)]
struct Sessions {
    past_limit: u64,
    longest_idle_ms: u64,
}

#[derive(diesel::QueryableByName, Debug)]
struct SessionRow {
    #[diesel(sql_type = diesel::sql_types::Text)]
    state: String,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    state_ms: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    query_ms: i64,
}

/// Samples the servers' sessions once a second: one idle in a transaction
/// past `idle_in_transaction_session_timeout`, or running one statement
/// past `statement_timeout` (its locks held that long), is counted.
async fn watch_sessions(
    url: String,
    servers: Vec<String>,
    mut stop: watch::Receiver<bool>,
) -> Sessions {
    use diesel_async::RunQueryDsl;
    let mut db = Db::new(&url);
    let mut sessions = Sessions::default();
    while !*stop.borrow() {
        if let Ok(conn) = db.conn().await {
            let rows: Result<Vec<SessionRow>, _> = diesel::sql_query(
                "SELECT state,
                        (extract(epoch FROM now() - state_change) * 1000)::bigint AS state_ms,
                        (extract(epoch FROM now() - query_start) * 1000)::bigint AS query_ms
                 FROM pg_stat_activity
                 WHERE backend_type = 'client backend' AND host(client_addr) = ANY($1)
                   AND state IN ('idle in transaction', 'idle in transaction (aborted)', 'active')",
            )
            .bind::<diesel::sql_types::Array<diesel::sql_types::Text>, _>(&servers)
            .load(conn)
            .await;
            match rows {
                Ok(rows) => {
                    for row in rows {
                        if row.state.starts_with("idle in transaction") {
                            let idle = u64::try_from(row.state_ms).unwrap_or(0);
                            sessions.longest_idle_ms = sessions.longest_idle_ms.max(idle);
                            if row.state_ms > IDLE_IN_TRANSACTION_LIMIT_MS + SAMPLE_SLACK_MS {
                                sessions.past_limit += 1;
                            }
                        } else if row.query_ms > STATEMENT_LIMIT_MS + SAMPLE_SLACK_MS {
                            sessions.past_limit += 1;
                        }
                    }
                }
                Err(_) => db.reset(),
            }
        }
        tokio::select! {
            _ = stop.changed() => {}
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
    sessions
}

/// The recoveries, from the faults, the database and the workers' NDJSON.
fn measure(
    options: &NetOptions,
    faults: &[Fault],
    rows: &rows::Rows,
    cx: &verify::Context<'_>,
    is_js: &dyn Fn(usize) -> bool,
    server_of: &dyn Fn(usize) -> usize,
) -> NetFigures {
    let record = cx.record;
    let mut figures = NetFigures {
        faults_each: options.faults_each,
        only: options.only.clone(),
        lease_ms: options.lease_ms,
        ..NetFigures::default()
    };
    let lease = i64::try_from(options.lease_ms).unwrap_or(i64::MAX);
    let skewed: Vec<usize> = faults
        .iter()
        .filter(|f| f.kind == Kind::ClockSkew)
        .flat_map(|f| f.generations.iter().copied())
        .collect();
    for (generation, _, _) in &record.replies {
        if is_js(*generation) {
            figures.js_replies += 1;
        } else {
            figures.rust_replies += 1;
        }
        if skewed.contains(generation) {
            figures.skewed_replies += 1;
        }
    }
    let ms = |n: i64| u64::try_from(n.max(0)).unwrap_or(0);
    for fault in faults {
        *figures
            .faults
            .entry(fault.kind.name().to_owned())
            .or_default() += 1;
        let heal_ms = fault.heal_ms.unwrap_or(i64::MAX);
        let ours = |generation: &usize| fault.generations.contains(generation);
        // A lease lost while the worker's server was cut from PostgreSQL
        // is that cut's doing (no heartbeat can renew it then), not the
        // fault judged here, which may overlap it: it is left out.
        let server_cut_at = |generation: usize, at: i64| {
            faults.iter().any(|cut| {
                cut.kind == Kind::DbCut
                    && cut.target == server_of(generation)
                    && at >= cut.start_ms
                    && at <= cut.heal_ms.unwrap_or(i64::MAX).saturating_add(lease)
            })
        };
        let lease_losses = || {
            let during = record.lease_failures.iter().filter(|(g, at, _)| {
                ours(g)
                    && *at >= fault.start_ms
                    && *at <= heal_ms.saturating_add(lease)
                    && !server_cut_at(*g, *at)
            });
            u64::try_from(during.count()).unwrap_or(0)
        };
        match fault.kind {
            Kind::LongCut => {
                for takeover in verify::takeovers(rows, cx, &fault.generations, fault.start_ms) {
                    if takeover.is_none_or(|t| ms(t) > options.lease_ms + TAKEOVER_SLACK_MS) {
                        figures.takeovers_late += 1;
                        figures.examples.push(format!(
                            "a job held by worker {:?} (slot {}) cut at {} ms was taken over after {takeover:?} ms",
                            fault.generations, fault.target, fault.start_ms
                        ));
                    }
                    if let Some(t) = takeover {
                        figures.takeover.push(ms(t));
                    }
                }
            }
            Kind::ShortCut => figures.short_cut_lease_losses += lease_losses(),
            Kind::SlowLink => {
                let lost = lease_losses();
                figures.slow_link_lease_losses += lost;
                if lost > 0 {
                    figures.examples.push(format!(
                        "worker {:?} (slot {}) on a slow link from {} ms lost {lost} leases",
                        fault.generations, fault.target, fault.start_ms
                    ));
                }
            }
            Kind::HalfOpen => {
                let noticed = record
                    .socket_down
                    .iter()
                    .filter(|(g, at)| ours(g) && *at >= fault.start_ms)
                    .map(|(_, at)| at - fault.start_ms)
                    .min();
                if let Some(t) = noticed {
                    figures.half_open_noticed.push(ms(t));
                }
                if noticed.is_none_or(|t| ms(t) > HALF_OPEN_BOUND_MS) {
                    figures.half_open_unnoticed += 1;
                    figures.examples.push(format!(
                        "the half-open connection of worker {:?} (slot {}) from {} ms was noticed after {noticed:?} ms",
                        fault.generations, fault.target, fault.start_ms
                    ));
                }
            }
            Kind::DbCut => {
                if fault.first_503_ms.is_none() {
                    figures.db_cuts_without_503 += 1;
                }
                if fault.open_transactions > 0 {
                    figures.db_cuts_mid_transaction += 1;
                }
                match (fault.healthy_ms, fault.heal_ms) {
                    (Some(healthy), Some(heal)) => {
                        figures.server_recovery.push(ms(healthy - heal));
                        if ms(healthy - heal) > SERVER_RECOVERY_BOUND_MS {
                            figures.servers_not_recovered += 1;
                        }
                    }
                    _ => figures.servers_not_recovered += 1,
                }
                let others = record.reply_times.iter().filter(|(g, at)| {
                    server_of(*g) != fault.target && *at >= fault.start_ms && *at <= heal_ms
                });
                figures.other_server_replies_during_cuts +=
                    u64::try_from(others.count()).unwrap_or(0);
            }
            Kind::ClockSkew => {}
        }
        if fault.kind != Kind::ClockSkew {
            let first = record
                .reply_times
                .iter()
                .filter(|(g, at)| ours(g) && *at >= heal_ms)
                .map(|(_, at)| at - heal_ms)
                .min();
            match first {
                Some(t) => figures
                    .first_reply_after_heal
                    .entry(fault.kind.name().to_owned())
                    .or_default()
                    .push(ms(t)),
                None => figures.no_reply_after_heal += 1,
            }
        }
    }
    figures
}

/// libfaketime (Debian's `faketime` package), which the skewed worker is
/// started with.
fn find_libfaketime() -> anyhow::Result<PathBuf> {
    let candidates = std::fs::read_dir("/usr/lib")
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path().join("faketime/libfaketime.so.1"))
        .chain([PathBuf::from("/usr/lib/faketime/libfaketime.so.1")]);
    for candidate in candidates {
        if candidate.is_file() {
            return Ok(candidate);
        }
    }
    anyhow::bail!(
        "libfaketime is missing: install Debian's faketime package (scripts/test does as root)"
    )
}
