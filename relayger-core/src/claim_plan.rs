//! How many jobs one claim grants and how it looks for them: the free
//! lease slots, the budget left, how many it wants, the first candidate
//! round (sent before the policy is read), the rounds after it, and the
//! spread over rooms. The store runs the statements; every number they use
//! is decided here, once.

use std::collections::HashMap;

use uuid::Uuid;

use crate::claim_rule::ClaimStop;
use crate::limits::{JOBS_PER_ROOM, claim_size};

/// The most candidates one round locks.
pub const MAX_ROUND: u32 = 512;

/// Candidates a round locks beyond the jobs still wanted, so a few refusals
/// do not cost another round.
pub const ROUND_MARGIN: u32 = 8;

/// Candidates one claim may judge (skips included) before it answers
/// `morePending` instead of going on.
pub const CANDIDATE_BUDGET: usize = 4096;

/// What a claim has read, under the runtime's row lock, when it plans.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClaimInputs {
    /// `maxJobs` as the worker asked (before any cap).
    pub max_jobs: u32,
    /// The policy's `concurrency`.
    pub concurrency: u32,
    /// The runtime's active leases (claimed jobs) now.
    pub active_leases: i64,
    /// The policy's `maxCallsPerHour`.
    pub max_calls_per_hour: u32,
    /// Budget units granted in the rolling hour.
    pub budget_used: i64,
    /// The database's now falls in the policy's active hours.
    pub in_active_hours: bool,
}

/// One claim's plan ([`ClaimPlan::new`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClaimPlan {
    requested: u32,
    free_slots: i64,
    budget_left: i64,
    in_active_hours: bool,
}

impl ClaimPlan {
    /// The plan for `inputs`.
    pub fn new(inputs: ClaimInputs) -> ClaimPlan {
        ClaimPlan {
            requested: inputs.max_jobs,
            free_slots: i64::from(inputs.concurrency) - inputs.active_leases,
            budget_left: i64::from(inputs.max_calls_per_hour) - inputs.budget_used,
            in_active_hours: inputs.in_active_hours,
        }
    }

    /// Lease slots free under the concurrency cap (zero or less at the cap).
    pub fn free_slots(&self) -> i64 {
        self.free_slots
    }

    /// Budget units left in the rolling hour (zero or less when spent).
    pub fn budget_left(&self) -> i64 {
        self.budget_left
    }

    /// How many jobs the runtime could take now: the free slots and the
    /// budget left, none outside the active hours (may be negative).
    pub fn grantable(&self) -> i64 {
        match self.in_active_hours {
            true => self.free_slots.min(self.budget_left),
            false => 0,
        }
    }

    /// How many jobs this claim grants at most: what was asked (capped by
    /// [`claim_size`]) within [`grantable`](Self::grantable).
    pub fn want(&self) -> u32 {
        claim_size(self.requested).min(count(self.grantable()))
    }

    /// The most rows the first round took: [`first_round_limit`] of the
    /// first round's size for what was asked and of the free slots.
    pub fn first_round_limit(&self) -> u32 {
        first_round_limit(first_round_size(self.requested), self.free_slots)
    }

    /// The size of the rounds after the first: the jobs wanted and
    /// [`ROUND_MARGIN`] more, at most [`MAX_ROUND`]. A round that is full
    /// without meeting `want` is followed by one of [`next_round_size`].
    pub fn round_size(&self) -> u32 {
        self.want().saturating_add(ROUND_MARGIN).min(MAX_ROUND)
    }

    /// How the claim stopped, for `morePending`, having granted `granted`
    /// with claimable work left or not.
    pub fn stop(&self, granted: usize, work_left: bool) -> ClaimStop {
        ClaimStop {
            requested: self.requested.max(1),
            grantable: self.grantable(),
            // Saturated: a count past `u32::MAX` compares as no smaller than
            // any request, as the count itself would.
            granted: u32::try_from(granted).unwrap_or(u32::MAX),
            work_left,
        }
    }
}

/// The first candidate round's size, for a claim asking for `max_jobs`:
/// it is sent with the claim's first statements, before the policy and the
/// active leases are known, so it takes what the claim may grant at most
/// and [`ROUND_MARGIN`] more for refusals.
pub fn first_round_size(max_jobs: u32) -> u32 {
    claim_size(max_jobs)
        .saturating_add(ROUND_MARGIN)
        .min(MAX_ROUND)
}

/// The most rows a first round of `size` takes with `free_slots` lease
/// slots free: none at the concurrency cap (a claim of a runtime at its cap
/// locks no job), else at most [`ROUND_MARGIN`] more than the free slots.
/// The store's first round applies this rule in its statement (it runs
/// before the policy is read); its store test holds the two together.
pub fn first_round_limit(size: u32, free_slots: i64) -> u32 {
    match free_slots {
        ..=0 => 0,
        free => size.min(count(free).saturating_add(ROUND_MARGIN)),
    }
}

/// The round after a full one that did not meet `want`: twice as large,
/// at most [`MAX_ROUND`].
pub fn next_round_size(size: u32) -> u32 {
    size.saturating_mul(2).min(MAX_ROUND)
}

/// A count as `u32`: nothing when negative, saturated past `u32::MAX` (it
/// is only ever the smaller side of a `min`).
fn count(n: i64) -> u32 {
    u32::try_from(n.max(0)).unwrap_or(u32::MAX)
}

/// The spread of one claim's grants over rooms: at most [`JOBS_PER_ROOM`]
/// a room, so the finishes that follow do not queue on one room's lock.
#[derive(Debug, Clone, Default)]
pub struct RoomSpread(HashMap<Uuid, usize>);

impl RoomSpread {
    /// Takes one more grant in `room`, or says no when it has its share
    /// (the job stays pending for a later claim).
    pub fn admit(&mut self, room: Uuid) -> bool {
        let granted = self.0.entry(room).or_default();
        if *granted >= JOBS_PER_ROOM {
            return false;
        }
        *granted += 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::MAX_JOBS_PER_CLAIM;

    fn inputs() -> ClaimInputs {
        ClaimInputs {
            max_jobs: 4,
            concurrency: 4,
            active_leases: 0,
            max_calls_per_hour: 100,
            budget_used: 0,
            in_active_hours: true,
        }
    }

    #[test]
    fn free_slots_budget_and_want() {
        // (max_jobs, concurrency, active, calls/hour, used, active hours)
        //   → (free, left, grantable, want)
        type Row = ((u32, u32, i64, u32, i64, bool), (i64, i64, i64, u32));
        let table: [Row; 12] = [
            // Nothing in the way: what was asked.
            ((4, 4, 0, 100, 0, true), (4, 100, 4, 4)),
            // maxJobs 0 asks for one.
            ((0, 4, 0, 100, 0, true), (4, 100, 4, 1)),
            // The per-claim cap.
            (
                (1000, 1000, 0, 1000, 0, true),
                (1000, 1000, 1000, MAX_JOBS_PER_CLAIM),
            ),
            // Two slots taken of four.
            ((4, 4, 2, 100, 0, true), (2, 100, 2, 2)),
            // At the cap, and past it (a lowered concurrency).
            ((4, 4, 4, 100, 0, true), (0, 100, 0, 0)),
            ((4, 2, 5, 100, 0, true), (-3, 100, -3, 0)),
            // The budget: one unit left, none, overdrawn.
            ((4, 4, 0, 10, 9, true), (4, 1, 1, 1)),
            ((4, 4, 0, 10, 10, true), (4, 0, 0, 0)),
            ((4, 4, 0, 10, 12, true), (4, -2, -2, 0)),
            // Outside the active hours nothing is grantable.
            ((4, 4, 0, 100, 0, false), (4, 100, 0, 0)),
            // The smallest of asked, free and left.
            ((8, 6, 1, 10, 7, true), (5, 3, 3, 3)),
            ((2, 6, 1, 10, 0, true), (5, 10, 5, 2)),
        ];
        for ((max_jobs, concurrency, active, calls, used, hours), expected) in table {
            let plan = ClaimPlan::new(ClaimInputs {
                max_jobs,
                concurrency,
                active_leases: active,
                max_calls_per_hour: calls,
                budget_used: used,
                in_active_hours: hours,
            });
            let got = (
                plan.free_slots(),
                plan.budget_left(),
                plan.grantable(),
                plan.want(),
            );
            assert_eq!(got, expected, "{plan:?}");
        }
    }

    #[test]
    fn the_first_round_locks_nothing_at_the_cap_and_a_margin_past_the_free_slots() {
        // (max_jobs, free slots) → (first round size, its limit)
        let table: [((u32, i64), (u32, u32)); 9] = [
            ((1, 64), (9, 9)),
            ((4, 64), (12, 12)),
            ((64, 64), (72, 72)),
            ((1000, 100), (72, 72)),
            // Few free slots: a margin past them.
            ((64, 1), (72, 9)),
            ((64, 10), (72, 18)),
            // At the cap and past it: nothing.
            ((64, 0), (72, 0)),
            ((1, -5), (9, 0)),
            ((1, i64::MAX), (9, 9)),
        ];
        for ((max_jobs, free), (size, limit)) in table {
            assert_eq!(first_round_size(max_jobs), size, "maxJobs {max_jobs}");
            assert_eq!(first_round_limit(size, free), limit, "{size}, {free} free");
            // The plan's own: the free slots of 100 with active leases.
            if free <= 100 {
                let plan = ClaimPlan::new(ClaimInputs {
                    max_jobs,
                    concurrency: 100,
                    active_leases: 100 - free,
                    ..inputs()
                });
                assert_eq!(plan.first_round_limit(), limit, "{plan:?}");
            }
        }
    }

    #[test]
    fn rounds_grow_from_what_is_wanted_to_the_largest() {
        // (want-limiting max_jobs, free slots) → round size
        let table: [(u32, u32, u32); 5] =
            [(1, 4, 9), (4, 4, 12), (64, 64, 72), (4, 0, 8), (1, 1, 9)];
        for (max_jobs, concurrency, size) in table {
            let plan = ClaimPlan::new(ClaimInputs {
                max_jobs,
                concurrency,
                ..inputs()
            });
            assert_eq!(plan.round_size(), size, "{plan:?}");
        }
        let growth: Vec<u32> = std::iter::successors(Some(9), |&size| {
            (size < MAX_ROUND).then(|| next_round_size(size))
        })
        .collect();
        assert_eq!(growth, [9, 18, 36, 72, 144, 288, 512]);
        assert_eq!(next_round_size(MAX_ROUND), MAX_ROUND);
        assert_eq!(next_round_size(u32::MAX), MAX_ROUND);
    }

    #[test]
    fn a_claim_stops_with_what_it_could_grant() {
        // (max_jobs, concurrency, active, in active hours, granted, work left)
        //   → (requested, grantable, more pending)
        type Row = ((u32, u32, i64, bool, usize, bool), (u32, i64, bool));
        let table: [Row; 6] = [
            // Skips spent the budget: claim again.
            ((1, 4, 0, true, 0, true), (1, 4, true)),
            // maxJobs 0 is a request for one.
            ((0, 4, 0, true, 0, true), (1, 4, true)),
            // Got what it asked for.
            ((2, 4, 0, true, 2, true), (2, 4, false)),
            // The cap stopped it.
            ((4, 2, 1, true, 1, true), (4, 1, false)),
            // Outside the active hours.
            ((4, 4, 0, false, 0, true), (4, 0, false)),
            // A count past u32 is not fewer than asked.
            ((4, 4, 0, true, usize::MAX, true), (4, 4, false)),
        ];
        for ((max_jobs, concurrency, active, hours, granted, work_left), expected) in table {
            let plan = ClaimPlan::new(ClaimInputs {
                max_jobs,
                concurrency,
                active_leases: active,
                in_active_hours: hours,
                ..inputs()
            });
            let stop = plan.stop(granted, work_left);
            assert_eq!(
                (stop.requested, stop.grantable, stop.more_pending()),
                expected,
                "{stop:?}"
            );
        }
    }

    #[test]
    fn a_room_takes_its_share_and_no_more() {
        let (a, b) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let mut spread = RoomSpread::default();
        let admitted: Vec<bool> = [a, a, b, a, a, a, b, a]
            .into_iter()
            .map(|room| spread.admit(room))
            .collect();
        assert_eq!(JOBS_PER_ROOM, 4);
        assert_eq!(admitted, [true, true, true, true, true, false, true, false]);
    }
}
