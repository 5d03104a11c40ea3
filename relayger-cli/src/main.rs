//! `relayger`: the command-line client. Argument parsing and output only; the
//! client logic lives in relayger-worker.

use clap::Parser;

/// Relayger's command-line client: identities, contacts, rooms, messages,
/// and the persistent assistant worker.
#[derive(Debug, Parser)]
#[command(name = "relayger", version, about, long_about = None, arg_required_else_help = true)]
struct Cli {
    /// Profile to use (a file under $RELAYGER_HOME).
    #[arg(long, global = true, env = "RELAYGER_PROFILE")]
    profile: Option<String>,
    /// Print JSON (NDJSON for streams).
    #[arg(long, global = true, conflicts_with = "compact")]
    json: bool,
    /// Print JSON on one line, without nulls and empty fields.
    #[arg(long, global = true)]
    compact: bool,
}

fn main() {
    let _cli = Cli::parse();
}
