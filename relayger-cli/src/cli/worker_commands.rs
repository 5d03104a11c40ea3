//! The arguments of the persistent listener's commands: `worker run` and `runtimes …`.

use std::path::PathBuf;

use clap::{ArgGroup, Args, Subcommand};
use clap_complete::engine::ArgValueCompleter;

#[derive(Debug, Subcommand)]
pub(crate) enum WorkerCommand {
    /// Run a persistent listener for this agent until Ctrl-C: it sleeps
    /// until a socket signal (or the fallback poll) says a question arrived,
    /// claims it under a lease, answers, and keeps its position across
    /// restarts.
    #[command(
        after_help = "Examples:
  relayger --profile receiver --json worker run reply-worker --builtin uppercase --from now
  relayger --profile bot --json worker run open-bot --builtin echo --from now --accept-contacts
  relayger --profile receiver worker run reply-worker --builtin uppercase --from now --policy ./policy.json
  relayger --profile receiver --json worker run custom-worker --from now --handler ./examples/agents/message-handler.mjs --handler-timeout 20000
  relayger --profile receiver --json worker run py-worker --from now --process ./examples/agents/worker.json
  relayger --profile receiver --json worker run a2a-worker --from now --a2a https://agent.example.com --a2a-token-env AGENT_TOKEN",
        after_long_help = "Examples:
  relayger --profile receiver --json worker run reply-worker --builtin uppercase --from now
  relayger --profile bot --json worker run open-bot --builtin echo --from now --accept-contacts
  relayger --profile receiver worker run reply-worker --builtin uppercase --from now --policy ./policy.json
  relayger --profile receiver --json worker run custom-worker --from now --handler ./examples/agents/message-handler.mjs --handler-timeout 20000
  relayger --profile receiver --json worker run py-worker --from now --process ./examples/agents/worker.json
  relayger --profile receiver --json worker run a2a-worker --from now --a2a https://agent.example.com --a2a-token-env AGENT_TOKEN

With --json every event is one JSON object a line (started, claimed,
replied, skipped, failed, dead_letter, released, contact_requests,
contact_accepted, contact_error, socket_connected, socket_disconnected,
unavailable, stopped). --handler runs the module's `handle` in a fresh Node
worker thread per job (Node >= 20 on PATH); --process runs the program named
in worker.json once per job (docs/process-abi.md). Both are stopped at the
handler timeout and never see the profile's token. --a2a forwards each
question's text to the outside A2A agent at URL (its base URL or its agent
card's URL) and answers with its reply; the bearer token for it is read
from the variable --a2a-token-env names (docs/a2a.md). Ctrl-C (or SIGTERM) cancels the running job, releases
it and exits 0; a handler that does not stop ends with
`stopped handler_did_not_stop` and exit code 1.

Environment (debugging aids, not for production):
  RELAYGER_WORKER_FALLBACK_MS=N  claim every N ms when no signal comes
                                 (default 30000, jittered by 10 %)
  RELAYGER_WORKER_NO_SOCKET=1    never open the runtime socket: only the
                                 fallback poll and retry times wake the worker"
    )]
    Run(WorkerRunArgs),
}

#[derive(Debug, Args)]
#[command(group(
    ArgGroup::new("handler_kind")
        .required(true)
        .args(["builtin", "handler", "process", "a2a"])
))]
pub(crate) struct WorkerRunArgs {
    /// The runtime's name: one persistent record per agent and name;
    /// processes with the same name share the work.
    pub(crate) name: String,
    /// A deterministic handler without a model.
    #[arg(long, value_name = "NAME", value_parser = ["uppercase", "echo"])]
    pub(crate) builtin: Option<String>,
    /// A JavaScript module (.mjs or .js) exporting `handle`, run in a fresh
    /// Node worker thread per job.
    #[arg(long, value_name = "FILE")]
    pub(crate) handler: Option<PathBuf>,
    /// A worker.json naming a program run once per job (the process ABI,
    /// docs/process-abi.md).
    #[arg(long, value_name = "FILE")]
    pub(crate) process: Option<PathBuf>,
    /// An outside A2A agent (its base URL or its agent card's URL) that
    /// answers each question: https, or http only to this machine.
    #[arg(long, value_name = "URL")]
    pub(crate) a2a: Option<String>,
    /// The environment variable holding the bearer token for the --a2a
    /// agent (never printed, never given to anything else).
    #[arg(long, value_name = "VAR", conflicts_with_all = ["builtin", "handler", "process"])]
    pub(crate) a2a_token_env: Option<String>,
    /// Where a new runtime starts: `now` (only what arrives from now on) or
    /// `beginning` (all accessible history). Later starts must give the same.
    #[arg(long, value_name = "now|beginning", value_parser = ["now", "beginning"], default_value = "beginning")]
    pub(crate) from: String,
    /// A policy file (JSON), validated strictly. Later starts must give the
    /// same policy.
    #[arg(long, value_name = "FILE")]
    pub(crate) policy: Option<String>,
    /// Accept every incoming contact request at once (a public bot).
    #[arg(long)]
    pub(crate) accept_contacts: bool,
    /// Time per job in milliseconds (default 20000, at most 120000; an
    /// earlier question deadline wins).
    #[arg(long, value_name = "MS")]
    pub(crate) handler_timeout: Option<u64>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum RuntimesCommand {
    /// List this agent's runtimes.
    #[command(after_help = "Example:
  relayger --profile receiver --json runtimes list")]
    List,
    /// Show one runtime: configuration version, policy, job counts, leases.
    #[command(after_help = "Examples:
  relayger --profile receiver --json runtimes inspect RUNTIME_UUID
  relayger --profile receiver runtimes inspect reply-worker")]
    Inspect {
        /// The runtime: its name, its id, or a unique start of its id.
        #[arg(add = ArgValueCompleter::new(crate::complete::runtimes))]
        id: String,
    },
    /// Show the runtime's log, newest first (at most 100 records).
    #[command(after_help = "Example:
  relayger --profile receiver --json runtimes log RUNTIME_UUID --limit 50")]
    Log {
        /// The runtime: its name, its id, or a unique start of its id.
        #[arg(add = ArgValueCompleter::new(crate::complete::runtimes))]
        id: String,
        /// At most this many records (the server caps it at 100).
        #[arg(long, value_name = "N")]
        limit: Option<u32>,
    },
    /// Show claims, attempts and the usage handlers reported.
    #[command(after_help = "Example:
  relayger --profile receiver --json runtimes stats RUNTIME_UUID")]
    Stats {
        /// The runtime: its name, its id, or a unique start of its id.
        #[arg(add = ArgValueCompleter::new(crate::complete::runtimes))]
        id: String,
    },
    /// Change a runtime's policy; give the version that `runtimes inspect`
    /// shows. Refused (409 runtime_busy) only while a lease is active: a
    /// running worker that holds no job may stay up, and its next claim
    /// uses the new policy.
    #[command(after_help = "Example:
  relayger --profile receiver --json runtimes configure RUNTIME_UUID --version 1 --policy ./policy.json")]
    Configure {
        /// The runtime: its name, its id, or a unique start of its id.
        #[arg(add = ArgValueCompleter::new(crate::complete::runtimes))]
        id: String,
        /// The current configuration version.
        #[arg(long, value_name = "V")]
        version: u32,
        /// The new policy file (JSON).
        #[arg(long, value_name = "FILE")]
        policy: String,
    },
    /// Write a note of the runtime on a room (version 0 creates it).
    #[command(
        override_usage = "relayger runtimes note [OPTIONS] --version <V> <ID> <ROOM> <KEY> (--stdin | --text <T>)",
        after_help = "Examples:
  printf 'Decision from the last conversation' | relayger --profile receiver --json runtimes note RUNTIME_UUID ROOM_UUID decision --version 0 --sources MESSAGE_UUID --stdin
  relayger --profile receiver runtimes note RUNTIME_UUID ROOM_UUID decision --version 1 --text 'Ship on Friday'"
    )]
    Note(NoteArgs),
    /// List the runtime's notes on a room.
    #[command(after_help = "Example:
  relayger --profile receiver --json runtimes notes RUNTIME_UUID ROOM_UUID --limit 5")]
    Notes {
        /// The runtime: its name, its id, or a unique start of its id.
        #[arg(add = ArgValueCompleter::new(crate::complete::runtimes))]
        id: String,
        /// The room: its id, or a contact's number for your direct room.
        #[arg(add = ArgValueCompleter::new(crate::complete::rooms))]
        room: String,
        /// At most this many notes (up to 20).
        #[arg(long, value_name = "N")]
        limit: Option<u32>,
        /// The page after this note (the key a previous page ended with).
        #[arg(long, value_name = "KEY")]
        after: Option<String>,
    },
    /// List dead letters: jobs that used up their attempts.
    #[command(after_help = "Example:
  relayger --profile receiver --json runtimes dead-letters RUNTIME_UUID")]
    DeadLetters {
        /// The runtime: its name, its id, or a unique start of its id.
        #[arg(add = ArgValueCompleter::new(crate::complete::runtimes))]
        id: String,
    },
    /// Put a dead letter back to pending.
    #[command(after_help = "Examples:
  relayger --profile receiver runtimes retry reply-worker JOB_UUID
  relayger --profile receiver runtimes retry reply-worker MESSAGE_UUID
  relayger --profile receiver runtimes retry reply-worker job_0190a8c4…")]
    Retry {
        /// The runtime: its name, its id, or a unique start of its id.
        #[arg(add = ArgValueCompleter::new(crate::complete::runtimes))]
        id: String,
        /// The dead letter: its jobId, its message's id or its jobKey.
        job: String,
    },
    /// Delete a runtime (not while a lease is active); frees its name.
    #[command(after_help = "Example:
  relayger --profile receiver runtimes delete RUNTIME_UUID")]
    Delete {
        /// The runtime: its name, its id, or a unique start of its id.
        #[arg(add = ArgValueCompleter::new(crate::complete::runtimes))]
        id: String,
    },
}

#[derive(Debug, Args)]
pub(crate) struct NoteArgs {
    /// The runtime: its name, its id, or a unique start of its id.
    #[arg(add = ArgValueCompleter::new(crate::complete::runtimes))]
    pub(crate) id: String,
    /// The room: its id, or a contact's number for your direct room.
    #[arg(add = ArgValueCompleter::new(crate::complete::rooms))]
    pub(crate) room: String,
    /// The note's key (A-Z a-z 0-9 . _ : -).
    pub(crate) key: String,
    /// 0 creates the note; an update gives its current version.
    #[arg(long, value_name = "V")]
    pub(crate) version: u32,
    /// Messages of the same room the note is based on (up to 8).
    #[arg(long, value_name = "M,...", value_delimiter = ',')]
    pub(crate) sources: Vec<String>,
    /// Read the text from standard input (one final newline is dropped).
    #[arg(long, conflicts_with = "text", required_unless_present = "text")]
    pub(crate) stdin: bool,
    /// The text.
    #[arg(long, value_name = "T")]
    pub(crate) text: Option<String>,
}
