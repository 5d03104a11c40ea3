//! When a worker claims again after a claim answered: at once while the
//! server says more work is pending or its `retryAt` is already due, after
//! a future `retryAt` (never sooner than a floor that doubles while such
//! claims find nothing, so a skewed clock cannot cause a busy poll), or only
//! on a signal, a job's end or the fallback poll — and a job's end only
//! counts when work was left behind or the job may come back
//! ([`claim_when_job_ends`]). A granting answer's `retryAt` (another
//! lease's expiry, a retried job's backoff) counts as an idle one's: a job
//! whose owner was cut off is taken over moments after its lease, not at
//! the fallback poll. The cases are a shared fixture
//! (`fixtures/claim-pacing.json`) the JavaScript SDK is held to as well.

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
    /// `retryAt`, on the database clock: when anything may become
    /// claimable without a signal (for a granting answer, not its own
    /// grants).
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
    // A granting answer's `retryAt` too: a job may come back then (another
    // lease expires, a backoff ends), and only a claim takes it.
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
pub(crate) mod tests {
    use serde_json::Value;
    use time::format_description::well_known::Rfc3339;

    use super::*;

    /// The shared fixture: the JavaScript SDK's `claim-pacing.js` is held
    /// to the same cases, so the two workers cannot drift apart.
    const FIXTURE: &str = include_str!("../fixtures/claim-pacing.json");

    fn instant(value: &Value) -> Option<OffsetDateTime> {
        value
            .as_str()
            .map(|at| OffsetDateTime::parse(at, &Rfc3339).expect("RFC 3339"))
    }

    fn count(value: &Value) -> u64 {
        value.as_u64().expect("a count")
    }

    fn expected(case: &Value) -> NextClaim {
        let expect = &case["expect"];
        if expect == "onSignal" {
            NextClaim::OnSignal
        } else if let Some(due) = expect.get("now") {
            NextClaim::Now { due: instant(due) }
        } else {
            NextClaim::After(Duration::from_millis(count(&expect["afterMs"])))
        }
    }

    /// Checks every case of the fixture `doc` against the rule; the number
    /// of cases checked.
    pub(crate) fn check_fixture(doc: &Value) -> usize {
        let fallback = Duration::from_millis(count(&doc["fallbackMs"]));
        let mut checked = 0;
        for case in doc["nextClaim"].as_array().expect("nextClaim cases") {
            let (answer, pacing) = (&case["answer"], &case["pacing"]);
            let answer = ClaimAnswer {
                granted: usize::try_from(count(&answer["granted"])).expect("granted"),
                more_pending: answer["morePending"].as_bool().expect("morePending"),
                retry_at: instant(&answer["retryAt"]),
                server_date: instant(&answer["serverDate"]),
            };
            let pacing = Pacing {
                local_now: instant(&pacing["localNow"]).expect("localNow"),
                retry_streak: u32::try_from(count(&pacing["retryStreak"])).expect("streak"),
                previous_due: instant(&pacing["previousDue"]),
                fallback,
            };
            assert_eq!(
                next_claim(answer, pacing),
                expected(case),
                "{}",
                case["name"]
            );
            checked += 1;
        }
        for case in doc["claimWhenJobEnds"]
            .as_array()
            .expect("claimWhenJobEnds")
        {
            let left_work = case["lastClaimLeftWork"].as_bool().expect("left work");
            let final_result = case["jobWasFinal"].as_bool().expect("final");
            assert_eq!(
                claim_when_job_ends(left_work, final_result),
                case["claim"].as_bool().expect("claim"),
                "left work {left_work}, final {final_result}"
            );
            checked += 1;
        }
        checked
    }

    #[test]
    fn the_rule_follows_the_shared_fixture() {
        let doc: Value = serde_json::from_str(FIXTURE).expect("json");
        assert_eq!(check_fixture(&doc), 23);
    }
}
