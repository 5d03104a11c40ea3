//! The figures a soak run prints: a table for people, one JSON object for
//! programs (`--json`), and the list of failed checks.

use std::fmt::Write as _;

use serde_json::{Value, json};

/// Everything a run measured. Counts are from the database unless named
/// otherwise.
#[derive(Debug, Default, Clone)]
pub struct Figures {
    pub seed: u64,
    pub questions: u64,
    pub senders: u64,
    pub workers: u64,
    /// Worker processes started, the replacements of killed ones included.
    pub worker_processes: u64,
    pub kills: u64,
    /// Workers stopped with SIGINT mid-run (and replaced).
    pub interrupts: u64,
    pub pg_restarts: u64,
    /// Primary killed (`pg_ctl -m immediate`) and its synchronous standby
    /// promoted (`--failover`).
    pub failovers: u64,
    /// From the primary's kill to the first reply finished on the promoted
    /// standby that was not already in flight.
    pub recovery_ms: Option<u64>,
    pub server_restarts: u64,
    /// The signal the server restart used.
    pub server_stop_signal: String,
    pub handled: u64,
    pub dead_lettered: u64,
    pub lost: u64,
    pub duplicate_replies: u64,
    pub stale_finishes: u64,
    pub wrong_replies: u64,
    /// From the runtime's stats.
    pub claims: u64,
    /// Rows in `attempts`.
    pub attempts: u64,
    /// From the runtime's stats.
    pub unfinished: u64,
    pub unfinished_killed: u64,
    pub unfinished_outage: u64,
    pub unfinished_released: u64,
    /// Unfinished, unreleased attempts of an interrupted worker: an attempt
    /// spent without an answer (must be 0).
    pub burnt_by_interrupt: u64,
    pub unfinished_unexplained: u64,
    pub lease_lost_reports: u64,
    pub checkpoint_samples: u64,
    pub checkpoint_regressions: u64,
    pub elapsed_ms: u64,
    pub timed_out: bool,
    /// The checks that failed, in words; empty when the run passed.
    pub failures: Vec<String>,
    /// Examples of what went wrong (for the failures above).
    pub examples: Vec<String>,
    /// The network soak's own figures (`relayger-soak --net`).
    pub net: Option<super::net::NetFigures>,
}

impl Figures {
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }

    pub fn to_json(&self) -> Value {
        json!({
            "ok": self.passed(),
            "seed": self.seed,
            "questions": self.questions,
            "senders": self.senders,
            "workers": self.workers,
            "workerProcesses": self.worker_processes,
            "kills": self.kills,
            "interrupts": self.interrupts,
            "pgRestarts": self.pg_restarts,
            "failovers": self.failovers,
            "recoveryMs": self.recovery_ms,
            "serverRestarts": self.server_restarts,
            "serverStopSignal": self.server_stop_signal,
            "handled": self.handled,
            "deadLettered": self.dead_lettered,
            "lost": self.lost,
            "duplicateReplies": self.duplicate_replies,
            "staleFinishes": self.stale_finishes,
            "wrongReplies": self.wrong_replies,
            "claims": self.claims,
            "attempts": self.attempts,
            "unfinished": self.unfinished,
            "unfinishedByKill": self.unfinished_killed,
            "unfinishedByOutage": self.unfinished_outage,
            "unfinishedReleased": self.unfinished_released,
            "attemptsBurntByInterrupt": self.burnt_by_interrupt,
            "unfinishedUnexplained": self.unfinished_unexplained,
            "leaseLostReports": self.lease_lost_reports,
            "checkpointSamples": self.checkpoint_samples,
            "checkpointRegressions": self.checkpoint_regressions,
            "elapsedMs": self.elapsed_ms,
            "timedOut": self.timed_out,
            "failures": self.failures,
            "examples": self.examples,
            "net": self.net.as_ref().map(super::net::NetFigures::to_json),
        })
    }

    pub fn table(&self) -> String {
        let rows: [(&str, String); 27] = [
            ("seed", self.seed.to_string()),
            ("questions", self.questions.to_string()),
            ("senders", self.senders.to_string()),
            ("workers", self.workers.to_string()),
            ("worker processes", self.worker_processes.to_string()),
            ("kills (SIGKILL)", self.kills.to_string()),
            ("interrupts (SIGINT)", self.interrupts.to_string()),
            ("PostgreSQL restarts", self.pg_restarts.to_string()),
            ("failovers", self.failovers.to_string()),
            (
                "recovery after failover",
                self.recovery_ms
                    .map_or_else(|| "-".into(), |ms| format!("{ms} ms")),
            ),
            (
                "server restarts",
                format!("{} (SIG{})", self.server_restarts, self.server_stop_signal),
            ),
            ("handled", self.handled.to_string()),
            ("dead-lettered", self.dead_lettered.to_string()),
            ("lost", self.lost.to_string()),
            ("duplicate replies", self.duplicate_replies.to_string()),
            ("stale finishes", self.stale_finishes.to_string()),
            ("wrong replies", self.wrong_replies.to_string()),
            ("claims (stats)", self.claims.to_string()),
            ("attempts (rows)", self.attempts.to_string()),
            (
                "unfinished (stats)",
                format!(
                    "{} = {} killed + {} outage + {} released + {} unexplained",
                    self.unfinished,
                    self.unfinished_killed,
                    self.unfinished_outage,
                    self.unfinished_released,
                    self.unfinished_unexplained
                ),
            ),
            (
                "attempts burnt by SIGINT",
                self.burnt_by_interrupt.to_string(),
            ),
            ("lease_lost reports", self.lease_lost_reports.to_string()),
            ("checkpoint samples", self.checkpoint_samples.to_string()),
            (
                "checkpoint regressions",
                self.checkpoint_regressions.to_string(),
            ),
            (
                "elapsed",
                format!("{:.1} s", self.elapsed_ms as f64 / 1000.0),
            ),
            ("timed out", self.timed_out.to_string()),
            (
                "result",
                if self.passed() {
                    "PASS".into()
                } else {
                    "FAIL".into()
                },
            ),
        ];
        let width = rows.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
        let mut out = String::new();
        for (name, value) in rows {
            let _ = writeln!(out, "{name:<width$}  {value}");
        }
        if let Some(net) = &self.net {
            out.push_str(&net.table());
        }
        for failure in &self.failures {
            let _ = writeln!(out, "FAILED: {failure}");
        }
        for example in &self.examples {
            let _ = writeln!(out, "  e.g. {example}");
        }
        out
    }

    /// Fills [`Figures::failures`] from the figures.
    pub(crate) fn judge(&mut self, stats_mismatches: &[String]) {
        let mut failures = Vec::new();
        let zero = [
            ("lost", self.lost),
            ("duplicate replies", self.duplicate_replies),
            ("stale finishes", self.stale_finishes),
            ("wrong replies", self.wrong_replies),
            ("checkpoint regressions", self.checkpoint_regressions),
            ("attempts burnt by SIGINT", self.burnt_by_interrupt),
            (
                "unexplained unfinished attempts",
                self.unfinished_unexplained,
            ),
        ];
        for (name, value) in zero {
            if value != 0 {
                failures.push(format!("{name}: {value}, expected 0"));
            }
        }
        if self.handled + self.dead_lettered != self.questions {
            failures.push(format!(
                "handled {} + dead-lettered {} != questions {}",
                self.handled, self.dead_lettered, self.questions
            ));
        }
        if self.timed_out {
            failures.push("not every question was handled or dead-lettered in time".into());
        }
        if let Some(net) = &self.net {
            failures.extend(net.failures());
        } else if self.kills == 0
            || self.interrupts == 0
            || self.pg_restarts + self.failovers != 1
            || self.server_restarts != 1
        {
            failures.push(format!(
                "chaos incomplete: {} kills, {} interrupts, {} PostgreSQL restarts, {} failovers, {} server restarts",
                self.kills, self.interrupts, self.pg_restarts, self.failovers, self.server_restarts
            ));
        }
        if self.failovers > 0 && self.recovery_ms.is_none() {
            failures.push("no reply was finished after the failover".into());
        }
        failures.extend(stats_mismatches.iter().map(|m| format!("stats: {m}")));
        self.failures.extend(failures);
    }
}
