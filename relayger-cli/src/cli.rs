//! The command line, as clap derive types. Values the server also checks
//! (numbers, UUIDs, deadlines, scopes) arrive as text and are validated in
//! `commands`, so a bad one is reported in the error envelope like any other
//! error rather than as a usage error.

mod worker_commands;

use clap::{Args, Parser, Subcommand};
use clap_complete::engine::ArgValueCompleter;

pub(crate) use self::worker_commands::{NoteArgs, RuntimesCommand, WorkerCommand, WorkerRunArgs};

/// Relayger's command-line client: identities, contacts, rooms, messages,
/// and the persistent assistant listener (`worker run`, `runtimes`).
#[derive(Debug, Parser)]
#[command(
    name = "relayger",
    version,
    about,
    long_about = None,
    arg_required_else_help = true,
    after_help = "Examples:
  relayger --profile alice register --server http://127.0.0.1:7070 --name Alice
  relayger --profile alice contacts request 100000002
  relayger --profile alice --compact send 100000002 'What is the status?' --ask
  relayger --profile receiver --json worker run reply-worker --builtin uppercase --from now"
)]
pub(crate) struct Cli {
    /// Profile to use: a file under $RELAYGER_HOME (default profile: `default`).
    #[arg(long, global = true, env = "RELAYGER_PROFILE", value_name = "P",
          add = ArgValueCompleter::new(crate::complete::profiles))]
    pub(crate) profile: Option<String>,
    /// Print the response as JSON (pretty; NDJSON for `worker run`).
    #[arg(long, global = true, conflicts_with = "compact")]
    pub(crate) json: bool,
    /// Print JSON on one line, without nulls and empty fields. It is a JSON
    /// mode of its own: no --json needed, and the two together are a usage
    /// error (exit 2), since they ask for different layouts.
    #[arg(long, global = true)]
    pub(crate) compact: bool,
    /// Send the token over plain http:// to a server that is not this
    /// machine (otherwise refused; use https://).
    #[arg(long, global = true, env = "RELAYGER_ALLOW_INSECURE_HTTP",
          action = clap::ArgAction::SetTrue,
          value_parser = clap::builder::BoolishValueParser::new())]
    pub(crate) allow_insecure_http: bool,
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Create an identity on a server and save it as a profile; the key pair
    /// is generated here and only its public half is sent.
    #[command(after_help = "Example:
  relayger --profile receiver register --server http://127.0.0.1:7070 --name Receiver --agent")]
    Register(RegisterArgs),
    /// Agents owned by the current person profile.
    #[command(
        subcommand,
        after_help = "Example:
  relayger --profile alice agents create --name 'Alice bot' --save-as alice-bot"
    )]
    Agents(AgentsCommand),
    /// Show the identity of the current profile.
    #[command(after_help = "Example:
  relayger --profile alice whoami")]
    Whoami,
    /// Local profiles.
    #[command(
        subcommand,
        after_help = "Example:
  relayger profiles list"
    )]
    Profiles(ProfilesCommand),
    /// Contacts and contact requests.
    #[command(
        subcommand,
        after_help = "Examples:
  relayger --profile alice contacts request 100000002
  relayger --profile bob contacts accept 100000001"
    )]
    Contacts(ContactsCommand),
    /// Rooms: direct rooms with contacts and named group rooms.
    #[command(
        subcommand,
        after_help = "Examples:
  relayger --profile alice rooms list
  relayger --profile alice rooms create --name release --member 100000002"
    )]
    Rooms(RoomsCommand),
    /// Send a message to a contact's direct room or to a room.
    #[command(
        override_usage = "relayger send [OPTIONS] NUMBER TEXT
       relayger send [OPTIONS] --room ROOM TEXT",
        after_help = "Examples:
  relayger --profile sender send 100000002 'report uploaded'
  relayger --profile sender send 100000002 'What is the status?' --ask --deadline 2030-10-02T12:00:00Z
  relayger --profile sender send 100000002 'hello from relayger' --ask --wait 30
  relayger --profile sender send --room 0190a8c4-8a3e-7b6e-9f1c-3d2b1a0f9e8d 'hello all' --sealed"
    )]
    Send(SendArgs),
    /// What became of a question: each recipient's state and reason.
    ///
    /// For each other member of the question's room: its state (queued,
    /// working, answered, failed, rejected, canceled), the reason code of a
    /// failed or rejected one, attempts, the runtimes listening (0: nobody
    /// is yet) and the reply. Any member of the room may read it.
    #[command(after_help = "Examples:
  relayger --profile sender delivery 100000002 MESSAGE_UUID
  relayger --profile sender --json delivery ROOM_UUID MESSAGE_UUID")]
    Delivery(QuestionArgs),
    /// Cancel a question you asked; prints its delivery.
    ///
    /// Runtimes that have not taken it never will; one working on it stops
    /// at its next heartbeat (its handler's signal aborts) and writes no
    /// reply. Canceling again changes nothing.
    #[command(after_help = "Example:
  relayger --profile sender cancel 100000002 MESSAGE_UUID")]
    Cancel(QuestionArgs),
    /// Show one message (sealed content opened when this profile's key can).
    #[command(after_help = "Example:
  relayger --profile receiver --json message ROOM_UUID MESSAGE_UUID")]
    Message(MessageArgs),
    /// Show a message's thread: the root and its reply chain, one page within
    /// a byte budget.
    #[command(after_help = "Examples:
  relayger --profile receiver --json thread ROOM_UUID MESSAGE_UUID --limit 5 --max-bytes 4096
  relayger --profile receiver --json thread ROOM_UUID MESSAGE_UUID --after 7 --limit 5")]
    Thread(ThreadArgs),
    /// Page through a room's history either way, acknowledged or not: the
    /// newest messages, or those after or before a seq (`next`/`prev`).
    #[command(after_help = "Examples:
  relayger --profile receiver history ROOM_UUID
  relayger --profile receiver history 100000002 --limit 20
  relayger --profile receiver history ROOM_UUID --before 41
  relayger --profile receiver --json history ROOM_UUID --after 0 --limit 100")]
    History(HistoryArgs),
    /// Show unacknowledged messages, per room: one bounded page (at most
    /// 100 a room, 200 in all by default); `next` says how to go on.
    #[command(after_help = "Examples:
  relayger --profile receiver inbox
  relayger --profile receiver --json inbox --limit 50 --after ROOM_UUID")]
    Inbox(InboxArgs),
    /// Acknowledge a room's messages up to a seq.
    #[command(after_help = "Example:
  relayger --profile receiver ack ROOM_UUID 3")]
    Ack(AckArgs),
    /// Tokens of the current identity.
    #[command(
        subcommand,
        after_help = "Examples:
  relayger --profile receiver tokens create --scopes read,write
  relayger --profile receiver tokens list"
    )]
    Tokens(TokensCommand),
    /// The persistent assistant listener.
    #[command(
        subcommand,
        after_help = "Example:
  relayger --profile receiver --json worker run reply-worker --builtin uppercase --from now"
    )]
    Worker(WorkerCommand),
    /// The agent's runtimes (persistent listeners): state, log, stats,
    /// configuration, notes, dead letters.
    #[command(
        subcommand,
        after_help = "Examples:
  relayger --profile receiver --json runtimes list
  relayger --profile receiver --json runtimes inspect RUNTIME_UUID"
    )]
    Runtimes(RuntimesCommand),
    /// A2A (Agent2Agent): how outside agents see an agent of this server.
    #[command(
        subcommand,
        after_help = "Example:
  relayger --profile sender --json a2a card 100000002"
    )]
    A2a(A2aCommand),
    /// Print a shell completion script (commands and options). For values
    /// too (profile names, runtime names, room ids), load the dynamic one:
    /// `source <(COMPLETE=bash relayger)`.
    #[command(after_help = "Examples:
  relayger completions bash > ~/.local/share/bash-completion/completions/relayger
  relayger completions zsh > ~/.zfunc/_relayger
  relayger completions fish > ~/.config/fish/completions/relayger.fish
  relayger completions powershell >> $PROFILE")]
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Serve this profile's identity to an assistant over the Model Context
    /// Protocol (stdio, or Streamable HTTP on loopback with --http).
    #[command(after_help = "Examples:
  relayger --profile assistant mcp
  relayger --profile assistant mcp --http 127.0.0.1:7331")]
    Mcp(McpArgs),
}

#[derive(Debug, Subcommand)]
pub(crate) enum A2aCommand {
    /// Print an agent's A2A card URL and its card (JSON), read with this
    /// profile's token: what an outside agent's A2A client resolves.
    #[command(after_help = "Examples:
  relayger --profile sender a2a card 100000002
  relayger --profile sender --json a2a card 100000002")]
    Card {
        /// The agent's number.
        number: String,
    },
}

#[derive(Debug, Args, Default)]
pub(crate) struct InboxArgs {
    /// Continue after this room (the `next` of the previous page).
    #[arg(long, value_name = "ROOM")]
    pub(crate) after: Option<String>,
    /// At most N messages in all (1 to 500; default 200).
    #[arg(long, value_name = "N")]
    pub(crate) limit: Option<u32>,
}

/// One page of a list instead of all of it.
#[derive(Debug, Default, Args)]
pub(crate) struct PageArgs {
    /// Only the page after this one (the `next` of the previous page).
    #[arg(long, value_name = "ID")]
    pub(crate) after: Option<String>,
    /// One page of at most N; without `--limit` or `--after` every page is
    /// read and all of it shown.
    #[arg(long, value_name = "N")]
    pub(crate) limit: Option<u32>,
}

impl PageArgs {
    /// Whether one page was asked for.
    pub(crate) fn one_page(&self) -> bool {
        self.after.is_some() || self.limit.is_some()
    }
}

#[derive(Debug, Args)]
pub(crate) struct McpArgs {
    /// Serve Streamable HTTP at http://ADDR/mcp instead of stdio; ADDR must
    /// be a loopback address (127.0.0.1:PORT or [::1]:PORT).
    #[arg(long, value_name = "ADDR")]
    pub(crate) http: Option<String>,
    /// With --http: MCP sessions open at once; an `initialize` past it is
    /// answered 503 until one is closed (DELETE) or expires.
    #[arg(long, value_name = "N", default_value_t = 16, requires = "http",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=10_000))]
    pub(crate) max_sessions: usize,
    /// With --http: seconds a session may stay unused before it is closed
    /// (its client then starts a new one).
    #[arg(long, value_name = "SECONDS", default_value_t = 300, requires = "http",
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub(crate) session_idle_secs: u64,
}

#[derive(Debug, Args)]
pub(crate) struct RegisterArgs {
    /// The server's URL.
    #[arg(long, value_name = "URL")]
    pub(crate) server: String,
    /// The display name.
    #[arg(long, value_name = "NAME")]
    pub(crate) name: String,
    /// Register an agent rather than a person.
    #[arg(long)]
    pub(crate) agent: bool,
    /// An invite code, needed when the server's registration is closed.
    #[arg(long, value_name = "CODE")]
    pub(crate) invite: Option<String>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum AgentsCommand {
    /// Create an agent owned by the current person and save its profile.
    #[command(after_help = "Example:
  relayger --profile alice agents create --name 'Alice bot' --save-as alice-bot")]
    Create {
        /// The agent's display name.
        #[arg(long, value_name = "NAME")]
        name: String,
        /// The profile to save the agent as.
        #[arg(long, value_name = "PROFILE")]
        save_as: String,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum ProfilesCommand {
    /// List the profiles under $RELAYGER_HOME (`*` marks the one in use).
    #[command(after_help = "Example:
  relayger profiles list")]
    List,
    /// Use profile NAME when neither --profile nor $RELAYGER_PROFILE names one.
    #[command(after_help = "Example:
  relayger profiles use alice")]
    Use {
        /// An existing profile.
        name: String,
    },
    /// Delete profile NAME's file: its token and private key are gone for
    /// good (sealed messages to it can no longer be opened here). The token
    /// is not revoked on the server: revoke it first with `tokens revoke`.
    #[command(after_help = "Example:
  relayger profiles delete old-bot --yes")]
    Delete {
        /// The profile to delete.
        name: String,
        /// Confirm that the private key is to be deleted.
        #[arg(long)]
        yes: bool,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum ContactsCommand {
    /// List accepted contacts and their direct rooms.
    #[command(after_help = "Example:
  relayger --profile alice contacts list")]
    List,
    /// List pending requests, incoming and outgoing.
    #[command(after_help = "Examples:
  relayger --profile alice contacts requests
  relayger --profile alice contacts requests --as 100000003
  relayger --profile alice contacts requests --limit 100 --after REQUEST_UUID")]
    Requests {
        /// Show the requests of an agent this person owns.
        #[arg(long = "as", value_name = "AGENT")]
        as_agent: Option<String>,
        #[command(flatten)]
        page: PageArgs,
    },
    /// Ask someone to become a contact.
    #[command(after_help = "Example:
  relayger --profile alice contacts request 100000002")]
    Request {
        /// Their number.
        number: String,
    },
    /// Accept a request; opens the direct room.
    #[command(after_help = "Examples:
  relayger --profile bob contacts accept 100000001
  relayger --profile alice contacts accept 100000004 --as 100000003")]
    Accept {
        /// The requester's number.
        number: String,
        /// Answer for an agent this person owns.
        #[arg(long = "as", value_name = "AGENT")]
        as_agent: Option<String>,
    },
    /// Decline a request.
    #[command(after_help = "Example:
  relayger --profile bob contacts decline 100000001")]
    Decline {
        /// The requester's number.
        number: String,
        /// Answer for an agent this person owns.
        #[arg(long = "as", value_name = "AGENT")]
        as_agent: Option<String>,
    },
    /// Withdraw your own pending request.
    #[command(after_help = "Example:
  relayger --profile alice contacts withdraw 100000002")]
    Withdraw {
        /// The number you asked.
        number: String,
    },
    /// Block someone: no requests, no messages, no shared direct room.
    #[command(after_help = "Example:
  relayger --profile alice contacts block 100000002")]
    Block {
        /// Their number.
        number: String,
    },
    /// Lift a block.
    #[command(after_help = "Example:
  relayger --profile alice contacts unblock 100000002")]
    Unblock {
        /// Their number.
        number: String,
    },
    /// Remove a contact; both lose access to the direct room.
    #[command(after_help = "Example:
  relayger --profile alice contacts remove 100000002")]
    Remove {
        /// Their number.
        number: String,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum RoomsCommand {
    /// List the rooms you are a member of.
    #[command(after_help = "Examples:
  relayger --profile alice rooms list
  relayger --profile alice rooms list --limit 50 --after ROOM_UUID")]
    List(PageArgs),
    /// Create a group room with some of your contacts.
    #[command(after_help = "Example:
  relayger --profile alice rooms create --name 'release' --member 100000002 --member 100000003")]
    Create {
        /// The room's name.
        #[arg(long, value_name = "NAME")]
        name: String,
        /// A contact to add (repeat the option or list several).
        #[arg(long = "member", value_name = "N", num_args = 1.., required = true)]
        members: Vec<String>,
    },
    /// Add one of your contacts to a room.
    #[command(after_help = "Example:
  relayger --profile alice rooms add ROOM_UUID 100000003")]
    Add {
        /// The room: its id, or a contact's number for your direct room.
        #[arg(add = ArgValueCompleter::new(crate::complete::rooms))]
        room: String,
        /// The contact's number.
        number: String,
    },
    /// Leave a room.
    #[command(after_help = "Example:
  relayger --profile alice rooms leave ROOM_UUID")]
    Leave {
        /// The room: its id, or a contact's number for your direct room.
        #[arg(add = ArgValueCompleter::new(crate::complete::rooms))]
        room: String,
    },
}

#[derive(Debug, Args)]
pub(crate) struct SendArgs {
    /// Send to this room (an id, or a contact's number for your direct
    /// room) instead of NUMBER's direct room.
    #[arg(long, value_name = "ROOM")]
    pub(crate) room: Option<String>,
    /// The contact's number (then TEXT), or with --room the text.
    #[arg(value_name = "NUMBER")]
    pub(crate) first: String,
    /// The message text.
    #[arg(value_name = "TEXT")]
    pub(crate) second: Option<String>,
    /// Mark the message as a question (workers answer questions).
    #[arg(long)]
    pub(crate) ask: bool,
    /// When the question stops mattering: RFC 3339 in UTC with Z. Needs --ask.
    /// One already past is sent, with a warning: runtimes reject it
    /// (`deadline_passed`).
    #[arg(long, value_name = "RFC3339Z")]
    pub(crate) deadline: Option<String>,
    /// Reply to this message (in the same room).
    #[arg(long, value_name = "MSG")]
    pub(crate) reply_to: Option<String>,
    /// Encrypt end to end for the room's current members.
    #[arg(long)]
    pub(crate) sealed: bool,
    /// After sending the question, wait for its reply and print it (up to
    /// SECONDS, default 60; exit code 7 when none came). When every
    /// recipient has ended without answering (failed, rejected, canceled)
    /// the wait ends at once with exit code 8 and the question's delivery.
    #[arg(
        long,
        value_name = "SECONDS",
        num_args = 0..=1,
        default_missing_value = "60",
        requires = "ask"
    )]
    pub(crate) wait: Option<u64>,
}

#[derive(Debug, Args)]
pub(crate) struct MessageArgs {
    /// The room: its id, or a contact's number for your direct room.
    #[arg(add = ArgValueCompleter::new(crate::complete::rooms))]
    pub(crate) room: String,
    /// The message's id.
    pub(crate) message: String,
}

#[derive(Debug, Args)]
pub(crate) struct QuestionArgs {
    /// The room: its id, or a contact's number for your direct room.
    #[arg(add = ArgValueCompleter::new(crate::complete::rooms))]
    pub(crate) room: String,
    /// The question's message id.
    pub(crate) message: String,
}

#[derive(Debug, Args)]
pub(crate) struct ThreadArgs {
    /// The room: its id, or a contact's number for your direct room.
    #[arg(add = ArgValueCompleter::new(crate::complete::rooms))]
    pub(crate) room: String,
    /// The id of any message of the thread's root.
    pub(crate) message: String,
    /// Start after this room seq (the previous page's `next`).
    #[arg(long, value_name = "SEQ")]
    pub(crate) after: Option<i64>,
    /// At most this many messages (up to 100).
    #[arg(long, value_name = "N")]
    pub(crate) limit: Option<u32>,
    /// The response's byte budget (512–65536; default 8192).
    #[arg(long, value_name = "B")]
    pub(crate) max_bytes: Option<u32>,
}

#[derive(Debug, Args)]
pub(crate) struct HistoryArgs {
    /// The room: its id, or a contact's number for your direct room.
    #[arg(add = ArgValueCompleter::new(crate::complete::rooms))]
    pub(crate) room: String,
    /// Only messages before this room seq (the previous page's `prev`).
    #[arg(long, value_name = "SEQ")]
    pub(crate) before: Option<i64>,
    /// Only messages after this room seq (the previous page's `next`);
    /// `--after 0` starts at the room's first message.
    #[arg(long, value_name = "SEQ")]
    pub(crate) after: Option<i64>,
    /// At most N messages (1 to 100; default 50).
    #[arg(long, value_name = "N")]
    pub(crate) limit: Option<u32>,
}

#[derive(Debug, Args)]
pub(crate) struct AckArgs {
    /// The room: its id, or a contact's number for your direct room.
    #[arg(add = ArgValueCompleter::new(crate::complete::rooms))]
    pub(crate) room: String,
    /// The last seq you have seen.
    pub(crate) seq: i64,
}

#[derive(Debug, Subcommand)]
pub(crate) enum TokensCommand {
    /// Create a token; its secret is shown only once.
    #[command(after_help = "Examples:
  relayger --profile receiver tokens create --scopes read,write
  relayger --profile receiver tokens create --scopes read --room ROOM_UUID --save-as receiver-ro")]
    Create {
        /// Comma-separated: read, write, contacts.
        #[arg(long, value_name = "SCOPES", value_delimiter = ',', required = true)]
        scopes: Vec<String>,
        /// Restrict the token to these rooms, by id or by a contact's number
        /// (repeat the option or list several).
        #[arg(long = "room", value_name = "ROOM", num_args = 1..)]
        rooms: Vec<String>,
        /// Save a copy of the current profile with the new token under this name.
        #[arg(long, value_name = "PROFILE")]
        save_as: Option<String>,
    },
    /// List tokens (never their secrets).
    #[command(after_help = "Examples:
  relayger --profile receiver tokens list
  relayger --profile receiver tokens list --limit 100 --after TOKEN_UUID")]
    List(PageArgs),
    /// Revoke a token; it stops working on its next request.
    #[command(after_help = "Example:
  relayger --profile receiver tokens revoke TOKEN_UUID")]
    Revoke {
        /// The token's id.
        id: String,
    },
}

/// Usage errors clap cannot express: `send` takes NUMBER TEXT, or TEXT with
/// `--room`.
pub(crate) fn check_usage(cli: &Cli) -> Result<(), clap::Error> {
    let Command::Send(args) = &cli.command else {
        return Ok(());
    };
    let problem = match (&args.room, &args.second) {
        (Some(_), Some(_)) => "with --room ROOM give only TEXT, not a NUMBER too",
        (None, None) => "give NUMBER and TEXT, or --room ROOM and TEXT",
        _ => return Ok(()),
    };
    let kind = clap::error::ErrorKind::WrongNumberOfValues;
    let mut command = <Cli as clap::CommandFactory>::command();
    command.build();
    Err(match command.find_subcommand_mut("send") {
        Some(send) => send.error(kind, problem),
        None => command.error(kind, problem),
    })
}
