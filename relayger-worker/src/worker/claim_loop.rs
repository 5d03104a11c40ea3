//! The claim loop of [`run_worker`](super::run_worker): claim, run the
//! jobs, wait for a reason to claim again, and on the way out release what
//! is left.

use std::sync::Arc;
use std::time::Duration;

use relayger_core::claim_pacing::{
    ClaimAnswer, NextClaim, Pacing, claim_when_job_ends, next_claim,
};
use relayger_core::wire::{ClaimRequest, Runtime};
use time::OffsetDateTime;
use tokio::task::JoinSet;
use tokio::time::{Instant, sleep_until, timeout};
use tokio_util::sync::CancellationToken;

use super::backoff::{Backoff, jitter};
use super::contacts::ContactTask;
use super::events::{EventSink, WorkerEvent};
use super::job::{JobEnd, JobRunner};
use super::wake::Wakeups;
use super::{Handler, WorkerError};
use crate::client::{Client, ClientError};

/// How long a stopping worker still waits for the claim it has in flight;
/// a claim that ends later leaves its jobs to run out their leases.
const STOPPING_CLAIM_GRACE: Duration = Duration::from_secs(10);

/// What [`drain_finished`] collected.
#[derive(Debug, Default, PartialEq, Eq)]
struct Drained {
    /// At least one job ended normally (or its task failed): a slot is free.
    freed: bool,
    /// Every job that ended had a final result ([`JobEnd::Settled`]).
    all_final: bool,
    /// The first job whose handler ignored its cancellation.
    stuck: Option<String>,
}

/// Joins every job task that has already ended, without waiting.
fn drain_finished(jobs: &mut JoinSet<JobEnd>) -> Drained {
    let mut drained = Drained {
        all_final: true,
        ..Drained::default()
    };
    while let Some(end) = jobs.try_join_next() {
        match end {
            Ok(JobEnd::Stuck { job_key }) => {
                drained.stuck.get_or_insert(job_key);
            }
            Ok(JobEnd::Settled) => drained.freed = true,
            Ok(JobEnd::Done) | Err(_) => {
                drained.freed = true;
                drained.all_final = false;
            }
        }
    }
    drained
}

pub(super) fn unavailable(during: &str, err: &ClientError, retry_in: Duration) -> WorkerEvent {
    WorkerEvent::Unavailable {
        during: during.to_owned(),
        error: err.to_string(),
        retry_in_ms: u64::try_from(retry_in.as_millis()).unwrap_or(u64::MAX),
    }
}

pub(super) struct WorkerLoop<'a, H> {
    pub(super) client: &'a Client,
    pub(super) runtime: Runtime,
    pub(super) runner: Arc<JobRunner<H>>,
    pub(super) cancel: CancellationToken,
    /// Cancelled on the way out: handlers stop, jobs are released.
    pub(super) shutdown: CancellationToken,
    pub(super) events: EventSink,
    /// Reports or accepts contact requests beside the loop.
    pub(super) contacts: ContactTask,
    pub(super) fallback_interval: Duration,
    pub(super) handler_timeout_ms: Option<u64>,
    pub(super) jobs: JoinSet<JobEnd>,
}

impl<H: Handler> WorkerLoop<'_, H> {
    pub(super) async fn run(mut self, wakeups: &Wakeups) -> Result<(), WorkerError> {
        let concurrency = usize::try_from(self.runtime.policy.concurrency.max(1)).unwrap_or(1);
        let mut claim_now = true;
        // The last claim left claimable work behind (`morePending` or
        // `workLeft`): a job's end is then a reason to claim again.
        let mut work_left = true;
        // A socket signal arrived since the last claim.
        let mut signalled = false;
        let mut retry_at: Option<Instant> = None;
        // Idle claims in a row that only `retryAt` woke.
        let mut retry_streak: u32 = 0;
        // The due `retryAt` the last claim was sent at once for.
        let mut previous_due: Option<OffsetDateTime> = None;
        let mut fallback_at = self.next_fallback();
        let mut paused_until: Option<Instant> = None;
        let mut errors = Backoff::new(Duration::from_millis(250), Duration::from_secs(30));
        let mut stuck: Option<String> = None;
        let mut failure: Option<ClientError> = None;

        loop {
            // Collect every job that has already ended, not just the one
            // that woke us: a finished task still counts in `jobs.len()`
            // until it is joined, and counting it made each claim ask for a
            // single job. Draining here lets jobs that end while a claim is
            // in flight be claimed for together by the next one.
            let drained = drain_finished(&mut self.jobs);
            if drained.freed && claim_when_job_ends(work_left, drained.all_final) {
                claim_now = true;
            }
            if let Some(job_key) = drained.stuck {
                stuck.get_or_insert(job_key);
            }
            if self.cancel.is_cancelled() || (stuck.is_some() && self.jobs.is_empty()) {
                break;
            }
            let free = concurrency.saturating_sub(self.jobs.len());
            // A signal while every slot is busy still claims once (for one
            // job: the server counts the leases, so it grants one only if a
            // slot is free there): the answer carries the contact-request
            // count and moves the scan on.
            let probe = signalled && free == 0;
            if claim_now && (free > 0 || probe) && stuck.is_none() && paused_until.is_none() {
                claim_now = false;
                signalled = false;
                let claim_sent = Instant::now();
                let claim = {
                    let claim = self.claim(free.max(1));
                    tokio::pin!(claim);
                    tokio::select! {
                        claim = &mut claim => Some(claim),
                        _ = self.cancel.cancelled() => {
                            // The server may already have granted jobs: let
                            // the claim finish (bounded) and give them back,
                            // so no attempt is spent on a job no handler ran.
                            if let Ok(Ok(granted)) = timeout(STOPPING_CLAIM_GRACE, claim).await {
                                self.runner.release_unstarted(&granted.response.jobs).await;
                            }
                            None
                        }
                    }
                };
                let Some(claim) = claim else {
                    break;
                };
                fallback_at = self.next_fallback();
                match claim {
                    Ok(claim) => {
                        errors.reset();
                        let answer = ClaimAnswer {
                            granted: claim.response.jobs.len(),
                            more_pending: claim.response.more_pending,
                            retry_at: claim.response.retry_at.map(|at| at.0),
                            server_date: claim.server_date,
                        };
                        let pacing = Pacing {
                            local_now: OffsetDateTime::now_utc(),
                            retry_streak,
                            previous_due,
                            fallback: self.fallback_interval,
                        };
                        if answer.granted > 0 {
                            retry_streak = 0;
                        }
                        work_left = claim.response.more_pending || claim.response.work_left;
                        retry_at = None;
                        previous_due = None;
                        match next_claim(answer, pacing) {
                            NextClaim::Now { due } => {
                                claim_now = true;
                                previous_due = due;
                            }
                            NextClaim::After(delay) => retry_at = Some(Instant::now() + delay),
                            NextClaim::OnSignal => {}
                        }
                        for job in claim.response.jobs {
                            self.jobs
                                .spawn(Arc::clone(&self.runner).run(job, claim_sent));
                        }
                        if let Some(count) = claim.contact_requests {
                            self.contacts.observe(count);
                        }
                    }
                    Err(err) if err.is_transient() => {
                        let delay = errors.next_delay();
                        self.events.emit(unavailable("claim", &err, delay));
                        paused_until = Some(Instant::now() + delay);
                        claim_now = true;
                    }
                    Err(err) => {
                        failure = Some(err);
                        break;
                    }
                }
                continue;
            }
            tokio::select! {
                _ = self.cancel.cancelled() => {}
                _ = wakeups.notify.notified() => {
                    claim_now = true;
                    signalled = true;
                    retry_streak = 0;
                }
                _ = sleep_until(retry_at.unwrap_or_else(Instant::now)), if retry_at.is_some() => {
                    retry_at = None;
                    retry_streak = retry_streak.saturating_add(1);
                    claim_now = true;
                }
                _ = sleep_until(fallback_at) => {
                    fallback_at = self.next_fallback();
                    claim_now = true;
                }
                _ = sleep_until(paused_until.unwrap_or_else(Instant::now)), if paused_until.is_some() => {
                    paused_until = None;
                }
                Some(end) = self.jobs.join_next(), if !self.jobs.is_empty() => match end {
                    Ok(JobEnd::Stuck { job_key }) => {
                        stuck.get_or_insert(job_key);
                    }
                    // A slot is free: claim if work was left or the job
                    // may come back.
                    Ok(JobEnd::Settled) => claim_now |= claim_when_job_ends(work_left, true),
                    Ok(JobEnd::Done) | Err(_) => {
                        claim_now |= claim_when_job_ends(work_left, false);
                    }
                },
            }
        }

        // Cancel what still runs (released on the way out) and wait for it;
        // a stuck handler still counts after an interrupt.
        self.shutdown.cancel();
        self.contacts.stop().await;
        while let Some(end) = self.jobs.join_next().await {
            if let Ok(JobEnd::Stuck { job_key }) = end {
                stuck.get_or_insert(job_key);
            }
        }
        match (failure, stuck) {
            (_, Some(job_key)) => Err(WorkerError::HandlerDidNotStop { job_key }),
            (Some(err), None) => Err(WorkerError::Client(err)),
            (None, None) => Ok(()),
        }
    }

    async fn claim(&self, free: usize) -> Result<crate::Claim, ClientError> {
        let request = ClaimRequest {
            max_jobs: Some(u32::try_from(free).unwrap_or(u32::MAX)),
            handler_timeout_ms: self.handler_timeout_ms,
        };
        self.client
            .runtimes()
            .claim(self.runtime.id, &request)
            .await
    }

    fn next_fallback(&self) -> Instant {
        Instant::now() + jitter(self.fallback_interval, 0.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The regression behind one-job claims: after several jobs end, all
    /// of them are collected at once, so the free slots (and the next
    /// claim's `maxJobs`) count every ended job, not one.
    #[tokio::test]
    async fn every_ended_job_is_collected_before_counting_free_slots() {
        let concurrency = 8;
        let mut jobs = JoinSet::new();
        let release = CancellationToken::new();
        let ended = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        for _ in 0..6 {
            let ended = Arc::clone(&ended);
            jobs.spawn(async move {
                ended.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                JobEnd::Done
            });
        }
        for _ in 6..concurrency {
            let release = release.clone();
            jobs.spawn(async move {
                release.cancelled().await;
                JobEnd::Done
            });
        }
        // The test runtime has one thread: a task that counted itself has
        // returned in the same poll, so it has ended once we run again.
        while ended.load(std::sync::atomic::Ordering::SeqCst) < 6 {
            tokio::task::yield_now().await;
        }
        let drained = drain_finished(&mut jobs);
        assert_eq!(
            drained,
            Drained {
                freed: true,
                all_final: false,
                stuck: None
            }
        );
        assert_eq!(concurrency - jobs.len(), 6, "six slots are free at once");

        // Nothing more has ended: draining again frees nothing.
        assert_eq!(
            drain_finished(&mut jobs),
            Drained {
                all_final: true,
                ..Drained::default()
            }
        );
        release.cancel();
        while jobs.join_next().await.is_some() {}
    }

    #[tokio::test]
    async fn a_stuck_job_is_reported_when_drained() {
        let mut jobs = JoinSet::new();
        jobs.spawn(async { JobEnd::Done });
        jobs.spawn(async {
            JobEnd::Stuck {
                job_key: "job_a".to_owned(),
            }
        });
        for _ in 0..64 {
            tokio::task::yield_now().await;
        }
        let drained = drain_finished(&mut jobs);
        assert!(drained.freed);
        assert_eq!(drained.stuck.as_deref(), Some("job_a"));
        assert!(jobs.is_empty());
    }
}
