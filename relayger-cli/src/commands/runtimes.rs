//! `runtimes list | inspect | log | stats | configure | note | notes |
//! dead-letters | retry | delete`.

use std::io::Read;

use relayger_core::ErrorCode;
use relayger_core::notes::validate_note;
use relayger_core::policy::Policy;
use relayger_core::wire::{
    ConfigureRequest, JobCounts, JobView, LogRecord, Note, NoteList, NoteWrite, Runtime,
    RuntimeStats,
};
use uuid::Uuid;

use super::{Context, lines_or, parse_uuid};
use crate::cli::{NoteArgs, RuntimesCommand};
use crate::error::CliError;
use crate::human::clean;
use crate::output::Outcome;

pub(super) async fn run(context: &Context, command: RuntimesCommand) -> Result<Outcome, CliError> {
    match command {
        RuntimesCommand::List => {
            let list = context.client().await?.runtimes().list().await?;
            let lines = lines_or(list.runtimes.iter().map(runtime_line), "no runtimes");
            Ok(Outcome::new(&list, lines))
        }
        RuntimesCommand::Inspect { id } => {
            let id = parse_uuid(&id, "ID")?;
            let runtime = context.client().await?.runtimes().get(id).await?;
            let line = format!(
                "{}\npolicy {}",
                runtime_line(&runtime),
                runtime.policy.normalized()
            );
            Ok(Outcome::new(&runtime, line))
        }
        RuntimesCommand::Log { id, limit } => {
            let id = parse_uuid(&id, "ID")?;
            check_limit(limit)?;
            let page = context.client().await?.runtimes().log(id, limit).await?;
            let lines = lines_or(page.records.iter().map(log_line), "no log records");
            Ok(Outcome::new(&page, lines))
        }
        RuntimesCommand::Stats { id } => {
            let id = parse_uuid(&id, "ID")?;
            let stats = context.client().await?.runtimes().stats(id).await?;
            Ok(Outcome::new(&stats, stats_line(&stats)))
        }
        RuntimesCommand::Configure {
            id,
            version,
            policy,
        } => {
            let id = parse_uuid(&id, "ID")?;
            let policy = read_policy(&policy)?;
            let runtime = context
                .client()
                .await?
                .runtimes()
                .configure(id, &ConfigureRequest { version, policy })
                .await?;
            let line = format!("configured {}", runtime_line(&runtime));
            Ok(Outcome::new(&runtime, line))
        }
        RuntimesCommand::Note(args) => note(context, args).await,
        RuntimesCommand::Notes { id, room, limit } => {
            let id = parse_uuid(&id, "ID")?;
            let room = parse_uuid(&room, "ROOM")?;
            check_limit(limit)?;
            let notes = context
                .client()
                .await?
                .runtimes()
                .notes(id, room, limit)
                .await?;
            let lines = lines_or(notes.iter().map(note_line), "no notes");
            Ok(Outcome::new(&NoteList { notes }, lines))
        }
        RuntimesCommand::DeadLetters { id } => {
            let id = parse_uuid(&id, "ID")?;
            let list = context.client().await?.runtimes().dead_letters(id).await?;
            let lines = lines_or(list.jobs.iter().map(job_line), "no dead letters");
            Ok(Outcome::new(&list, lines))
        }
        RuntimesCommand::Retry { id, job } => {
            let id = parse_uuid(&id, "ID")?;
            let job = parse_uuid(&job, "JOB")?;
            let view = context.client().await?.runtimes().retry(id, job).await?;
            Ok(Outcome::new(&view, format!("retrying {}", job_line(&view))))
        }
        RuntimesCommand::Delete { id } => {
            let id = parse_uuid(&id, "ID")?;
            let done = context.client().await?.runtimes().delete(id).await?;
            Ok(Outcome::new(&done, format!("deleted runtime {id}")))
        }
    }
}

async fn note(context: &Context, args: NoteArgs) -> Result<Outcome, CliError> {
    let id = parse_uuid(&args.id, "ID")?;
    let room = parse_uuid(&args.room, "ROOM")?;
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
    let note = context
        .client()
        .await?
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

fn log_line(record: &LogRecord) -> String {
    let mut line = format!("{} {} {}", record.id, record.at, record.kind);
    if let Some(message) = record.message_id {
        line.push_str(&format!(" message {message}"));
    }
    if !record.detail.is_null() {
        line.push_str(&format!(" {}", clean(&record.detail.to_string())));
    }
    line
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
