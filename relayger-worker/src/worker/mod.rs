//! The persistent assistant listener: [`run_worker`].
//!
//! One loop: register the runtime, open its socket, claim; when idle, wait
//! for a socket signal, the claim's `retryAt` or the fallback timer (never
//! a busy poll, no model calls while there is no work); run up to the
//! policy's `concurrency` jobs at once, each on its own task with its lease
//! heartbeated three times within the time its handler may run (at most at
//! a third of the lease), counted from the claim's send.

mod backoff;
mod claim_loop;
mod contacts;
mod events;
mod finisher;
mod handler;
mod job;
mod wake;

use std::sync::Arc;
use std::time::Duration;

use relayger_core::handler_timeout::validate_requested_timeout_ms;
use relayger_core::policy::Policy;
use relayger_core::wire::{RegisterRuntimeRequest, Runtime, StartFrom};
use thiserror::Error;
use tokio::task::JoinSet;
use tokio::time::sleep;
use tokio_util::sync::CancellationToken;

use self::backoff::Backoff;
use self::claim_loop::{WorkerLoop, unavailable};
use self::contacts::ContactTask;
pub use self::events::{EventSink, SocketState, StopReason, WorkerEvent};
use self::finisher::Finisher;
pub use self::handler::{
    BuiltinHandler, Handler, HandlerError, HandlerFn, HandlerFuture, HandlerInput, HandlerOutput,
    handler_fn,
};
use self::job::JobRunner;
use self::wake::Wakeups;
use crate::client::{Client, ClientError};

/// The fallback poll when no option says otherwise: a claim every 30 s
/// (±10 %) covers signals the socket missed.
pub const DEFAULT_FALLBACK_INTERVAL: Duration = Duration::from_secs(30);

/// How [`run_worker`] runs. Build it with [`WorkerOptions::new`] and
/// change what you need:
///
/// ```
/// use relayger_worker::Builtin;
/// use relayger_worker::StartFrom;
/// use relayger_worker::{BuiltinHandler, CancellationToken, WorkerOptions};
///
/// let cancel = CancellationToken::new();
/// let options = WorkerOptions {
///     from: StartFrom::Now,
///     cancel: cancel.clone(),
///     accept_contacts: true,
///     ..WorkerOptions::new("open-bot", BuiltinHandler(Builtin::Echo))
/// };
/// assert_eq!(options.name, "open-bot");
/// ```
#[derive(Debug)]
pub struct WorkerOptions<H> {
    /// The runtime's name: one persistent record per (agent, name).
    /// Processes with the same name share the work.
    pub name: String,
    /// Where a new runtime starts; later starts must give the same.
    pub from: StartFrom,
    /// The policy (`None`: the defaults); later starts must give the same.
    pub policy: Option<Policy>,
    /// Stops the worker: the registration is abandoned, in-flight
    /// handlers are cancelled and their jobs released. An already cancelled
    /// token creates no runtime record.
    pub cancel: CancellationToken,
    /// What runs per job.
    pub handler: H,
    /// Accept every incoming contact request at once (a public bot).
    pub accept_contacts: bool,
    /// Where events go.
    pub events: EventSink,
    /// The handler time per job the worker asks for (1–120000 ms; the server
    /// default is 20 s, and an earlier question deadline wins).
    pub handler_timeout_ms: Option<u64>,
    /// How often an idle worker claims without a signal (jittered ±10 %).
    pub fallback_interval: Duration,
    /// Open the runtime socket (default). Without it only the fallback poll
    /// and `retryAt` wake the worker: a debugging aid.
    pub use_socket: bool,
}

impl<H> WorkerOptions<H> {
    /// Runtime `name` with `handler`, from the beginning, the default
    /// policy, a fresh cancellation token, no events, the socket and a
    /// 30 s fallback poll.
    pub fn new(name: impl Into<String>, handler: H) -> WorkerOptions<H> {
        WorkerOptions {
            name: name.into(),
            from: StartFrom::Beginning,
            policy: None,
            cancel: CancellationToken::new(),
            handler,
            accept_contacts: false,
            events: EventSink::default(),
            handler_timeout_ms: None,
            fallback_interval: DEFAULT_FALLBACK_INTERVAL,
            use_socket: true,
        }
    }
}

/// Why [`run_worker`] stopped other than through its cancellation token.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum WorkerError {
    /// An option is out of range; nothing was sent.
    #[error("invalid worker options: {0}")]
    InvalidOptions(String),
    /// The server refused to go on: a configuration conflict at
    /// registration, a revoked token, a deleted runtime, …
    #[error(transparent)]
    Client(#[from] ClientError),
    /// A cancelled handler did not return within one second. Its
    /// heartbeats stopped (its lease runs out and another process may take
    /// the job) and no new job was started; fix the handler and restart.
    #[error(
        "handler_did_not_stop: the handler of job {job_key} did not stop within 1 s of its cancellation"
    )]
    HandlerDidNotStop {
        /// The stuck job.
        job_key: String,
    },
}

/// Runs a worker until `options.cancel` fires (then `Ok`), a handler does
/// not stop, or the server refuses to go on. Transport errors and server
/// restarts are ridden out with backoff.
///
/// ```no_run
/// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
/// use relayger_worker::Builtin;
/// use relayger_worker::StartFrom;
/// use relayger_worker::{BuiltinHandler, Client, EventSink, WorkerOptions, run_worker};
///
/// let client = Client::from_profile("receiver")?;
/// let options = WorkerOptions {
///     from: StartFrom::Now,
///     events: EventSink::new(|event| println!("{}", serde_json::to_string(&event).unwrap_or_default())),
///     ..WorkerOptions::new("reply-worker", BuiltinHandler(Builtin::Uppercase))
/// };
/// run_worker(&client, options).await?;
/// # Ok(())
/// # }
/// ```
pub async fn run_worker<H: Handler>(
    client: &Client,
    options: WorkerOptions<H>,
) -> Result<(), WorkerError> {
    let WorkerOptions {
        name,
        from,
        policy,
        cancel,
        handler,
        accept_contacts,
        events,
        handler_timeout_ms,
        fallback_interval,
        use_socket,
    } = options;
    if let Some(ms) = handler_timeout_ms {
        validate_requested_timeout_ms(ms)
            .map_err(|err| WorkerError::InvalidOptions(err.to_string()))?;
    }
    if fallback_interval.is_zero() {
        return Err(WorkerError::InvalidOptions(
            "the fallback interval must be longer than zero".into(),
        ));
    }
    let request = RegisterRuntimeRequest { name, from, policy };
    let runtime = match register(client, &request, &cancel, &events).await {
        Ok(Some(runtime)) => runtime,
        Ok(None) => return stopped(&events, Ok(())),
        Err(err) => return stopped(&events, Err(err.into())),
    };
    let wakeups = Wakeups::start(client, runtime.id, use_socket, &cancel, &events).await;
    events.emit(WorkerEvent::Started {
        runtime_id: runtime.id,
        name: runtime.name.clone(),
        agent_number: runtime.agent_number.clone(),
        version: runtime.version,
        from: runtime.from,
        concurrency: runtime.policy.concurrency,
        socket: wakeups.state,
        rooms: runtime.backlog.map(|backlog| backlog.rooms),
        unscanned_messages: runtime.backlog.map(|backlog| backlog.unscanned_messages),
        pending_jobs: Some(runtime.jobs.pending),
        policy: Some(runtime.policy.clone()),
    });
    // Not a child of `cancel`: the loop cancels it once it has stopped
    // claiming (a claim in flight has answered and its grants are given
    // back), so a running job's release on the way out cannot free a slot
    // that claim then takes, spending a second attempt on the same job.
    let shutdown = CancellationToken::new();
    let runner = Arc::new(JobRunner {
        client: client.clone(),
        finisher: Finisher::start(client.clone(), runtime.id),
        runtime_id: runtime.id,
        handler: Arc::new(handler),
        events: events.clone(),
        shutdown: shutdown.clone(),
    });
    let contacts = ContactTask::start(client, accept_contacts, &events, &cancel);
    let worker = WorkerLoop {
        client,
        runtime,
        runner,
        cancel,
        shutdown,
        events: events.clone(),
        contacts,
        fallback_interval,
        handler_timeout_ms,
        jobs: JoinSet::new(),
    };
    let result = worker.run(&wakeups).await;
    wakeups.stop().await;
    stopped(&events, result)
}

/// Emits the final `stopped` event for `result` and returns it.
fn stopped(events: &EventSink, result: Result<(), WorkerError>) -> Result<(), WorkerError> {
    let event = match &result {
        Ok(()) => WorkerEvent::Stopped {
            reason: StopReason::Interrupted,
            job_key: None,
            code: None,
            message: None,
        },
        Err(WorkerError::HandlerDidNotStop { job_key }) => WorkerEvent::Stopped {
            reason: StopReason::HandlerDidNotStop,
            job_key: Some(job_key.clone()),
            code: None,
            message: None,
        },
        Err(err) => WorkerEvent::Stopped {
            reason: StopReason::Error,
            job_key: None,
            code: Some(match err {
                WorkerError::Client(client) => client
                    .code()
                    .map_or("unavailable", |code| code.as_str())
                    .to_owned(),
                _ => "invalid_argument".to_owned(),
            }),
            message: Some(err.to_string()),
        },
    };
    events.emit(event);
    result
}

/// Registers the runtime, waiting out an unreachable server; `None` when
/// cancelled first (then no record was created by this call, or the
/// registration that did happen is simply not used).
async fn register(
    client: &Client,
    request: &RegisterRuntimeRequest,
    cancel: &CancellationToken,
    events: &EventSink,
) -> Result<Option<Runtime>, ClientError> {
    let mut backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(30));
    loop {
        if cancel.is_cancelled() {
            return Ok(None);
        }
        let registered = tokio::select! {
            _ = cancel.cancelled() => return Ok(None),
            registered = client.runtimes().register(request) => registered,
        };
        match registered {
            Ok(runtime) => return Ok(Some(runtime)),
            Err(err) if err.is_transient() => {
                let delay = backoff.next_delay();
                events.emit(unavailable("register", &err, delay));
                tokio::select! {
                    _ = cancel.cancelled() => return Ok(None),
                    _ = sleep(delay) => {}
                }
            }
            Err(err) => return Err(err),
        }
    }
}
