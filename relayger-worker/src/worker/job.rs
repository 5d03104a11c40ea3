//! One leased job from claim to finish: run the handler, heartbeat the
//! lease at a third of its local run limit, counted from the claim's send
//! (beside the handler, never holding the job's loop up; a slow heartbeat
//! does not hold the next one up either), cancel the handler on timeout, lease loss, shutdown or
//! when the lease could not be renewed in time (a local monotonic deadline,
//! ahead of the server's expiry), give it its grace, then finish, fail or
//! release.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use relayger_core::ErrorCode;
use relayger_core::lease::{local_run_limit_ms, worker_heartbeat_ms};
use relayger_core::wire::{
    ClaimedJob, FinishOutcome, FinishRequest, FinishResponse, JobResult, LeaseRequest,
};
use tokio::task::JoinHandle;
use tokio::time::{Instant, MissedTickBehavior, sleep, sleep_until, timeout};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::backoff::Backoff;
use super::events::{EventSink, WorkerEvent};
use super::finisher::Finisher;
use super::handler::{Handler, HandlerError, HandlerInput, HandlerOutput};
use crate::client::{Client, ClientError};

/// How long a cancelled handler may still run before the worker gives up
/// on it (`handler_did_not_stop`).
pub(crate) const CANCEL_GRACE: Duration = Duration::from_secs(1);
/// The same for a handler that [stops itself](Handler::stops_itself): its
/// runner's own grace and hard kill, plus time to reap its processes.
pub(crate) const SELF_STOPPING_GRACE: Duration = Duration::from_secs(10);
/// A release on shutdown must not hold the stop up for long: if it fails,
/// the lease simply runs out.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a stopping worker still waits for a finish to be confirmed.
const STOPPING_FINISH_GRACE: Duration = RELEASE_TIMEOUT;
/// Heartbeats never come faster than this, whatever the lease.
const MIN_HEARTBEAT: Duration = Duration::from_millis(100);
/// At most this many heartbeats of one job in flight (over a slow link the
/// next goes out before the last answered; on a dead one they stop piling
/// up): the run limit holds three periods.
const MAX_BEATS_IN_FLIGHT: usize = 3;

/// The failed-attempt codes the worker itself writes.
const HANDLER_TIMEOUT: &str = "handler_timeout";
const HANDLER_PANICKED: &str = "handler_panicked";
const INVALID_RESULT: &str = "invalid_handler_result";
/// The lease could not be renewed before the local deadline.
const LEASE_EXPIRED: &str = "lease_expired";

/// Everything a job needs from the worker that claimed it.
pub(crate) struct JobRunner<H> {
    pub(crate) client: Client,
    /// Sends this worker's finishes, those ready together in one request.
    pub(crate) finisher: Finisher,
    pub(crate) runtime_id: Uuid,
    pub(crate) handler: Arc<H>,
    pub(crate) events: EventSink,
    /// Fires when the worker stops: handlers are cancelled, jobs released.
    pub(crate) shutdown: CancellationToken,
}

/// How a job's task ended.
#[derive(Debug)]
pub(crate) enum JobEnd {
    /// Failed, released, lost, refused or not confirmed: the slot is free
    /// and the job may come back.
    Done,
    /// The server recorded an end the job does not come back from (a
    /// reply, a skip, an empty completion or a dead letter): the slot is
    /// free and the job is not expected back.
    Settled,
    /// The handler ignored its cancellation: the worker must stop.
    Stuck { job_key: String },
}

/// Why a running handler was cancelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Interruption {
    Timeout,
    LeaseLost,
    /// Not renewed in time: cancelled before the server's expiry.
    LeaseExpired,
    /// The asker canceled the question (a heartbeat's answer).
    QuestionCanceled,
    Shutdown,
}

/// A finish without the server's outcome.
enum Unconfirmed {
    /// The server refused it, or could not be reached for a whole lease.
    Refused(ClientError),
    /// The worker stopped before the server answered.
    Abandoned,
}

enum Beat {
    /// Renewed for this long from the server's handling of the request.
    Renewed {
        lease_ms: u64,
    },
    /// The server could not be reached; the next beat tries again.
    Missed,
    Lost,
    /// The asker canceled the question: the job ended on the server.
    Canceled,
}

impl<H: Handler> JobRunner<H> {
    /// Runs `job`, whose claim request was sent at `claim_sent`.
    pub(crate) async fn run(self: Arc<Self>, job: ClaimedJob, claim_sent: Instant) -> JobEnd {
        self.events.emit(WorkerEvent::Claimed {
            job_id: job.job_id,
            job_key: job.job_key.clone(),
            conversation_id: job.message.conversation_id,
            message_id: job.message.message_id,
            attempt: job.attempt,
            handler_timeout_ms: job.handler_timeout_ms,
        });
        let lease = LeaseRequest {
            owner: job.owner.clone(),
            version: job.version,
        };
        let cancel = self.shutdown.child_token();
        let mut work = self.spawn_handler(&job, cancel.clone());

        let handler_deadline = Instant::now() + Duration::from_millis(job.handler_timeout_ms);
        let mut interruption: Option<Interruption> = None;
        // Set once the handler is cancelled: when its extra second ends.
        let mut grace_end: Option<Instant> = None;
        let grace = if self.handler.stops_itself() {
            SELF_STOPPING_GRACE
        } else {
            CANCEL_GRACE
        };
        let stop_ms = u64::try_from(grace.as_millis()).unwrap_or(u64::MAX);
        let run_limit = |sent: Instant, lease_ms: u64| {
            sent + Duration::from_millis(local_run_limit_ms(lease_ms, stop_ms))
        };
        // Counted from the claim's send, like the lease: over a slow link
        // the claim's answer took a good part of the run limit already, and
        // a first heartbeat a whole period after the answer came back too
        // late (a 3 s lease over 400 ms each way was lost by any handler
        // running past the 2 s limit).
        let every =
            Duration::from_millis(worker_heartbeat_ms(job.lease_ms, stop_ms)).max(MIN_HEARTBEAT);
        let mut heartbeats = tokio::time::interval_at(claim_sent + every, every);
        heartbeats.set_missed_tick_behavior(MissedTickBehavior::Delay);
        // When the handler must be cancelled unless a heartbeat renews the
        // lease first: measured from the request's send, on the monotonic
        // clock, so it is ahead of the server's expiry.
        let mut lease_deadline = run_limit(claim_sent, job.lease_ms);
        // The heartbeats in flight, each with when it was sent. Each may take
        // until the lease deadline as it was when it left (a later answer
        // renews less than the deadline already allows), and none is given
        // up earlier: dropping one closes its connection, so the next beat
        // would pay for a new one.
        let mut beats = FuturesUnordered::new();

        let joined = loop {
            let interrupt =
                |why: Interruption, interruption: &mut Option<_>, grace_end: &mut Option<_>| {
                    cancel.cancel();
                    *interruption = Some(why);
                    grace_end.get_or_insert_with(|| Instant::now() + grace);
                };
            let renewing = !matches!(
                interruption,
                Some(
                    Interruption::LeaseLost
                        | Interruption::LeaseExpired
                        | Interruption::QuestionCanceled
                )
            );
            tokio::select! {
                biased;
                joined = &mut work => break Some(joined),
                _ = sleep_until(grace_end.unwrap_or_else(Instant::now)), if grace_end.is_some() => {
                    break None;
                }
                _ = self.shutdown.cancelled(), if interruption.is_none() => {
                    interrupt(Interruption::Shutdown, &mut interruption, &mut grace_end);
                }
                _ = sleep_until(lease_deadline), if renewing => {
                    beats.clear();
                    interrupt(Interruption::LeaseExpired, &mut interruption, &mut grace_end);
                }
                _ = sleep_until(handler_deadline), if interruption.is_none() => {
                    interrupt(Interruption::Timeout, &mut interruption, &mut grace_end);
                }
                Some((sent, outcome)) = beats.next(), if !beats.is_empty() => {
                    match outcome {
                        Beat::Renewed { lease_ms } if renewing => {
                            // Answers may come out of order.
                            lease_deadline = lease_deadline.max(run_limit(sent, lease_ms));
                        }
                        Beat::Lost if renewing => {
                            interrupt(Interruption::LeaseLost, &mut interruption, &mut grace_end);
                        }
                        Beat::Canceled if renewing => {
                            interrupt(
                                Interruption::QuestionCanceled,
                                &mut interruption,
                                &mut grace_end,
                            );
                        }
                        _ => {}
                    }
                }
                _ = heartbeats.tick(), if renewing && beats.len() < MAX_BEATS_IN_FLIGHT => {
                    let sent = Instant::now();
                    let within = lease_deadline.saturating_duration_since(sent);
                    let (runner, job, lease) = (&*self, &job, &lease);
                    beats.push(async move { (sent, runner.heartbeat(job, lease, within).await) });
                }
            }
        };
        // Unfinished heartbeats borrow the job; they are of no use now.
        drop(beats);
        // The handler's token is a child of the worker's: on shutdown it may
        // have returned before the shutdown arm above was seen.
        if interruption.is_none() && self.shutdown.is_cancelled() {
            interruption = Some(Interruption::Shutdown);
        }

        let Some(joined) = joined else {
            // Best effort: a handler stuck at an await point stops there;
            // one that blocks its thread cannot be stopped from here.
            work.abort();
            return JobEnd::Stuck {
                job_key: job.job_key,
            };
        };
        let result = joined.unwrap_or_else(|err| {
            Err(HandlerError::new(if err.is_panic() {
                HANDLER_PANICKED
            } else {
                super::handler::CANCELLED
            }))
        });
        // Settled only when the server recorded an end the job does not
        // come back from: a handler's result it refused (a stale note…) is
        // a failed attempt that is retried.
        let settled = match (interruption, result) {
            (Some(Interruption::LeaseLost), _) => {
                self.failed(&job, ErrorCode::LeaseLost.as_str());
                false
            }
            (Some(Interruption::QuestionCanceled), _) => {
                self.canceled(&job);
                true
            }
            (Some(Interruption::LeaseExpired), _) => {
                self.after_expiry(&job, &lease, every).await;
                false
            }
            (Some(Interruption::Shutdown), Err(_)) => {
                self.release(&job, &lease).await;
                false
            }
            (Some(Interruption::Timeout), result) => {
                let usage = match result {
                    Ok(output) => output.usage,
                    Err(err) => err.usage,
                };
                let failed = JobResult {
                    error: Some(HANDLER_TIMEOUT.into()),
                    usage,
                    ..JobResult::default()
                };
                self.finish(&job, &lease, failed).await
            }
            (_, Ok(output)) => self.finish(&job, &lease, job_result(output)).await,
            (None, Err(err)) => {
                let failed = JobResult {
                    error: Some(err.code),
                    usage: err.usage,
                    ..JobResult::default()
                };
                self.finish(&job, &lease, failed).await
            }
        };
        if settled {
            JobEnd::Settled
        } else {
            JobEnd::Done
        }
    }

    /// Opens a sealed message with the profile key, then runs the handler,
    /// on its own task so that a handler that ignores cancellation cannot
    /// hold the heartbeats or the worker up.
    fn spawn_handler(
        &self,
        job: &ClaimedJob,
        cancel: CancellationToken,
    ) -> JoinHandle<Result<HandlerOutput, HandlerError>> {
        let handler = Arc::clone(&self.handler);
        let client = self.client.clone();
        let message = job.message.clone();
        let attempt = job.attempt;
        let job_key = job.job_key.clone();
        let runtime_id = self.runtime_id;
        let timeout_ms = job.handler_timeout_ms;
        tokio::spawn(async move {
            let opened = match message.sealed {
                Some(_) => client.open_message(message.clone()).await.opened,
                None => None,
            };
            let input = HandlerInput {
                message,
                opened,
                attempt,
                job_key,
                runtime_id,
                timeout_ms,
                cancel,
            };
            handler.handle(input).await
        })
    }

    async fn heartbeat(&self, job: &ClaimedJob, lease: &LeaseRequest, within: Duration) -> Beat {
        let beat = self
            .client
            .runtimes()
            .heartbeat(self.runtime_id, job.job_id, lease);
        match timeout(within, beat).await {
            Ok(Ok(renewed)) => Beat::Renewed {
                lease_ms: renewed.lease_ms,
            },
            Err(_) => Beat::Missed,
            Ok(Err(err)) if err.is_transient() => Beat::Missed,
            Ok(Err(err)) if is_canceled(&err) => Beat::Canceled,
            Ok(Err(_)) => Beat::Lost,
        }
    }

    /// The handler was cancelled because its lease was not renewed in time:
    /// one more heartbeat learns the truth. Refused: the lease is lost (as
    /// the server says); renewed after all: the job is given back; no
    /// answer: the lease runs out on the server, which retries the job.
    async fn after_expiry(&self, job: &ClaimedJob, lease: &LeaseRequest, within: Duration) {
        match self.heartbeat(job, lease, within).await {
            Beat::Renewed { .. } => self.release(job, lease).await,
            Beat::Lost => self.failed(job, ErrorCode::LeaseLost.as_str()),
            Beat::Canceled => self.canceled(job),
            Beat::Missed => self.failed(job, LEASE_EXPIRED),
        }
    }

    /// Commits the result. A result the server rolls back (stale note
    /// version, lost permission, …) becomes a failed attempt with that code,
    /// retried by the server with backoff. True when the server recorded an
    /// end the job does not come back from.
    async fn finish(&self, job: &ClaimedJob, lease: &LeaseRequest, result: JobResult) -> bool {
        let refused = match self.finish_with_retries(job, lease, &result).await {
            Ok(response) => return self.report(job, &result, response),
            Err(Unconfirmed::Abandoned) => {
                self.failed(job, ErrorCode::Unavailable.as_str());
                return false;
            }
            Err(Unconfirmed::Refused(err)) => err,
        };
        if is_canceled(&refused) {
            self.canceled(job);
            return true;
        }
        if is_fence_error(&refused) || result.error.is_some() || refused.is_transient() {
            self.failed(job, &error_code(&refused));
            return false;
        }
        let failed = JobResult {
            error: Some(error_code(&refused)),
            usage: result.usage,
            ..JobResult::default()
        };
        match self.finish_with_retries(job, lease, &failed).await {
            Ok(response) => self.report(job, &failed, response),
            Err(Unconfirmed::Refused(again)) if is_canceled(&again) => {
                self.canceled(job);
                true
            }
            Err(Unconfirmed::Refused(again)) => {
                self.failed(job, &error_code(&again));
                false
            }
            Err(Unconfirmed::Abandoned) => {
                self.failed(job, ErrorCode::Unavailable.as_str());
                false
            }
        }
    }

    /// Sends the finish, again while the server is unreachable (the same
    /// result has the same fingerprint, so a finish that did commit returns
    /// its first outcome), for at most about one lease — and when the worker
    /// is stopping, for at most a few more seconds: the lease then runs out
    /// and the job is retried.
    async fn finish_with_retries(
        &self,
        job: &ClaimedJob,
        lease: &LeaseRequest,
        result: &JobResult,
    ) -> Result<FinishResponse, Unconfirmed> {
        let body = FinishRequest {
            owner: lease.owner.clone(),
            version: lease.version,
            result: result.clone(),
        };
        let give_up = Instant::now() + Duration::from_millis(job.lease_ms);
        let mut backoff = Backoff::new(Duration::from_millis(250), Duration::from_secs(4));
        let attempts = async {
            loop {
                let outcome = self.finisher.finish(job.job_id, &body).await;
                match outcome {
                    Err(err) if err.is_transient() && Instant::now() < give_up => {
                        sleep(backoff.next_delay()).await;
                    }
                    outcome => return outcome,
                }
            }
        };
        let stopping = async {
            self.shutdown.cancelled().await;
            sleep(STOPPING_FINISH_GRACE).await;
        };
        tokio::select! {
            outcome = attempts => outcome.map_err(Unconfirmed::Refused),
            () = stopping => Err(Unconfirmed::Abandoned),
        }
    }

    /// Gives back jobs a claim granted while the worker was stopping,
    /// without running them: pending again, no attempt spent.
    pub(crate) async fn release_unstarted(&self, jobs: &[ClaimedJob]) {
        let releases = jobs.iter().map(|job| {
            let lease = LeaseRequest {
                owner: job.owner.clone(),
                version: job.version,
            };
            async move { self.release(job, &lease).await }
        });
        futures_util::future::join_all(releases).await;
    }

    async fn release(&self, job: &ClaimedJob, lease: &LeaseRequest) {
        let release = self
            .client
            .runtimes()
            .release(self.runtime_id, job.job_id, lease);
        match timeout(RELEASE_TIMEOUT, release).await {
            Ok(Ok(_)) => self.events.emit(WorkerEvent::Released {
                job_key: job.job_key.clone(),
                message_id: job.message.message_id,
            }),
            Ok(Err(err)) if is_canceled(&err) => self.canceled(job),
            Ok(Err(err)) => self.failed(job, &error_code(&err)),
            Err(_) => self.failed(job, ErrorCode::Unavailable.as_str()),
        }
    }

    /// The asker canceled the question while this worker held it: nothing
    /// of the attempt is written, and the job does not come back.
    fn canceled(&self, job: &ClaimedJob) {
        self.events.emit(WorkerEvent::Canceled {
            job_key: job.job_key.clone(),
            message_id: job.message.message_id,
        });
    }

    /// The event for the server's outcome of `sent`; true when that outcome
    /// ends the job for good (it will not be offered again).
    fn report(&self, job: &ClaimedJob, sent: &JobResult, response: FinishResponse) -> bool {
        let last = !matches!(response.outcome, FinishOutcome::Failed);
        let job_key = job.job_key.clone();
        let message_id = job.message.message_id;
        let error = sent.error.clone().unwrap_or_default();
        let event = match response.outcome {
            FinishOutcome::Replied => WorkerEvent::Replied {
                job_key,
                message_id,
                reply_message_id: response.reply_message_id,
            },
            FinishOutcome::Skipped => WorkerEvent::Skipped {
                job_key,
                message_id,
                reason: sent.skip.clone().unwrap_or_default(),
            },
            FinishOutcome::Handled => WorkerEvent::Handled {
                job_key,
                message_id,
            },
            FinishOutcome::Failed => WorkerEvent::Failed {
                job_key,
                message_id,
                error,
                retry_at: response.retry_at,
            },
            FinishOutcome::DeadLetter => WorkerEvent::DeadLetter {
                job_key,
                message_id,
                error,
            },
        };
        self.events.emit(event);
        last
    }

    /// An attempt that ended without the server's outcome (lease lost,
    /// server unreachable, result refused).
    fn failed(&self, job: &ClaimedJob, error: &str) {
        self.events.emit(WorkerEvent::Failed {
            job_key: job.job_key.clone(),
            message_id: job.message.message_id,
            error: error.to_owned(),
            retry_at: None,
        });
    }
}

/// The wire result of a handler's output; a contradictory one is a failed
/// attempt rather than a request the server refuses.
fn job_result(output: HandlerOutput) -> JobResult {
    let contradictory = output.reply.is_some() && output.skip.is_some();
    let empty_reply = output.reply.as_deref() == Some("");
    if contradictory || empty_reply {
        return JobResult {
            error: Some(INVALID_RESULT.into()),
            usage: output.usage,
            ..JobResult::default()
        };
    }
    JobResult {
        reply: output.reply,
        skip: output.skip,
        note: output.note,
        usage: output.usage,
        error: None,
    }
}

/// The server's answer that the asker canceled the question.
fn is_canceled(err: &ClientError) -> bool {
    err.code() == Some(ErrorCode::JobCanceled)
}

/// Errors that mean this owner may no longer write the job.
fn is_fence_error(err: &ClientError) -> bool {
    matches!(
        err.code(),
        Some(ErrorCode::LeaseLost | ErrorCode::FingerprintMismatch)
    )
}

/// The code to report for a failed call: the server's, else `unavailable`.
fn error_code(err: &ClientError) -> String {
    match err.code() {
        Some(code) => code.as_str().to_owned(),
        None if err.is_transient() => ErrorCode::Unavailable.as_str().to_owned(),
        None => "client_error".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use relayger_core::wire::Usage;

    use super::*;

    #[test]
    fn handler_outputs_become_results() {
        let zero = Some(Usage::default());
        let table = [
            (
                HandlerOutput::reply("HI").with_zero_usage(),
                JobResult {
                    reply: Some("HI".into()),
                    usage: zero,
                    ..JobResult::default()
                },
            ),
            (
                HandlerOutput::skip("sealed"),
                JobResult {
                    skip: Some("sealed".into()),
                    ..JobResult::default()
                },
            ),
            (
                HandlerOutput {
                    reply: Some("a".into()),
                    skip: Some("b".into()),
                    note: None,
                    usage: zero,
                },
                JobResult {
                    error: Some(INVALID_RESULT.into()),
                    usage: zero,
                    ..JobResult::default()
                },
            ),
            (
                HandlerOutput::reply(""),
                JobResult {
                    error: Some(INVALID_RESULT.into()),
                    ..JobResult::default()
                },
            ),
        ];
        for (output, expected) in table {
            assert_eq!(job_result(output.clone()), expected, "{output:?}");
        }
    }
}
