//! When a claim tells the worker to claim again at once (`morePending`).
//!
//! A claim judges candidates within a bounded budget (refusals turn into
//! skips as it goes). When it stops with claimable work it did not reach,
//! the worker should not wait for a signal or for a job to end: it claims
//! again as soon as it has a free slot.

/// What one claim saw when it stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClaimStop {
    /// How many jobs the worker asked for (`maxJobs`, before any cap).
    pub requested: u32,
    /// How many the runtime could grant now: free concurrency slots and
    /// budget left, zero outside the active hours.
    pub grantable: i64,
    /// How many this claim granted.
    pub granted: u32,
    /// Claimable work was left unexamined: the candidate budget ran out,
    /// the last batch was full, or changed rooms are still unscanned.
    pub work_left: bool,
}

impl ClaimStop {
    /// True when claiming again at once could grant more: work is left, the
    /// worker wanted more than it got, and the runtime had room for more.
    /// Never true when the concurrency cap, the hourly budget or the active
    /// hours were what stopped the claim (claiming again would only spin).
    pub fn more_pending(&self) -> bool {
        self.work_left && self.granted < self.requested && i64::from(self.granted) < self.grantable
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn more_pending_only_when_claiming_again_could_grant_more() {
        // (requested, grantable, granted, work_left, more_pending)
        let table: [(u32, i64, u32, bool, bool); 10] = [
            // Budget spent on skips, nothing granted: claim again.
            (1, 1, 0, true, true),
            // Granted fewer than asked with work left: claim again.
            (4, 4, 1, true, true),
            // The per-claim cap granted 64 of 100 asked: claim again.
            (100, 200, 64, true, true),
            // Everything examined: nothing to claim again for.
            (1, 1, 0, false, false),
            (4, 4, 1, false, false),
            // Got all it asked for: no free slot is waiting.
            (2, 5, 2, true, false),
            // The concurrency cap or the hourly budget stopped it.
            (4, 1, 1, true, false),
            (4, 0, 0, true, false),
            // Outside the active hours (grantable 0) or a negative budget.
            (1, -3, 0, true, false),
            (1, 0, 0, false, false),
        ];
        for (requested, grantable, granted, work_left, expected) in table {
            let stop = ClaimStop {
                requested,
                grantable,
                granted,
                work_left,
            };
            assert_eq!(stop.more_pending(), expected, "{stop:?}");
        }
    }
}
