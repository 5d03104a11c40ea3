//! The kinds of network fault and the record of each one injected.

use std::time::Duration;

use super::super::rng::SplitMix64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A worker's link down for longer than the lease (silently).
    LongCut,
    /// A worker's link down for less than the lease.
    ShortCut,
    /// A server's link to PostgreSQL down (the other server carries on).
    DbCut,
    /// The server's half of a worker's connections stalled: the worker
    /// still sends, nothing comes back, no FIN, no RST.
    HalfOpen,
    /// Hundreds of ms added to a worker's link each way.
    SlowLink,
    /// A worker restarted with its wall clock minutes off (libfaketime).
    ClockSkew,
}

impl Kind {
    pub(crate) const ALL: [Kind; 6] = [
        Kind::LongCut,
        Kind::ShortCut,
        Kind::DbCut,
        Kind::HalfOpen,
        Kind::SlowLink,
        Kind::ClockSkew,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::LongCut => "worker_cut_past_lease",
            Kind::ShortCut => "worker_cut_within_lease",
            Kind::DbCut => "server_cut_from_db",
            Kind::HalfOpen => "half_open_socket",
            Kind::SlowLink => "slow_link",
            Kind::ClockSkew => "clock_skew",
        }
    }

    /// How long a fault of this kind lasts (the half-open one outlasts the
    /// 20 s within which it must be noticed only slightly).
    pub(crate) fn duration(self, lease_ms: u64, rng: &mut SplitMix64) -> Duration {
        let ms = match self {
            Kind::LongCut => lease_ms + 1000 + rng.below(3000),
            Kind::ShortCut => lease_ms / 5 + rng.below(lease_ms * 2 / 5),
            Kind::DbCut => 3000 + rng.below(17_000),
            Kind::HalfOpen => 21_000,
            Kind::SlowLink => 5000 + rng.below(7000),
            Kind::ClockSkew => 8000 + rng.below(7000),
        };
        Duration::from_millis(ms)
    }

    /// Whether it concerns a worker slot (else a server).
    pub(crate) fn on_worker(self) -> bool {
        self != Kind::DbCut
    }
}

/// One fault, as injected.
#[derive(Debug, Clone)]
pub(crate) struct Fault {
    pub(crate) kind: Kind,
    /// The worker slot or the server.
    pub(crate) target: usize,
    pub(crate) start_ms: i64,
    pub(crate) heal_ms: Option<i64>,
    /// The worker generations it concerned.
    pub(crate) generations: Vec<usize>,
    /// A server cut: when `/healthz` first answered 503 during it.
    pub(crate) first_503_ms: Option<i64>,
    /// A server cut: when `/healthz` answered 200 again after the heal.
    pub(crate) healthy_ms: Option<i64>,
    /// A server cut: the server's transactions it caught open.
    pub(crate) open_transactions: u64,
}
