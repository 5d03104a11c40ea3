use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Relayger's server: messaging for people and agents, with durable
/// assistant runtimes, on PostgreSQL.
///
/// With no database settings it runs its own PostgreSQL under ./relayger-data.
#[derive(Debug, Parser)]
#[command(name = "relayger-server", version, about, long_about = None)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Option<Command>,

    /// Address to listen on (port 0 picks a free port).
    #[arg(
        long,
        global = true,
        env = "RELAYGER_LISTEN",
        default_value = "127.0.0.1:7070"
    )]
    pub(crate) listen: String,

    #[command(flatten)]
    pub(crate) database: DatabaseArgs,

    /// Who may register: `open` (anyone) or `closed` (invite codes from
    /// `relayger-server invites create`). Default: open only when listening
    /// on a loopback address.
    #[arg(long, global = true, env = "RELAYGER_REGISTRATION", value_enum)]
    pub(crate) registration: Option<RegistrationArg>,

    /// Lease length in milliseconds granted on claim (minimum 1000); workers
    /// heartbeat at a third of it.
    #[arg(long, global = true, env = "RELAYGER_LEASE_MS", default_value_t = relayger_core::lease::DEFAULT_LEASE_MS)]
    pub(crate) lease_ms: u64,

    /// The URL clients reach this server at (e.g. behind a reverse proxy):
    /// the base of each agent's A2A interface URL in its card. Default: the
    /// scheme served and the Host the client named.
    #[arg(long, global = true, env = "RELAYGER_PUBLIC_URL",
          value_parser = |given: &str| relayger_core::a2a::serve::public_url(given))]
    pub(crate) public_url: Option<String>,

    /// Database connections for requests (one more is kept for /healthz).
    #[arg(long, global = true, env = "RELAYGER_POOL_SIZE", default_value_t = 16,
          value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub(crate) pool_size: u16,

    /// API requests handled at once; more are refused with 429 rate_limited
    /// and Retry-After instead of queueing (/healthz is not counted).
    #[arg(long, global = true, env = "RELAYGER_MAX_IN_FLIGHT",
          default_value_t = relayger_api::DEFAULT_MAX_IN_FLIGHT,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1_000_000))]
    pub(crate) max_in_flight: usize,

    /// Log line format on stderr: `text` for people, `json` (one object a
    /// line) for log collectors. `RELAYGER_LOG` sets the levels.
    #[arg(
        long,
        global = true,
        env = "RELAYGER_LOG_FORMAT",
        value_enum,
        default_value = "text"
    )]
    pub(crate) log_format: LogFormat,

    /// Serve Prometheus metrics at `GET /metrics` on this address (a bare
    /// port means 127.0.0.1); off when not given.
    #[arg(long, global = true, env = "RELAYGER_METRICS_LISTEN")]
    pub(crate) metrics_listen: Option<String>,

    #[command(flatten)]
    pub(crate) edge: EdgeArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum LogFormat {
    Text,
    Json,
}

/// Limits against slow and greedy clients.
#[derive(Debug, Args)]
pub(crate) struct EdgeArgs {
    /// Open connections at once; a new one past this is closed at once.
    #[arg(long, global = true, env = "RELAYGER_MAX_CONNECTIONS",
          default_value_t = relayger_api::DEFAULT_MAX_CONNECTIONS,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1_000_000))]
    pub(crate) max_connections: usize,

    /// Open connections from one client address at once; a new one past
    /// this is closed at once. Behind a reverse proxy every client has the
    /// proxy's address: raise it to --max-connections there.
    #[arg(long, global = true, env = "RELAYGER_MAX_CONNECTIONS_PER_ADDRESS",
          default_value_t = relayger_api::DEFAULT_MAX_CONNECTIONS_PER_ADDRESS,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1_000_000))]
    pub(crate) max_connections_per_address: usize,

    /// Milliseconds a client has to send its request headers; also how long
    /// a connection may stay open with no request in flight (before its
    /// protocol is known, during an HTTP/2 handshake, between requests).
    #[arg(long, global = true, env = "RELAYGER_HEADER_TIMEOUT_MS",
          default_value_t = relayger_api::DEFAULT_HEADER_READ_TIMEOUT.as_millis() as u64,
          value_parser = clap::value_parser!(u64).range(100..=600_000))]
    pub(crate) header_timeout_ms: u64,

    /// Milliseconds a client has to send its whole request body (read before
    /// the request takes an in-flight slot); 408 request_timeout after it.
    #[arg(long, global = true, env = "RELAYGER_BODY_TIMEOUT_MS",
          default_value_t = relayger_api::DEFAULT_BODY_READ_TIMEOUT.as_millis() as u64,
          value_parser = clap::value_parser!(u64).range(100..=600_000))]
    pub(crate) body_timeout_ms: u64,

    /// Requests a second per token, sustained (0: no limit).
    #[arg(long, global = true, env = "RELAYGER_TOKEN_RATE",
          default_value_t = relayger_api::DEFAULT_TOKEN_RATE.per_second)]
    pub(crate) token_rate: u32,

    /// Requests per token at once after a quiet spell.
    #[arg(long, global = true, env = "RELAYGER_TOKEN_BURST",
          default_value_t = relayger_api::DEFAULT_TOKEN_RATE.burst)]
    pub(crate) token_burst: u32,

    /// Requests a second without a token (registration) per client address,
    /// sustained (0: no limit).
    #[arg(long, global = true, env = "RELAYGER_ADDRESS_RATE",
          default_value_t = relayger_api::DEFAULT_ADDRESS_RATE.per_second)]
    pub(crate) address_rate: u32,

    /// Requests without a token per client address at once.
    #[arg(long, global = true, env = "RELAYGER_ADDRESS_BURST",
          default_value_t = relayger_api::DEFAULT_ADDRESS_RATE.burst)]
    pub(crate) address_burst: u32,

    /// Lookups of identities by number a second per person (its agents'
    /// lookups included), sustained (0: no limit).
    #[arg(long, global = true, env = "RELAYGER_LOOKUP_RATE",
          default_value_t = relayger_api::DEFAULT_LOOKUP_RATE.per_second)]
    pub(crate) lookup_rate: u32,

    /// Lookups by number per person (its agents' included) at once.
    #[arg(long, global = true, env = "RELAYGER_LOOKUP_BURST",
          default_value_t = relayger_api::DEFAULT_LOOKUP_RATE.burst)]
    pub(crate) lookup_burst: u32,

    /// Agents one person may own; creating one more is 409 conflict.
    #[arg(long, global = true, env = "RELAYGER_MAX_AGENTS_PER_PERSON",
          default_value_t = relayger_api::DEFAULT_MAX_AGENTS_PER_PERSON,
          value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
    pub(crate) max_agents_per_person: u32,

    /// WebSockets one token may hold open; the next upgrade is 429.
    #[arg(long, global = true, env = "RELAYGER_MAX_SOCKETS_PER_TOKEN",
          default_value_t = relayger_api::DEFAULT_MAX_SOCKETS_PER_TOKEN,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=100_000))]
    pub(crate) max_sockets_per_token: usize,

    /// Serve HTTPS with this PEM certificate chain (leaf first); needs
    /// --tls-key.
    #[arg(long, global = true, env = "RELAYGER_TLS_CERT", requires = "tls_key")]
    pub(crate) tls_cert: Option<PathBuf>,

    /// The PEM private key of --tls-cert.
    #[arg(long, global = true, env = "RELAYGER_TLS_KEY", requires = "tls_cert")]
    pub(crate) tls_key: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub(crate) struct DatabaseArgs {
    /// PostgreSQL URL of a database you manage (postgres://user:pass@host/db).
    #[arg(long, global = true, env = "DATABASE_URL", conflicts_with = "data_dir")]
    pub(crate) database_url: Option<String>,

    /// A direct session connection to the same database for LISTEN and the
    /// migrations, when --database-url goes through PgBouncer in
    /// transaction pooling (which cannot hold LISTEN).
    #[arg(
        long,
        global = true,
        env = "RELAYGER_LISTEN_DATABASE_URL",
        requires = "database_url"
    )]
    pub(crate) listen_database_url: Option<String>,

    /// Directory for the self-managed PostgreSQL, used when no --database-url is given.
    #[arg(
        long,
        global = true,
        env = "RELAYGER_DATA_DIR",
        default_value = "relayger-data"
    )]
    pub(crate) data_dir: PathBuf,

    /// When run as root: the dedicated system user the self-managed
    /// PostgreSQL runs as (default `postgres`; never `root` or `nobody`).
    #[arg(
        long,
        global = true,
        env = "RELAYGER_POSTGRES_USER",
        conflicts_with = "database_url"
    )]
    pub(crate) postgres_user: Option<String>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Serve the API (the default).
    Serve,
    /// Apply pending database migrations and exit.
    Migrate,
    /// Registration invites for a closed server.
    #[command(subcommand)]
    Invites(InvitesCommand),
}

#[derive(Debug, Subcommand)]
pub(crate) enum InvitesCommand {
    /// Create a single-use invite code and print it (shown once).
    ///
    /// Example: relayger-server invites create --data-dir ./relayger-data
    Create,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum RegistrationArg {
    Open,
    Closed,
}
