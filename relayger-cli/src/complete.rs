//! Dynamic shell completions (`CompleteEnv`): profile names from
//! $RELAYGER_HOME, and, asking the server with the profile in use, runtime
//! names and room ids. A completion never fails loudly: anything that goes
//! wrong (no profile, no server) offers nothing.

use std::ffi::OsStr;
use std::future::Future;
use std::time::Duration;

use clap_complete::engine::CompletionCandidate;
use relayger_worker::{Client, ProfileDir};

/// A completion that waits longer than this for the server offers nothing.
const SERVER_WAIT: Duration = Duration::from_secs(3);

/// The profiles under $RELAYGER_HOME.
pub(crate) fn profiles(current: &OsStr) -> Vec<CompletionCandidate> {
    let current = current.to_string_lossy();
    let Ok(entries) = ProfileDir::from_env().and_then(|dir| dir.list()) else {
        return Vec::new();
    };
    entries
        .into_iter()
        .map(|entry| entry.name)
        .filter(|name| name.starts_with(current.as_ref()))
        .map(CompletionCandidate::new)
        .collect()
}

/// The names of the agent's runtimes.
pub(crate) fn runtimes(current: &OsStr) -> Vec<CompletionCandidate> {
    let names = ask(async |client: Client| {
        let list = client.runtimes().list().await.ok()?;
        Some(
            list.runtimes
                .into_iter()
                .map(|runtime| (runtime.name, runtime.id.to_string()))
                .collect(),
        )
    });
    candidates(current, names)
}

/// The ids of the rooms the identity is in (with each room's name or
/// members as help).
pub(crate) fn rooms(current: &OsStr) -> Vec<CompletionCandidate> {
    let rooms = ask(async |client: Client| {
        let list = client.rooms().await.ok()?;
        Some(
            list.rooms
                .into_iter()
                .map(|room| {
                    let about = room.name.clone().unwrap_or_else(|| {
                        let members: Vec<&str> =
                            room.members.iter().map(|m| m.number.as_str()).collect();
                        members.join(",")
                    });
                    (room.id.to_string(), about)
                })
                .collect(),
        )
    });
    candidates(current, rooms)
}

fn candidates(current: &OsStr, values: Vec<(String, String)>) -> Vec<CompletionCandidate> {
    let current = current.to_string_lossy();
    values
        .into_iter()
        .filter(|(value, _)| value.starts_with(current.as_ref()))
        .map(|(value, help)| CompletionCandidate::new(value).help(Some(help.into())))
        .collect()
}

/// `call` with a client of the profile the command line names (or the one
/// in use), within [`SERVER_WAIT`]; nothing on any failure.
fn ask<F, Fut>(call: F) -> Vec<(String, String)>
where
    F: FnOnce(Client) -> Fut,
    Fut: Future<Output = Option<Vec<(String, String)>>>,
{
    let Some(client) = profile_client() else {
        return Vec::new();
    };
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return Vec::new();
    };
    runtime
        .block_on(async { tokio::time::timeout(SERVER_WAIT, call(client)).await })
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// The client of `--profile P` on the line being completed, else of
/// $RELAYGER_PROFILE or the profile chosen with `profiles use`.
fn profile_client() -> Option<Client> {
    let args: Vec<String> = std::env::args().collect();
    let named = args
        .windows(2)
        .find(|pair| pair[0] == "--profile")
        .map(|pair| pair[1].clone())
        .or_else(|| {
            args.iter()
                .find_map(|arg| arg.strip_prefix("--profile=").map(str::to_owned))
        })
        .or_else(|| {
            std::env::var("RELAYGER_PROFILE")
                .ok()
                .filter(|p| !p.is_empty())
        });
    let name = ProfileDir::from_env().ok()?.resolve(named).ok()?;
    Client::from_profile(&name).ok()
}
