//! `runtimes list | inspect | log | stats | configure | note | notes |
//! dead-letters | retry | delete`.

use std::io::Read;

use relayger_core::ErrorCode;
use relayger_core::lookup::{JOB_REF_RULE, JobRef, check_runtime_ref};
use relayger_core::notes::validate_note;
use relayger_core::policy::Policy;
use relayger_core::wire::{
    ConfigureRequest, JobCounts, JobView, LogRecord, Note, NoteList, NoteWrite, Runtime,
    RuntimeStats,
};
use uuid::Uuid;

use super::{Context, RoomRef, lines_or, parse_uuid};
use crate::cli::{NoteArgs, RuntimesCommand};
use crate::error::CliError;
use crate::human::clean;
use crate::output::Outcome;
use crate::table::table;

pub(super) async fn run(context: &Context, command: RuntimesCommand) -> Result<Outcome, CliError> {
    if let Some(id) = runtime_arg(&command) {
        check_runtime_ref(id).map_err(CliError::invalid)?;
    }
    match command {
        RuntimesCommand::List => {
            let list = context.client().await?.runtimes().list().await?;
            let lines = table(
                &RUNTIME_HEADERS,
                list.runtimes.iter().map(runtime_row).collect(),
                "no runtimes",
            );
            Ok(Outcome::new(&list, lines))
        }
        RuntimesCommand::Inspect { id } => {
            let client = context.client().await?;
            let id = client.runtimes().resolve(&id).await?;
            let runtime = client.runtimes().get(id).await?;
            let line = format!(
                "{}\npolicy {}",
                runtime_line(&runtime),
                runtime.policy.normalized()
            );
            Ok(Outcome::new(&runtime, line))
        }
        RuntimesCommand::Log { id, limit } => {
            check_limit(limit)?;
            let client = context.client().await?;
            let id = client.runtimes().resolve(&id).await?;
            let page = client.runtimes().log(id, limit).await?;
            let lines = table(
                &LOG_HEADERS,
                page.records.iter().map(log_row).collect(),
                "no log records",
            );
            Ok(Outcome::new(&page, lines))
        }
        RuntimesCommand::Stats { id } => {
            let client = context.client().await?;
            let id = client.runtimes().resolve(&id).await?;
            let stats = client.runtimes().stats(id).await?;
            Ok(Outcome::new(&stats, stats_line(&stats)))
        }
        RuntimesCommand::Configure {
            id,
            version,
            policy,
        } => {
            let policy = read_policy(&policy)?;
            let client = context.client().await?;
            let id = client.runtimes().resolve(&id).await?;
            let runtime = client
                .runtimes()
                .configure(id, &ConfigureRequest { version, policy })
                .await?;
            let line = format!("configured {}", runtime_line(&runtime));
            Ok(Outcome::new(&runtime, line))
        }
        RuntimesCommand::Note(args) => note(context, args).await,
        RuntimesCommand::Notes {
            id,
            room,
            limit,
            after,
        } => {
            check_limit(limit)?;
            let room_arg = room.clone();
            let room = RoomRef::parse(&room, "ROOM")?;
            let client = context.client().await?;
            let runtime = client.runtimes().resolve(&id).await?;
            let room = room.resolve(&client).await?;
            let list: NoteList = client
                .runtimes()
                .notes_page(runtime, room, after.as_deref(), limit)
                .await?;
            let mut lines = lines_or(list.notes.iter().map(note_line), "no notes");
            if let Some(next) = &list.next {
                lines.push_str(&format!(
                    "\nmore: relayger runtimes notes {id} {room_arg} --after {next}"
                ));
            }
            Ok(Outcome::new(&list, lines))
        }
        RuntimesCommand::DeadLetters { id } => {
            let client = context.client().await?;
            let id = client.runtimes().resolve(&id).await?;
            let list = client.runtimes().dead_letters(id).await?;
            let lines = table(
                &JOB_HEADERS,
                list.jobs.iter().map(job_row).collect(),
                "no dead letters",
            );
            Ok(Outcome::new(&list, lines))
        }
        RuntimesCommand::Retry { id, job } => {
            let job = JobRef::parse(&job)
                .ok_or_else(|| CliError::invalid(format!("JOB `{job}`: {JOB_REF_RULE}")))?;
            let client = context.client().await?;
            let id = client.runtimes().resolve(&id).await?;
            let view = client.runtimes().retry(id, job).await?;
            Ok(Outcome::new(&view, format!("retrying {}", job_line(&view))))
        }
        RuntimesCommand::Delete { id } => {
            let client = context.client().await?;
            let id = client.runtimes().resolve(&id).await?;
            let done = client.runtimes().delete(id).await?;
            Ok(Outcome::new(&done, format!("deleted runtime {id}")))
        }
    }
}

/// The runtime a command names (by name or id), checked before any
/// request.
fn runtime_arg(command: &RuntimesCommand) -> Option<&str> {
    match command {
        RuntimesCommand::List => None,
        RuntimesCommand::Note(args) => Some(&args.id),
        RuntimesCommand::Inspect { id }
        | RuntimesCommand::Log { id, .. }
        | RuntimesCommand::Stats { id }
        | RuntimesCommand::Configure { id, .. }
        | RuntimesCommand::Notes { id, .. }
        | RuntimesCommand::DeadLetters { id }
        | RuntimesCommand::Retry { id, .. }
        | RuntimesCommand::Delete { id } => Some(id),
    }
}

async fn note(context: &Context, args: NoteArgs) -> Result<Outcome, CliError> {
    let room = RoomRef::parse(&args.room, "ROOM")?;
    let sources = args
        .sources
        .iter()
        .map(|source| parse_uuid(source.trim(), "--sources"))
        .collect::<Result<Vec<Uuid>, _>>()?;
    let text = match (args.text, args.stdin) {
        (Some(text), false) => text,
        (None, true) => read_stdin()?,
        _ => return Err(CliError::invalid("give the text with --stdin or --text")),
    };
    validate_note(&args.key, &text, &sources)
        .map_err(|err| CliError::invalid(format!("note `{}`: {err}", args.key)))?;
    let body = NoteWrite {
        version: args.version,
        text,
        source_message_ids: sources,
    };
    let client = context.client().await?;
    let id = client.runtimes().resolve(&args.id).await?;
    let room = room.resolve(&client).await?;
    let note = client
        .runtimes()
        .put_note(id, room, &args.key, &body)
        .await?;
    Ok(Outcome::new(&note, format!("wrote {}", note_line(&note))))
}

/// Standard input as UTF-8, without one final newline (`echo text |`).
fn read_stdin() -> Result<String, CliError> {
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .map_err(|err| CliError::invalid(format!("cannot read the note from stdin: {err}")))?;
    if text.ends_with('\n') {
        text.pop();
        if text.ends_with('\r') {
            text.pop();
        }
    }
    Ok(text)
}

pub(super) fn read_policy(path: &str) -> Result<Policy, CliError> {
    let text = std::fs::read_to_string(path)
        .map_err(|err| CliError::invalid(format!("cannot read --policy {path}: {err}")))?;
    Policy::parse(&text)
        .map_err(|err| CliError::new(ErrorCode::InvalidPolicy, format!("--policy {path}: {err}")))
}

fn counts(jobs: &JobCounts) -> String {
    format!(
        "pending {} claimed {} handled {} skipped {} dead {}",
        jobs.pending, jobs.claimed, jobs.handled, jobs.skipped, jobs.dead
    )
}

fn runtime_line(runtime: &Runtime) -> String {
    format!(
        "{} {} version {} from {} concurrency {} leases {}; {}",
        runtime.id,
        runtime.name,
        runtime.version,
        runtime.from.as_str(),
        runtime.policy.concurrency,
        runtime.active_leases,
        counts(&runtime.jobs)
    )
}

const RUNTIME_HEADERS: [&str; 11] = [
    "NAME",
    "RUNTIME",
    "VERSION",
    "FROM",
    "CONCURRENCY",
    "LEASES",
    "PENDING",
    "CLAIMED",
    "HANDLED",
    "SKIPPED",
    "DEAD",
];

fn runtime_row(runtime: &Runtime) -> Vec<String> {
    let jobs = &runtime.jobs;
    vec![
        runtime.name.clone(),
        runtime.id.to_string(),
        runtime.version.to_string(),
        runtime.from.as_str().to_owned(),
        runtime.policy.concurrency.to_string(),
        runtime.active_leases.to_string(),
        jobs.pending.to_string(),
        jobs.claimed.to_string(),
        jobs.handled.to_string(),
        jobs.skipped.to_string(),
        jobs.dead.to_string(),
    ]
}

const LOG_HEADERS: [&str; 5] = ["RECORD", "AT", "KIND", "MESSAGE", "DETAIL"];

fn log_row(record: &LogRecord) -> Vec<String> {
    vec![
        record.id.to_string(),
        record.at.to_string(),
        record.kind.to_string(),
        record
            .message_id
            .map(|message| message.to_string())
            .unwrap_or_default(),
        if record.detail.is_null() || record.detail == serde_json::json!({}) {
            String::new()
        } else {
            clean(&record.detail.to_string())
        },
    ]
}

const JOB_HEADERS: [&str; 6] = ["JOB", "STATE", "ATTEMPTS", "MESSAGE", "UPDATED", "REASON"];

fn job_row(job: &JobView) -> Vec<String> {
    vec![
        job.job_id.to_string(),
        job.state.as_str().to_owned(),
        job.attempts.to_string(),
        job.message_id.to_string(),
        job.updated_at.to_string(),
        job.reason.as_deref().map(clean).unwrap_or_default(),
    ]
}

fn stats_line(stats: &RuntimeStats) -> String {
    format!(
        "claims {} attempts {} (finished {}, unfinished {}, unreported {}); reported model calls {} input tokens {} output tokens {}; {}",
        stats.claims,
        stats.attempts,
        stats.finished_attempts,
        stats.unfinished_attempts,
        stats.unreported_attempts,
        stats.reported.model_calls,
        stats.reported.input_tokens,
        stats.reported.output_tokens,
        counts(&stats.jobs)
    )
}

fn note_line(note: &Note) -> String {
    format!(
        "{} version {} in {}: {}",
        note.key,
        note.version,
        note.conversation_id,
        clean(&note.text)
    )
}

fn job_line(job: &JobView) -> String {
    let mut line = format!(
        "{} {} attempts {} message {}",
        job.job_id,
        job.state.as_str(),
        job.attempts,
        job.message_id
    );
    if let Some(reason) = &job.reason {
        line.push_str(&format!(" reason {}", clean(reason)));
    }
    line
}

/// A page of nothing is never what was meant. (Above the page size the
/// server answers with its largest page, as documented.)
fn check_limit(limit: Option<u32>) -> Result<(), CliError> {
    if limit == Some(0) {
        return Err(CliError::invalid("--limit must be at least 1"));
    }
    Ok(())
}
