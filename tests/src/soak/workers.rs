//! The worker processes: `relayger --json worker run soak …`, all of one
//! runtime name. Their NDJSON goes into one [`WorkerRecord`], which is what
//! relates every claim and reply to the process (generation) that printed
//! it; a killed process is replaced by a new generation in its slot.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::Value;

use super::rng::SplitMix64;
use crate::binary;
use crate::signal_process;

/// What all worker processes printed, by generation.
#[derive(Debug, Default)]
pub(crate) struct WorkerRecord {
    pub(crate) runtime_id: Option<String>,
    pub(crate) started: usize,
    /// The generations that printed `started`.
    pub(crate) started_generations: std::collections::BTreeSet<usize>,
    /// (jobKey, attempt) → the generations that printed `claimed` for it.
    pub(crate) claims: HashMap<(String, u64), Vec<usize>>,
    pub(crate) claimed_events: u64,
    /// (generation, jobKey, replyMessageId) of every `replied`.
    pub(crate) replies: Vec<(usize, String, Option<String>)>,
    /// `failed` events by error code.
    pub(crate) failed: BTreeMap<String, u64>,
    pub(crate) dead_letters: u64,
    /// (generation, reason, code) of every `stopped`.
    pub(crate) stops: Vec<(usize, String, Option<String>)>,
    /// Lines on stdout that were not JSON events.
    pub(crate) unparsed: u64,
    /// (generation, wall-clock ms when read) of every `replied`.
    pub(crate) reply_times: Vec<(usize, i64)>,
    /// (generation, wall-clock ms when read) of every `socket_disconnected`.
    pub(crate) socket_down: Vec<(usize, i64)>,
    /// (generation, wall-clock ms when read, error) of every `failed` with
    /// `lease_lost` or `lease_expired`.
    pub(crate) lease_failures: Vec<(usize, i64, String)>,
    /// generation → the jobs it printed `claimed` for and no end yet: its
    /// handlers running now.
    pub(crate) in_flight: HashMap<usize, std::collections::HashSet<String>>,
    /// generation → whether its runtime socket is open (from `started`,
    /// `socket_connected` and `socket_disconnected`).
    pub(crate) socket_open: HashMap<usize, bool>,
}

impl WorkerRecord {
    fn note(&mut self, generation: usize, line: &str) {
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            self.unparsed += 1;
            return;
        };
        let text = |field: &str| event[field].as_str().unwrap_or_default().to_owned();
        let kind = event["event"].as_str().unwrap_or_default();
        match kind {
            "claimed" => {
                self.in_flight
                    .entry(generation)
                    .or_default()
                    .insert(text("jobKey"));
            }
            "replied" | "skipped" | "handled" | "failed" | "dead_letter" | "released" => {
                if let Some(jobs) = self.in_flight.get_mut(&generation) {
                    jobs.remove(&text("jobKey"));
                }
            }
            _ => {}
        }
        match kind {
            "started" => {
                self.socket_open
                    .insert(generation, event["socket"] == "connected");
                self.started += 1;
                self.started_generations.insert(generation);
                self.runtime_id.get_or_insert(text("runtimeId"));
            }
            "claimed" => {
                self.claimed_events += 1;
                let attempt = event["attempt"].as_u64().unwrap_or_default();
                self.claims
                    .entry((text("jobKey"), attempt))
                    .or_default()
                    .push(generation);
            }
            "replied" => {
                let reply = event["replyMessageId"].as_str().map(str::to_owned);
                self.replies.push((generation, text("jobKey"), reply));
                self.reply_times.push((generation, super::wall_ms()));
            }
            "failed" => {
                let error = text("error");
                if error == "lease_lost" || error == "lease_expired" {
                    self.lease_failures
                        .push((generation, super::wall_ms(), error.clone()));
                }
                *self.failed.entry(error).or_default() += 1;
            }
            "socket_disconnected" => {
                self.socket_open.insert(generation, false);
                self.socket_down.push((generation, super::wall_ms()));
            }
            "socket_connected" => {
                self.socket_open.insert(generation, true);
            }
            "dead_letter" => self.dead_letters += 1,
            "stopped" => {
                let code = event["code"].as_str().map(str::to_owned);
                self.stops.push((generation, text("reason"), code));
            }
            _ => {}
        }
    }
}

#[derive(Debug, Default)]
struct Shared {
    record: Mutex<WorkerRecord>,
    changed: Condvar,
}

#[derive(Debug)]
struct RunningWorker {
    generation: usize,
    child: Child,
}

/// How a worker is started (the same for every generation).
#[derive(Debug, Clone)]
pub(crate) struct WorkerCommand {
    /// Generation `g` runs with profiles from `homes[g % homes.len()]`.
    pub(crate) homes: Vec<PathBuf>,
    pub(crate) cwd: PathBuf,
    pub(crate) args: Vec<String>,
    /// When not empty: slot `i`'s processes start as `slots[i]` says
    /// instead (the network soak's per-slot namespaces and programs).
    pub(crate) slots: Vec<SlotLaunch>,
}

/// One slot's program: `argv[0]` with the rest, its profiles and extra
/// environment.
#[derive(Debug, Clone)]
pub(crate) struct SlotLaunch {
    pub(crate) argv: Vec<String>,
    pub(crate) home: PathBuf,
    pub(crate) env: Vec<(String, String)>,
}

#[derive(Debug)]
pub(crate) struct WorkerFleet {
    command: WorkerCommand,
    slots: Vec<Option<RunningWorker>>,
    readers: Vec<JoinHandle<()>>,
    shared: Arc<Shared>,
    generations: usize,
    /// (generation, wall-clock ms of the kill).
    killed: Vec<(usize, i64)>,
    /// (generation, wall-clock ms of the SIGINT, exit code).
    interrupted: Vec<(usize, i64, Option<i32>)>,
    /// The slot of every generation.
    slot_of: Vec<usize>,
}

impl WorkerFleet {
    pub(crate) fn start(command: WorkerCommand, count: usize) -> anyhow::Result<WorkerFleet> {
        let mut fleet = WorkerFleet {
            command,
            slots: Vec::new(),
            readers: Vec::new(),
            shared: Arc::default(),
            generations: 0,
            killed: Vec::new(),
            interrupted: Vec::new(),
            slot_of: Vec::new(),
        };
        for slot in 0..count {
            let worker = fleet.spawn(slot)?;
            fleet.slots.push(Some(worker));
        }
        Ok(fleet)
    }

    /// The record so far.
    pub(crate) fn record(&self) -> MutexGuard<'_, WorkerRecord> {
        self.shared
            .record
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Waits until `ready` holds for the record (woken by every event).
    pub(crate) fn wait_until(
        &self,
        what: &str,
        timeout: Duration,
        ready: impl Fn(&WorkerRecord) -> bool,
    ) -> anyhow::Result<()> {
        let until = Instant::now() + timeout;
        let mut record = self.record();
        while !ready(&record) {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                bail!("the workers did not report {what} within {timeout:?}");
            }
            record = self
                .shared
                .changed
                .wait_timeout(record, left)
                .map(|(guard, _)| guard)
                .unwrap_or_else(|poisoned| poisoned.into_inner().0);
        }
        Ok(())
    }

    /// Every generation started so far.
    pub(crate) fn generations(&self) -> usize {
        self.generations
    }

    /// The generations killed with SIGKILL, with the wall-clock time (ms
    /// since the Unix epoch) of each kill.
    pub(crate) fn killed(&self) -> &[(usize, i64)] {
        &self.killed
    }

    /// SIGKILLs a random worker and starts a new process in its slot.
    pub(crate) fn kill_random(&mut self, rng: &mut SplitMix64) -> anyhow::Result<usize> {
        let len = u64::try_from(self.slots.len()).unwrap_or(1);
        let index = usize::try_from(rng.below(len)).unwrap_or(0);
        let Some(mut victim) = self.slots[index].take() else {
            bail!("worker slot {index} is empty");
        };
        let at = super::wall_ms();
        signal_process(victim.child.id(), "KILL")?;
        victim.child.wait().context("reap the killed worker")?;
        self.killed.push((victim.generation, at));
        self.slots[index] = Some(self.spawn(index)?);
        Ok(victim.generation)
    }

    /// The generations stopped with SIGINT mid-run: (generation,
    /// wall-clock ms of the signal, exit code; `None`: it had to be killed).
    pub(crate) fn interrupted(&self) -> &[(usize, i64, Option<i32>)] {
        &self.interrupted
    }

    /// SIGINTs a random worker (its in-flight jobs and any claim in flight
    /// are released), waits for it to exit (killing it after `timeout`)
    /// and starts a new process in its slot.
    pub(crate) fn interrupt_random(
        &mut self,
        rng: &mut SplitMix64,
        timeout: Duration,
    ) -> anyhow::Result<usize> {
        let len = u64::try_from(self.slots.len()).unwrap_or(1);
        let index = usize::try_from(rng.below(len)).unwrap_or(0);
        self.interrupt_slot(index, timeout)
    }

    /// The slot of `generation`.
    pub(crate) fn slot_of(&self, generation: usize) -> Option<usize> {
        self.slot_of.get(generation).copied()
    }

    /// The generation running in `slot` now.
    pub(crate) fn generation_in(&self, slot: usize) -> Option<usize> {
        self.slots.get(slot)?.as_ref().map(|w| w.generation)
    }

    /// From now on slot `slot` starts as `launch` says.
    pub(crate) fn set_launch(&mut self, slot: usize, launch: SlotLaunch) {
        if let Some(place) = self.command.slots.get_mut(slot) {
            *place = launch;
        }
    }

    /// As [`WorkerFleet::interrupt_random`], for the worker in `index`.
    pub(crate) fn interrupt_slot(
        &mut self,
        index: usize,
        timeout: Duration,
    ) -> anyhow::Result<usize> {
        let Some(generation) = self.slots[index].as_ref().map(|w| w.generation) else {
            bail!("worker slot {index} is empty");
        };
        // A process still starting has no SIGINT handler yet (the signal
        // would simply end it): interrupt it once it is running.
        self.wait_until("started", timeout, |r| {
            r.started_generations.contains(&generation)
        })?;
        let Some(mut victim) = self.slots[index].take() else {
            bail!("worker slot {index} is empty");
        };
        let at = super::wall_ms();
        signal_process(victim.child.id(), "INT")?;
        let until = Instant::now() + timeout;
        let code = loop {
            match victim
                .child
                .try_wait()
                .context("wait for the interrupted worker")?
            {
                Some(status) => break status.code(),
                None if Instant::now() < until => std::thread::sleep(Duration::from_millis(20)),
                None => {
                    let _ = victim.child.kill();
                    victim.child.wait().context("reap the interrupted worker")?;
                    break None;
                }
            }
        };
        self.interrupted.push((victim.generation, at, code));
        self.slots[index] = Some(self.spawn(index)?);
        Ok(victim.generation)
    }

    /// SIGINT to every worker (in-flight jobs are released), then waits;
    /// a worker that does not stop in time is killed. The exit codes by
    /// generation (`None`: killed by a signal).
    pub(crate) fn stop_all(&mut self, timeout: Duration) -> Vec<(usize, Option<i32>)> {
        // As in `interrupt_random`: a replacement still starting would be
        // ended by the signal, not stopped by it.
        let generations: Vec<usize> = self.slots.iter().flatten().map(|w| w.generation).collect();
        let _ = self.wait_until("started", timeout, |r| {
            generations
                .iter()
                .all(|g| r.started_generations.contains(g))
        });
        let mut running: Vec<RunningWorker> =
            self.slots.iter_mut().filter_map(Option::take).collect();
        for worker in &running {
            let _ = signal_process(worker.child.id(), "INT");
        }
        let until = Instant::now() + timeout;
        let mut exits = Vec::new();
        for worker in &mut running {
            let status = loop {
                match worker.child.try_wait() {
                    Ok(Some(status)) => break status.code(),
                    Ok(None) if Instant::now() < until => {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    _ => {
                        let _ = worker.child.kill();
                        break worker.child.wait().ok().and_then(|s| s.code());
                    }
                }
            };
            exits.push((worker.generation, status));
        }
        // Every line the processes printed is in the record once their
        // readers reached end of file.
        for reader in self.readers.drain(..) {
            let _ = reader.join();
        }
        exits
    }

    fn spawn(&mut self, slot: usize) -> anyhow::Result<RunningWorker> {
        let generation = self.generations;
        self.generations += 1;
        self.slot_of.push(slot);
        let stderr = std::fs::File::create(
            self.command
                .cwd
                .join(format!("worker-{generation}.stderr.log")),
        )
        .context("worker log")?;
        let mut command = match self.command.slots.get(slot) {
            Some(launch) => {
                let mut command = Command::new(&launch.argv[0]);
                command
                    .args(&launch.argv[1..])
                    .envs(launch.env.iter().map(|(k, v)| (k, v)))
                    .env("RELAYGER_HOME", &launch.home);
                command
            }
            None => {
                let mut command = Command::new(binary("relayger")?);
                command.args(&self.command.args).env(
                    "RELAYGER_HOME",
                    &self.command.homes[generation % self.command.homes.len()],
                );
                command
            }
        };
        command
            .current_dir(&self.command.cwd)
            .env_remove("RELAYGER_PROFILE")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(stderr));
        let mut child = command.spawn().context("spawn relayger worker run")?;
        let stdout = child.stdout.take().context("worker stdout")?;
        let shared = Arc::clone(&self.shared);
        let log_path = self.command.cwd.join(format!("worker-{generation}.ndjson"));
        self.readers.push(std::thread::spawn(move || {
            let mut log = std::fs::File::create(log_path).ok();
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(log) = log.as_mut() {
                    use std::io::Write;
                    let _ = writeln!(log, "{line}");
                }
                let mut record = shared
                    .record
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                record.note(generation, &line);
                drop(record);
                shared.changed.notify_all();
            }
        }));
        Ok(RunningWorker { generation, child })
    }
}

impl Drop for WorkerFleet {
    fn drop(&mut self) {
        for worker in self.slots.iter_mut().filter_map(Option::take) {
            let mut child = worker.child;
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
