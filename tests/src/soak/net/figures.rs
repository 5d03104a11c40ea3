//! What the network soak measured beyond the chaos soak's counters: the
//! faults by kind and how the run recovered from each.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{Value, json};

/// The bound on a takeover after a cut longer than the lease: the lease
/// plus this.
pub(crate) const TAKEOVER_SLACK_MS: u64 = 5000;
/// A half-open socket must be noticed within this.
pub(crate) const HALF_OPEN_BOUND_MS: u64 = 20_000;
/// A server cut from PostgreSQL must answer `/healthz` with 200 within
/// this after the link is back.
pub(crate) const SERVER_RECOVERY_BOUND_MS: u64 = 5000;

/// Times (ms) of one kind of measurement: how many, the median, the
/// largest.
#[derive(Debug, Default, Clone)]
pub struct Spread {
    pub values: Vec<u64>,
}

impl Spread {
    pub(crate) fn push(&mut self, value: u64) {
        self.values.push(value);
    }

    pub fn max(&self) -> Option<u64> {
        self.values.iter().copied().max()
    }

    pub fn median(&self) -> Option<u64> {
        let mut sorted = self.values.clone();
        sorted.sort_unstable();
        sorted.get(sorted.len() / 2).copied()
    }

    fn to_json(&self) -> Value {
        json!({"count": self.values.len(), "medianMs": self.median(), "maxMs": self.max()})
    }

    fn describe(&self) -> String {
        match (self.median(), self.max()) {
            (Some(median), Some(max)) => {
                format!("{} × median {median} ms, max {max} ms", self.values.len())
            }
            _ => "-".to_owned(),
        }
    }
}

#[derive(Debug, Default, Clone)]
pub struct NetFigures {
    /// The faults each kind had to reach.
    pub faults_each: u64,
    /// The kinds injected (`--only`; empty: all).
    pub only: Vec<String>,
    /// The servers' lease.
    pub lease_ms: u64,
    /// Faults injected, by kind.
    pub faults: BTreeMap<String, u64>,
    pub rust_workers: u64,
    pub js_workers: u64,
    /// Replies committed by Rust and by JavaScript worker processes.
    pub rust_replies: u64,
    pub js_replies: u64,
    /// Replies committed by a worker whose wall clock was skewed.
    pub skewed_replies: u64,
    /// Handler runs that found another run of the same job still running.
    pub concurrent_attempts: u64,
    /// From a cut longer than the lease to the grant of each job the
    /// cut-off worker held.
    pub takeover: Spread,
    /// Held jobs taken over later than the lease + 5 s, or never.
    pub takeovers_late: u64,
    /// From a half-open socket's start to the worker's `socket_disconnected`.
    pub half_open_noticed: Spread,
    /// Half-open sockets not noticed within 20 s.
    pub half_open_unnoticed: u64,
    /// From each fault's heal to the affected workers' next reply, by kind.
    pub first_reply_after_heal: BTreeMap<String, Spread>,
    /// Faults after which the affected workers replied no more.
    pub no_reply_after_heal: u64,
    /// Cuts of a server from PostgreSQL during which its `/healthz` never
    /// answered 503.
    pub db_cuts_without_503: u64,
    /// Cuts of a server from PostgreSQL that caught one of its transactions
    /// open (PostgreSQL's view right after the cut).
    pub db_cuts_mid_transaction: u64,
    /// From each such cut's heal to the server's `/healthz` answering 200.
    pub server_recovery: Spread,
    /// Servers not healthy again within 5 s of the heal (or never).
    pub servers_not_recovered: u64,
    /// Replies by the other server's workers while one server was cut.
    pub other_server_replies_during_cuts: u64,
    /// Samples that saw a session of a server idle in a transaction, or one
    /// statement running, past the configured limits.
    pub locks_past_limit: u64,
    /// The longest a server's session stayed idle in a transaction (ms).
    pub longest_idle_in_transaction_ms: u64,
    /// Leases lost or expired by a worker on a slow link.
    pub slow_link_lease_losses: u64,
    /// Leases lost or expired by a worker cut for less than the lease
    /// (allowed: it loses it cleanly).
    pub short_cut_lease_losses: u64,
    /// What went wrong, for the run's examples.
    pub(crate) examples: Vec<String>,
}

impl NetFigures {
    pub fn to_json(&self) -> Value {
        let recovery: BTreeMap<&String, Value> = self
            .first_reply_after_heal
            .iter()
            .map(|(kind, spread)| (kind, spread.to_json()))
            .collect();
        json!({
            "faultsEach": self.faults_each,
            "leaseMs": self.lease_ms,
            "faults": self.faults,
            "rustWorkers": self.rust_workers,
            "jsWorkers": self.js_workers,
            "rustReplies": self.rust_replies,
            "jsReplies": self.js_replies,
            "skewedReplies": self.skewed_replies,
            "concurrentAttempts": self.concurrent_attempts,
            "takeover": self.takeover.to_json(),
            "takeoversLate": self.takeovers_late,
            "halfOpenNoticed": self.half_open_noticed.to_json(),
            "halfOpenUnnoticed": self.half_open_unnoticed,
            "firstReplyAfterHeal": recovery,
            "noReplyAfterHeal": self.no_reply_after_heal,
            "dbCutsWithout503": self.db_cuts_without_503,
            "dbCutsMidTransaction": self.db_cuts_mid_transaction,
            "serverRecovery": self.server_recovery.to_json(),
            "serversNotRecovered": self.servers_not_recovered,
            "otherServerRepliesDuringCuts": self.other_server_replies_during_cuts,
            "locksPastLimit": self.locks_past_limit,
            "longestIdleInTransactionMs": self.longest_idle_in_transaction_ms,
            "slowLinkLeaseLosses": self.slow_link_lease_losses,
            "shortCutLeaseLosses": self.short_cut_lease_losses,
        })
    }

    pub(crate) fn table(&self) -> String {
        let mut out = String::new();
        let faults: Vec<String> = self
            .faults
            .iter()
            .map(|(kind, n)| format!("{kind} {n}"))
            .collect();
        let mut rows = vec![
            ("faults", faults.join(", ")),
            (
                "workers",
                format!("{} Rust, {} JavaScript", self.rust_workers, self.js_workers),
            ),
            (
                "replies by",
                format!(
                    "Rust {}, JavaScript {}, skewed clock {}",
                    self.rust_replies, self.js_replies, self.skewed_replies
                ),
            ),
            ("concurrent attempts", self.concurrent_attempts.to_string()),
            (
                "takeover after a long cut",
                format!(
                    "{} ({} late)",
                    self.takeover.describe(),
                    self.takeovers_late
                ),
            ),
            (
                "half-open noticed",
                format!(
                    "{} ({} not within 20 s)",
                    self.half_open_noticed.describe(),
                    self.half_open_unnoticed
                ),
            ),
            (
                "server cut: 503s",
                format!("{} cuts without one", self.db_cuts_without_503),
            ),
            (
                "server cut mid-transaction",
                format!("{} cuts", self.db_cuts_mid_transaction),
            ),
            (
                "server healthy again",
                format!(
                    "{} ({} not within 5 s)",
                    self.server_recovery.describe(),
                    self.servers_not_recovered
                ),
            ),
            (
                "other server's replies meanwhile",
                self.other_server_replies_during_cuts.to_string(),
            ),
            (
                "past the lock limits",
                format!(
                    "{} samples (longest idle in transaction {} ms)",
                    self.locks_past_limit, self.longest_idle_in_transaction_ms
                ),
            ),
            (
                "leases lost on a slow link",
                self.slow_link_lease_losses.to_string(),
            ),
            (
                "leases lost in a short cut",
                self.short_cut_lease_losses.to_string(),
            ),
            (
                "no reply after a heal",
                self.no_reply_after_heal.to_string(),
            ),
        ];
        for (kind, spread) in &self.first_reply_after_heal {
            rows.push((
                "first reply after heal",
                format!("{kind}: {}", spread.describe()),
            ));
        }
        let width = rows.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
        for (name, value) in rows {
            let _ = writeln!(out, "{name:<width$}  {value}");
        }
        out
    }

    /// The checks of a network soak, in words.
    pub(crate) fn failures(&self) -> Vec<String> {
        let mut failures = Vec::new();
        let zero = [
            ("concurrent attempts", self.concurrent_attempts),
            ("takeovers later than lease + 5 s", self.takeovers_late),
            (
                "half-open sockets not noticed within 20 s",
                self.half_open_unnoticed,
            ),
            ("server cuts without a 503", self.db_cuts_without_503),
            (
                "servers not healthy within 5 s of the heal",
                self.servers_not_recovered,
            ),
            ("samples past the lock limits", self.locks_past_limit),
            ("leases lost on a slow link", self.slow_link_lease_losses),
        ];
        for (name, value) in zero {
            if value != 0 {
                failures.push(format!("{name}: {value}, expected 0"));
            }
        }
        let injected = |kind: &str| self.only.is_empty() || self.only.iter().any(|k| k == kind);
        for kind in super::faults::Kind::ALL {
            if !injected(kind.name()) {
                continue;
            }
            let n = self.faults.get(kind.name()).copied().unwrap_or(0);
            if n < self.faults_each {
                failures.push(format!(
                    "{} faults of kind {}, expected {}",
                    n,
                    kind.name(),
                    self.faults_each
                ));
            }
        }
        let replies = [
            ("Rust workers", self.rust_workers, self.rust_replies),
            ("JavaScript workers", self.js_workers, self.js_replies),
        ];
        for (name, workers, replies) in replies {
            if workers > 0 && replies == 0 {
                failures.push(format!("the {name} replied to nothing"));
            }
        }
        if injected("clock_skew") && self.skewed_replies == 0 {
            failures.push("no worker with a skewed clock replied".to_owned());
        }
        failures
    }
}
