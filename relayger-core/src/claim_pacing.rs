//! When a worker claims again after a claim answered: at once while the
//! server says more work is pending or its `retryAt` is already due, after
//! a future `retryAt` (never sooner than a floor that doubles while such
//! claims find nothing, so a skewed clock cannot cause a busy poll), or only
//! on a signal, a job's end or the fallback poll — and a job's end only
//! counts when work was left behind or the job may come back
//! ([`claim_when_job_ends`]).

use std::time::Duration;

use time::OffsetDateTime;

/// The shortest wait before a claim woken only by a future `retryAt`; it
/// doubles with every such claim in a row that finds nothing.
pub const MIN_RETRY_DELAY: Duration = Duration::from_millis(100);
/// The largest that floor grows.
pub const MAX_RETRY_FLOOR: Duration = Duration::from_secs(5);
/// Clocks closer than this are taken to agree: the local clock (finer than
/// the `Date` header's whole seconds) then measures `retryAt`.
pub const CLOCK_AGREEMENT: time::Duration = time::Duration::seconds(2);
/// The `Date` header's resolution: a `retryAt` less than this after the
/// reference time counts as due now.
pub const DATE_RESOLUTION: time::Duration = time::Duration::seconds(1);

/// What a claim answered, as far as the next claim's timing goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClaimAnswer {
    /// How many jobs it granted.
    pub granted: usize,
    /// `morePending`: claimable work was left (candidate rounds spent on
    /// skips, or fewer granted than asked while more wait).
    pub more_pending: bool,
    /// `retryAt` (idle answers only), on the database clock.
    pub retry_at: Option<OffsetDateTime>,
    /// The response's `Date` header.
    pub server_date: Option<OffsetDateTime>,
}

/// The loop's state the rule needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pacing {
    /// The local wall clock when the answer arrived.
    pub local_now: OffsetDateTime,
    /// Idle claims in a row that only a `retryAt` timer woke.
    pub retry_streak: u32,
    /// The `retryAt` the previous claim was sent at once for: the same one
    /// again is not due (it was not what the server meant by "now").
    pub previous_due: Option<OffsetDateTime>,
    /// The fallback poll's interval: no wait is longer.
    pub fallback: Duration,
}

/// When to claim next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextClaim {
    /// At once (if a slot is free; else as soon as one is).
    Now {
        /// The due `retryAt` this claim answers, to pass as
        /// [`Pacing::previous_due`].
        due: Option<OffsetDateTime>,
    },
    /// After this long, unless a signal comes first.
    After(Duration),
    /// On a signal, a job's end or the fallback poll.
    OnSignal,
}

/// The rule; see the module docs.
pub fn next_claim(answer: ClaimAnswer, pacing: Pacing) -> NextClaim {
    if answer.more_pending {
        return NextClaim::Now { due: None };
    }
    if answer.granted > 0 {
        return NextClaim::OnSignal;
    }
    let Some(at) = answer.retry_at else {
        return NextClaim::OnSignal;
    };
    let reference = match answer.server_date {
        Some(date) if (pacing.local_now - date).abs() >= CLOCK_AGREEMENT => date,
        _ => pacing.local_now,
    };
    if at < reference + DATE_RESOLUTION && pacing.previous_due != Some(at) {
        return NextClaim::Now { due: Some(at) };
    }
    let ahead = Duration::try_from(at - reference).unwrap_or(Duration::ZERO);
    let floor = MIN_RETRY_DELAY
        .saturating_mul(1_u32 << pacing.retry_streak.min(6))
        .min(MAX_RETRY_FLOOR);
    NextClaim::After(ahead.max(floor).min(pacing.fallback))
}

/// Whether a job's end is a reason to claim again. Yes when the last claim
/// said claimable work was left behind (`morePending` or `workLeft`: its
/// own request, the concurrency cap or the per-room spread stopped it), or
/// when the job may come back (it failed, was released or lost its lease:
/// only a claim learns its retry time). A job that ended with a final
/// result after a claim that left nothing behind frees a slot nobody is
/// waiting for: a signal, `retryAt` or the fallback poll claims next.
pub fn claim_when_job_ends(last_claim_left_work: bool, job_was_final: bool) -> bool {
    last_claim_left_work || !job_was_final
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::*;

    const NOW: OffsetDateTime = datetime!(2026-01-01 12:00:00.400 UTC);
    const DATE: OffsetDateTime = datetime!(2026-01-01 12:00:00 UTC);
    const FALLBACK: Duration = Duration::from_secs(30);

    fn ms(ms: i64) -> time::Duration {
        time::Duration::milliseconds(ms)
    }

    fn idle(retry_at: Option<OffsetDateTime>, server_date: Option<OffsetDateTime>) -> ClaimAnswer {
        ClaimAnswer {
            granted: 0,
            more_pending: false,
            retry_at,
            server_date,
        }
    }

    fn pacing(streak: u32, previous_due: Option<OffsetDateTime>) -> Pacing {
        Pacing {
            local_now: NOW,
            retry_streak: streak,
            previous_due,
            fallback: FALLBACK,
        }
    }

    #[test]
    fn next_claim_table() {
        let skewed_date = NOW + time::Duration::minutes(5);
        let table: [(&str, ClaimAnswer, Pacing, NextClaim); 14] = [
            (
                "more pending, nothing granted (skips)",
                ClaimAnswer {
                    more_pending: true,
                    ..idle(None, Some(DATE))
                },
                pacing(3, None),
                NextClaim::Now { due: None },
            ),
            (
                "more pending, fewer granted than asked",
                ClaimAnswer {
                    granted: 1,
                    more_pending: true,
                    ..idle(None, Some(DATE))
                },
                pacing(0, None),
                NextClaim::Now { due: None },
            ),
            (
                "granted, nothing more pending: wait for a job's end",
                ClaimAnswer {
                    granted: 2,
                    ..idle(None, Some(DATE))
                },
                pacing(0, None),
                NextClaim::OnSignal,
            ),
            (
                "idle without retryAt",
                idle(None, Some(DATE)),
                pacing(0, None),
                NextClaim::OnSignal,
            ),
            (
                "retryAt now (database clock ahead of the Date second)",
                idle(Some(DATE + ms(350)), Some(DATE)),
                pacing(4, None),
                NextClaim::Now {
                    due: Some(DATE + ms(350)),
                },
            ),
            (
                "retryAt before the Date",
                idle(Some(DATE - ms(2000)), Some(DATE)),
                pacing(6, None),
                NextClaim::Now {
                    due: Some(DATE - ms(2000)),
                },
            ),
            (
                "the same due retryAt again: the floor, not a busy poll",
                idle(Some(NOW + ms(300)), Some(DATE)),
                pacing(0, Some(NOW + ms(300))),
                NextClaim::After(Duration::from_millis(300)),
            ),
            (
                "the same due retryAt again, already passed: the floor",
                idle(Some(NOW - ms(300)), Some(DATE)),
                pacing(2, Some(NOW - ms(300))),
                NextClaim::After(Duration::from_millis(400)),
            ),
            (
                "future retryAt: its distance",
                idle(Some(NOW + ms(2500)), Some(DATE)),
                pacing(0, None),
                NextClaim::After(Duration::from_millis(2500)),
            ),
            (
                "future retryAt closer than the floor",
                idle(Some(NOW + ms(1200)), Some(DATE)),
                pacing(5, None),
                NextClaim::After(Duration::from_millis(3200)),
            ),
            (
                "the floor stops growing",
                idle(Some(NOW + ms(1200)), Some(DATE)),
                pacing(30, None),
                NextClaim::After(MAX_RETRY_FLOOR),
            ),
            (
                "never later than the fallback poll",
                idle(Some(NOW + time::Duration::hours(2)), Some(DATE)),
                pacing(0, None),
                NextClaim::After(FALLBACK),
            ),
            (
                "a skewed local clock: the Date measures",
                idle(Some(skewed_date + ms(3000)), Some(skewed_date)),
                pacing(0, None),
                NextClaim::After(Duration::from_millis(3000)),
            ),
            (
                "a skewed local clock, retryAt at the Date: due",
                idle(Some(skewed_date), Some(skewed_date)),
                pacing(0, None),
                NextClaim::Now {
                    due: Some(skewed_date),
                },
            ),
        ];
        for (case, answer, pacing, expected) in table {
            assert_eq!(next_claim(answer, pacing), expected, "{case}");
        }
    }

    #[test]
    fn claim_when_job_ends_table() {
        // (last claim left work, job final, claim again)
        let table = [
            (true, true, true),
            (true, false, true),
            (false, false, true),
            (false, true, false),
        ];
        for (left_work, final_result, expected) in table {
            assert_eq!(
                claim_when_job_ends(left_work, final_result),
                expected,
                "left work {left_work}, final {final_result}"
            );
        }
    }

    #[test]
    fn without_a_date_header_the_local_clock_measures() {
        assert_eq!(
            next_claim(idle(Some(NOW + ms(500)), None), pacing(0, None)),
            NextClaim::Now {
                due: Some(NOW + ms(500))
            }
        );
        assert_eq!(
            next_claim(idle(Some(NOW + ms(1500)), None), pacing(0, None)),
            NextClaim::After(Duration::from_millis(1500))
        );
    }
}
