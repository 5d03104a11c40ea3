//! `worker run`: the persistent listener in the foreground, printing one
//! event a line, stopped by Ctrl-C (SIGINT) or SIGTERM.

use std::io::Write;
use std::time::Duration;

use relayger_core::handler_timeout::validate_requested_timeout_ms;
use relayger_core::runtime_name::{RUNTIME_NAME_RULE, is_valid_runtime_name};
use relayger_worker::{
    A2aHandler, Builtin, BuiltinHandler, CancellationToken, Client, DEFAULT_FALLBACK_INTERVAL,
    ErrorCode, EventSink, Handler, HandlerConfigError, NodeModuleHandler, ProcessHandler,
    StartFrom, WorkerError, WorkerEvent, WorkerOptions, run_worker,
};

use super::Context;
use super::runtimes::read_policy;
use crate::cli::WorkerRunArgs;
use crate::error::CliError;
use crate::human::clean;
use crate::output::{Mode, Outcome, line};

/// Debugging aid: the fallback poll interval in milliseconds.
const FALLBACK_ENV: &str = "RELAYGER_WORKER_FALLBACK_MS";
/// Debugging aid: `1` never opens the runtime socket.
const NO_SOCKET_ENV: &str = "RELAYGER_WORKER_NO_SOCKET";

pub(super) async fn run(context: &Context, args: WorkerRunArgs) -> Result<Outcome, CliError> {
    // Everything local is checked before the server is contacted.
    if !is_valid_runtime_name(&args.name) {
        return Err(CliError::invalid(format!(
            "NAME `{}`: {RUNTIME_NAME_RULE}",
            args.name
        )));
    }
    let from = StartFrom::parse(&args.from)
        .ok_or_else(|| CliError::invalid("--from is `now` or `beginning`"))?;
    let policy = args.policy.as_deref().map(read_policy).transpose()?;
    if let Some(ms) = args.handler_timeout {
        validate_requested_timeout_ms(ms)
            .map_err(|err| CliError::invalid(format!("--handler-timeout: {err}")))?;
    }
    let fallback_interval = fallback_interval()?;
    let use_socket = !env_flag(NO_SOCKET_ENV);
    let a2a = args
        .a2a
        .as_deref()
        .map(|url| a2a_handler(url, args.a2a_token_env.as_deref()))
        .transpose()?;
    let profile = context.load().await?;
    // Loaded before the runtime is registered: a missing Node or a bad
    // worker.json stops here.
    let client = context.client_for(&profile)?;
    let handler = match a2a {
        Some(handler) => Box::new(handler),
        None => load_handler(&args, profile.token.clone(), &client)?,
    };

    let cancel = CancellationToken::new();
    let stop_on_signal = tokio::spawn(cancel_on_signal(cancel.clone()));
    let mode = context.mode;
    let options = WorkerOptions {
        from,
        policy,
        cancel,
        accept_contacts: args.accept_contacts,
        events: EventSink::new(move |event| print_event(&event, mode)),
        handler_timeout_ms: args.handler_timeout,
        fallback_interval,
        use_socket,
        ..WorkerOptions::new(args.name, handler)
    };
    let result = run_worker(&client, options).await;
    stop_on_signal.abort();
    match result {
        Ok(()) => Ok(Outcome::streamed()),
        Err(WorkerError::HandlerDidNotStop { job_key }) => Err(CliError::with_code(
            "handler_did_not_stop",
            format!("the handler of job {job_key} did not stop in time after its cancellation"),
        )),
        Err(WorkerError::Client(err)) => Err(err.into()),
        Err(err @ WorkerError::InvalidOptions(_)) => Err(CliError::invalid(err.to_string())),
        Err(err) => Err(CliError::new(ErrorCode::Internal, err.to_string())),
    }
}

/// The handler `worker run` was given other than `--a2a`: exactly one of
/// `--builtin`, `--handler` and `--process` (clap enforces it). The runners
/// never see the profile token.
fn load_handler(
    args: &WorkerRunArgs,
    token: String,
    client: &Client,
) -> Result<Box<dyn Handler>, CliError> {
    let config_error = |err: HandlerConfigError| CliError::invalid(err.to_string());
    if let Some(path) = &args.handler {
        let handler = NodeModuleHandler::load(path).map_err(config_error)?;
        return Ok(Box::new(handler.withhold_values([token])));
    }
    if let Some(path) = &args.process {
        let handler = ProcessHandler::load(path).map_err(config_error)?;
        // The worker's own client reads the context worker.json asks for;
        // the process never gets the token.
        return Ok(Box::new(
            handler.withhold_values([token]).with_client(client.clone()),
        ));
    }
    let name = args.builtin.as_deref().ok_or_else(|| {
        CliError::invalid("give one of --builtin, --handler FILE, --process FILE or --a2a URL")
    })?;
    let builtin = Builtin::parse(name).map_err(|err| CliError::invalid(err.to_string()))?;
    Ok(Box::new(BuiltinHandler(builtin)))
}

/// `--a2a URL [--a2a-token-env VAR]`: the outside agent answers, with the
/// bearer from `VAR` (the operator's token for that agent, never the
/// profile's). Checked before the profile is loaded.
fn a2a_handler(url: &str, token_var: Option<&str>) -> Result<A2aHandler, CliError> {
    let handler = A2aHandler::new(url)
        .map_err(|err: HandlerConfigError| CliError::invalid(err.to_string()))?;
    match token_var {
        Some(var) => Ok(handler.with_bearer_token(a2a_token(var)?)),
        None => Ok(handler),
    }
}

/// The bearer token for the `--a2a` agent, from the variable the operator
/// named. Its value is never printed, not even in the error.
fn a2a_token(var: &str) -> Result<String, CliError> {
    match std::env::var(var) {
        Ok(token) if !token.trim().is_empty() => Ok(token.trim().to_owned()),
        Ok(_) => Err(CliError::invalid(format!(
            "--a2a-token-env: the variable {var} is empty"
        ))),
        Err(_) => Err(CliError::invalid(format!(
            "--a2a-token-env: the variable {var} is not set (or not UTF-8)"
        ))),
    }
}

fn fallback_interval() -> Result<Duration, CliError> {
    let Ok(text) = std::env::var(FALLBACK_ENV) else {
        return Ok(DEFAULT_FALLBACK_INTERVAL);
    };
    match text.trim().parse::<u64>() {
        Ok(ms) if ms > 0 => Ok(Duration::from_millis(ms)),
        _ => Err(CliError::invalid(format!(
            "{FALLBACK_ENV} must be a number of milliseconds above 0, not `{text}`"
        ))),
    }
}

fn env_flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|value| matches!(value.trim(), "1" | "true" | "yes"))
}

/// Cancels the worker on the first SIGINT or SIGTERM.
async fn cancel_on_signal(cancel: CancellationToken) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut terminate) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = terminate.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
    cancel.cancel();
}

/// One event a line, flushed at once (a pipe must see it while the worker
/// waits). A closed stdout is not a reason to stop answering questions.
fn print_event(event: &WorkerEvent, mode: Mode) {
    let text = line(event, mode, || human_event(event));
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{text}");
    let _ = stdout.flush();
}

/// The short human-readable line for `event`.
pub(crate) fn human_event(event: &WorkerEvent) -> String {
    match event {
        WorkerEvent::Started {
            runtime_id,
            name,
            agent_number,
            version,
            from,
            concurrency,
            socket,
            rooms,
            unscanned_messages,
            pending_jobs,
            policy,
        } => {
            let pending_jobs = pending_jobs.unwrap_or_default();
            let considers = match (rooms, unscanned_messages) {
                (Some(rooms), Some(messages)) => format!(
                    "considers {messages} new message(s) in {rooms} room(s) and {pending_jobs} pending job(s)"
                ),
                _ => format!("considers {pending_jobs} pending job(s) and what arrives"),
            };
            let start = match from {
                StartFrom::Beginning => "from beginning: the rooms' whole history",
                StartFrom::Now => "from now: only what arrived since its first start",
            };
            let policy = policy
                .as_ref()
                .map(|policy| format!("; policy {}", policy.normalized()))
                .unwrap_or_default();
            format!(
                "started {name} (runtime {runtime_id}, agent {agent_number}, version {version}, {start}, concurrency {concurrency}, socket {}); {considers}{policy}",
                serde_json::to_value(socket)
                    .ok()
                    .and_then(|value| value.as_str().map(str::to_owned))
                    .unwrap_or_default(),
            )
        }
        WorkerEvent::Claimed {
            job_key,
            message_id,
            attempt,
            ..
        } => format!("claimed {message_id} (attempt {attempt}, job {job_key})"),
        WorkerEvent::Replied {
            message_id,
            reply_message_id,
            ..
        } => match reply_message_id {
            Some(reply) => format!("replied to {message_id} with {reply}"),
            None => format!("replied to {message_id}"),
        },
        WorkerEvent::Skipped {
            message_id, reason, ..
        } => format!("skipped {message_id}: {}", clean(reason)),
        WorkerEvent::Handled { message_id, .. } => format!("handled {message_id}"),
        WorkerEvent::Failed {
            message_id,
            error,
            retry_at,
            ..
        } => match retry_at {
            Some(at) => format!("failed {message_id}: {} (retry at {at})", clean(error)),
            None => format!("failed {message_id}: {}", clean(error)),
        },
        WorkerEvent::DeadLetter {
            message_id, error, ..
        } => format!("dead letter {message_id}: {}", clean(error)),
        WorkerEvent::Released { message_id, .. } => format!("released {message_id}"),
        WorkerEvent::Canceled { message_id, .. } => {
            format!("canceled {message_id}: the asker canceled the question")
        }
        WorkerEvent::ContactRequests { count } => format!("contact requests: {count}"),
        WorkerEvent::ContactAccepted { number } => format!("accepted contact {number}"),
        WorkerEvent::ContactError {
            number: Some(number),
            code,
            ..
        } => format!("cannot accept contact {number}: {code}"),
        WorkerEvent::ContactError {
            number: None,
            code,
            message,
        } => format!(
            "cannot list contact requests: {code} ({})",
            clean(message.as_deref().unwrap_or_default())
        ),
        WorkerEvent::SocketConnected => "socket connected".to_owned(),
        WorkerEvent::SocketDisconnected { error } => {
            format!("socket disconnected ({}); reconnecting", clean(error))
        }
        WorkerEvent::Unavailable {
            during,
            error,
            retry_in_ms,
        } => format!(
            "server unavailable during {during} ({}); retrying in {retry_in_ms} ms",
            clean(error)
        ),
        WorkerEvent::Stopped { reason, .. } => format!("stopped {reason}"),
        // An event of a newer library: its JSON form says what it is.
        other => serde_json::to_string(other).unwrap_or_default(),
    }
}
