//! The cast: one agent (the runtime's owner) and several senders, each a
//! contact of the agent, registered with the real `relayger` CLI; the
//! policy and the `--process` handler description the workers start with.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, bail};
use relayger_worker::{Client, ProfileDir};
use serde_json::{Value, json};

use crate::binary;

/// The agent's profile name.
pub(crate) const AGENT: &str = "agent";

#[derive(Debug)]
pub(crate) struct Identity {
    pub(crate) profile: String,
    pub(crate) id: String,
    pub(crate) number: String,
}

#[derive(Debug)]
pub(crate) struct Cast {
    pub(crate) agent: Identity,
    pub(crate) senders: Vec<Identity>,
}

/// `relayger --json ARGS` with profiles under `home`; its JSON output.
fn cli_json(home: &Path, args: &[&str]) -> anyhow::Result<Value> {
    let output = Command::new(binary("relayger")?)
        .arg("--json")
        .args(args)
        .env_remove("RELAYGER_PROFILE")
        .env("RELAYGER_HOME", home)
        .stdin(Stdio::null())
        .output()
        .context("run relayger")?;
    if !output.status.success() {
        bail!(
            "relayger {args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    serde_json::from_slice(&output.stdout).with_context(|| format!("relayger {args:?}: JSON"))
}

fn register(home: &Path, server: &str, profile: &str, agent: bool) -> anyhow::Result<Identity> {
    let mut args = vec!["--profile", profile, "register", "--server", server];
    args.extend(["--name", profile]);
    if agent {
        args.push("--agent");
    }
    let registered = cli_json(home, &args)?;
    let field = |name: &str| {
        registered["identity"][name]
            .as_str()
            .map(str::to_owned)
            .with_context(|| format!("register printed no identity.{name}: {registered}"))
    };
    Ok(Identity {
        profile: profile.to_owned(),
        id: field("id")?,
        number: field("number")?,
    })
}

/// Registers the agent and `senders` senders; each sender asks the agent
/// to be a contact and the agent accepts.
pub(crate) fn register_cast(home: &Path, server: &str, senders: usize) -> anyhow::Result<Cast> {
    let agent = register(home, server, AGENT, true)?;
    let mut cast = Cast {
        agent,
        senders: Vec::new(),
    };
    for index in 0..senders {
        let sender = register(home, server, &format!("sender{index}"), false)?;
        cli_json(
            home,
            &[
                "--profile",
                &sender.profile,
                "contacts",
                "request",
                &cast.agent.number,
            ],
        )?;
        cli_json(
            home,
            &["--profile", AGENT, "contacts", "accept", &sender.number],
        )?;
        cast.senders.push(sender);
    }
    Ok(cast)
}

/// A library client for a saved profile.
pub(crate) fn client(home: &Path, profile: &str) -> anyhow::Result<Client> {
    let profile = ProfileDir::at(home)
        .load(profile)
        .with_context(|| format!("load profile {profile}"))?;
    Client::for_profile(&profile).context("client for profile")
}

/// Writes the policy and the handler description; returns their paths.
pub(crate) fn write_worker_files(
    dir: &Path,
    seed: u64,
    max_delay_ms: u64,
    concurrency: u32,
    extra_handler_args: &[String],
) -> anyhow::Result<(PathBuf, PathBuf)> {
    let policy = dir.join("policy.json");
    let policy_json = json!({
        "triggers": ["questions"],
        "concurrency": concurrency,
        "maxCallsPerHour": 100_000,
        "maxAttempts": 3,
    });
    std::fs::write(&policy, policy_json.to_string()).context("write policy.json")?;
    let handler = dir.join("handler.json");
    let mut argv = vec![
        "handle".to_owned(),
        "--seed".to_owned(),
        seed.to_string(),
        "--max-delay-ms".to_owned(),
        max_delay_ms.to_string(),
    ];
    argv.extend_from_slice(extra_handler_args);
    let handler_json = json!({
        "executable": std::env::current_exe().context("current_exe")?,
        "argv": argv,
    });
    std::fs::write(&handler, handler_json.to_string()).context("write handler.json")?;
    Ok((policy, handler))
}

/// Copies the profiles under `from` into `to`, pointed at `server`
/// (file modes kept).
pub(crate) fn copy_profiles(from: &Path, to: &Path, server: &str) -> anyhow::Result<()> {
    std::fs::create_dir_all(to).context("profile directory")?;
    for entry in std::fs::read_dir(from).context("read the profile directory")? {
        let entry = entry?;
        if !entry.file_type()?.is_file() {
            continue;
        }
        let target = to.join(entry.file_name());
        std::fs::copy(entry.path(), &target).context("copy a profile file")?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(profile_name) = name.strip_suffix(".json") {
            let mut profile = ProfileDir::at(from)
                .load(profile_name)
                .with_context(|| format!("load profile {profile_name}"))?;
            profile.server = server.to_owned();
            std::fs::write(&target, serde_json::to_vec_pretty(&profile)?)
                .context("write a profile")?;
        }
    }
    Ok(())
}
