//! `relayger`: the command-line client. Argument parsing and output only; the
//! client logic lives in relayger-worker.

mod cli;
mod commands;
mod complete;
mod error;
mod human;
mod mcp;
mod output;
mod table;

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;
use relayger_core::ErrorCode;
use relayger_worker::ProfileDir;

use crate::cli::Cli;
use crate::commands::{Context, EnvCredentials};
use crate::error::CliError;
use crate::output::Mode;

fn main() -> ExitCode {
    // `COMPLETE=bash relayger` prints the dynamic completion script; the
    // shell then calls back with COMPLETE set to ask for candidates.
    clap_complete::CompleteEnv::with_factory(<Cli as clap::CommandFactory>::command).complete();
    let cli = Cli::parse();
    if let Err(err) = cli::check_usage(&cli) {
        err.exit();
    }
    if let cli::Command::Completions { shell } = cli.command {
        // No profile, no server: only the command line's own shape.
        let mut command = <Cli as clap::CommandFactory>::command();
        let mut script = Vec::new();
        clap_complete::generate(shell, &mut command, "relayger", &mut script);
        // A closed pipe is not an error.
        let _ = std::io::stdout().lock().write_all(&script);
        return ExitCode::SUCCESS;
    }
    let mode = if cli.compact {
        Mode::Compact
    } else if cli.json {
        Mode::Json
    } else {
        Mode::Human
    };
    match run(cli, mode) {
        Ok(text) => {
            if let Some(text) = text {
                let mut stdout = std::io::stdout().lock();
                // A closed pipe (`relayger inbox | head -1`) is not an error.
                let _ = writeln!(stdout, "{text}");
            }
            ExitCode::SUCCESS
        }
        Err(mut err) => {
            // What the command found before it failed is a result: stdout.
            if let Some(text) = err.take_output().and_then(|output| output.render(mode)) {
                let _ = writeln!(std::io::stdout().lock(), "{text}");
            }
            let text = match mode {
                Mode::Human => err.human(),
                Mode::Json | Mode::Compact => err.envelope(),
            };
            let _ = writeln!(std::io::stderr().lock(), "{text}");
            ExitCode::from(err.exit_status())
        }
    }
}

fn run(cli: Cli, mode: Mode) -> Result<Option<String>, CliError> {
    let dir = ProfileDir::from_env()?;
    let context = Context {
        env: EnvCredentials::from_env(cli.profile.is_some())?,
        profile: dir.resolve(cli.profile)?,
        dir,
        mode,
        allow_insecure_http: cli.allow_insecure_http,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|err| CliError::new(ErrorCode::Internal, format!("cannot start: {err}")))?;
    let outcome = runtime.block_on(commands::run(&context, cli.command))?;
    Ok(outcome.render(mode))
}
