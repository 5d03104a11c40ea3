//! The soak's own PostgreSQL: started through relayger-store's embedded
//! cluster management, and restarted on the SAME port, so that the running
//! server's pool has to reconnect to the address it already knows (the
//! embedded start picks a fresh port each time, which a restart must not).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use relayger_store::embedded::{ClusterMode, EmbeddedPostgres, find_bin_dir, stop_data_dir};

/// A running throwaway cluster; dropping it stops the cluster.
#[derive(Debug)]
pub(crate) struct SoakPostgres {
    data_dir: PathBuf,
    port: u16,
    url: String,
    running: bool,
    /// The network namespace it runs in (`None`: this process's).
    netns: Option<String>,
    listen: String,
}

impl SoakPostgres {
    pub(crate) fn start(data_dir: &Path) -> anyhow::Result<SoakPostgres> {
        let cluster = EmbeddedPostgres::start(data_dir, ClusterMode::Throwaway)
            .context("start PostgreSQL")?;
        let soak = SoakPostgres {
            data_dir: data_dir.to_path_buf(),
            port: cluster.port(),
            url: cluster.database_url().to_owned(),
            running: true,
            netns: None,
            listen: "127.0.0.1".to_owned(),
        };
        // From here on this guard stops it (also on a panic).
        cluster.detach();
        Ok(soak)
    }

    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// Fast shutdown: open transactions roll back, connections drop.
    pub(crate) fn stop(&mut self) -> anyhow::Result<()> {
        stop_data_dir(&self.data_dir).context("stop PostgreSQL")?;
        self.running = false;
        Ok(())
    }

    /// Starts the stopped cluster again with the settings the embedded
    /// start uses for a throwaway cluster, on the port it had.
    pub(crate) fn start_again(&mut self) -> anyhow::Result<()> {
        pg_ctl_start_in(
            self.netns.as_deref(),
            &self.data_dir,
            self.port,
            &format!(
                "-c synchronous_commit=off -c max_connections=400 -c listen_addresses={}",
                self.listen
            ),
        )?;
        self.running = true;
        Ok(())
    }

    /// Restarts the cluster inside network namespace `netns`, listening on
    /// `address` (same port), reachable from `allow` (a CIDR) as well; the
    /// URL names `address` from then on.
    pub(crate) fn move_into(
        &mut self,
        netns: &str,
        address: &str,
        allow: &str,
    ) -> anyhow::Result<()> {
        self.stop()?;
        let hba = self
            .data_dir
            .join("postgresql")
            .join("data")
            .join("pg_hba.conf");
        let mut rules = std::fs::read_to_string(&hba).context("read pg_hba.conf")?;
        rules.push_str(&format!("host all all {allow} trust\n"));
        std::fs::write(&hba, rules).context("write pg_hba.conf")?;
        self.netns = Some(netns.to_owned());
        self.listen = address.to_owned();
        self.start_again()?;
        self.url = self.url.replacen("127.0.0.1", address, 1);
        Ok(())
    }

    /// Restarts the cluster as the primary of a synchronous pair: every
    /// commit waits until the standby named `standby` has flushed it.
    pub(crate) fn restart_as_primary(&mut self) -> anyhow::Result<()> {
        self.stop()?;
        pg_ctl_start(
            &self.data_dir,
            self.port,
            &format!(
                "-c synchronous_commit=on -c synchronous_standby_names='{STANDBY_NAME}' \
                 -c wal_level=replica -c max_wal_senders=5 -c max_connections=400"
            ),
        )?;
        self.running = true;
        Ok(())
    }

    /// The port it listens on.
    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    /// The way a machine dies: no shutdown checkpoint, connections reset.
    pub(crate) fn kill_immediate(&mut self) -> anyhow::Result<()> {
        pg_ctl(&self.data_dir, &["stop", "-m", "immediate", "-w"])?;
        self.running = false;
        Ok(())
    }
}

/// The `application_name` the synchronous standby connects with.
const STANDBY_NAME: &str = "standby";

/// A streaming standby of a [`SoakPostgres`] primary, made with
/// `pg_basebackup -R`; dropping it stops it.
#[derive(Debug)]
pub(crate) struct SoakStandby {
    data_dir: PathBuf,
    port: u16,
    running: bool,
}

impl SoakStandby {
    /// Copies the running primary and starts the copy streaming from it as
    /// the synchronous standby; returns once the primary reports it `sync`.
    pub(crate) fn start(primary: &SoakPostgres, data_dir: &Path) -> anyhow::Result<SoakStandby> {
        let owner_dir = data_dir.join("postgresql");
        std::fs::create_dir_all(&owner_dir).context("standby directory")?;
        give_to_cluster_owner(data_dir)?;
        let bin_dir = find_bin_dir().context("PostgreSQL binaries")?;
        let mut basebackup = as_postgres(bin_dir.join("pg_basebackup"))?;
        basebackup
            .arg("-D")
            .arg(owner_dir.join("data"))
            .args(["-R", "-X", "stream", "-c", "fast", "-d"])
            .arg(format!(
                "host=127.0.0.1 port={} user=postgres application_name={STANDBY_NAME}",
                primary.port
            ));
        run_checked(basebackup, "pg_basebackup")?;
        let port = free_port()?;
        pg_ctl_start(
            data_dir,
            port,
            &format!(
                "-c cluster_name={STANDBY_NAME} -c hot_standby=on -c max_connections=400 \
                 -c synchronous_commit=on"
            ),
        )?;
        Ok(SoakStandby {
            data_dir: data_dir.to_path_buf(),
            port,
            running: true,
        })
    }

    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    /// Promotes the standby to primary and waits until it accepts writes.
    pub(crate) fn promote(&mut self) -> anyhow::Result<()> {
        pg_ctl(&self.data_dir, &["promote", "-w", "-t", "60"])
    }
}

impl Drop for SoakStandby {
    fn drop(&mut self) {
        if self.running {
            let _ = stop_data_dir(&self.data_dir);
        }
    }
}

fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").context("bind a free port")?;
    Ok(listener.local_addr()?.port())
}

/// Hands `dir` (and what is in it) to the cluster's user when we are root.
pub(crate) fn give_to_cluster_owner(dir: &Path) -> anyhow::Result<()> {
    if let Some(user) = cluster_owner()? {
        let status = Command::new("chown")
            .arg("-R")
            .arg(&user)
            .arg(dir)
            .status()
            .context("chown")?;
        if !status.success() {
            bail!("chown {} failed", dir.display());
        }
    }
    Ok(())
}

/// `program` run as the cluster's user when we are root.
fn as_postgres(program: PathBuf) -> anyhow::Result<Command> {
    as_postgres_in(None, program)
}

/// [`as_postgres`] inside network namespace `netns` (`ip netns exec`).
fn as_postgres_in(netns: Option<&str>, program: PathBuf) -> anyhow::Result<Command> {
    let mut argv: Vec<std::ffi::OsString> = Vec::new();
    if let Some(netns) = netns {
        argv.extend(["ip", "netns", "exec", netns].map(Into::into));
    }
    if let Some(user) = cluster_owner()? {
        argv.extend(["runuser", "-u", &user, "--"].map(Into::into));
    }
    argv.push(program.into_os_string());
    let mut command = Command::new(&argv[0]);
    command.args(&argv[1..]);
    command.current_dir("/").env("LC_ALL", "C");
    for var in ["PGDATA", "PGPORT", "PGHOST", "PGUSER", "PGDATABASE"] {
        command.env_remove(var);
    }
    Ok(command)
}

fn run_checked(mut command: Command, what: &str) -> anyhow::Result<()> {
    let output = command.output().with_context(|| format!("run {what}"))?;
    if !output.status.success() {
        bail!(
            "{what} failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(())
}

/// `pg_ctl ARGS -D <the cluster under data_dir>`.
fn pg_ctl(data_dir: &Path, args: &[&str]) -> anyhow::Result<()> {
    let bin_dir = find_bin_dir().context("PostgreSQL binaries")?;
    let mut command = as_postgres(bin_dir.join("pg_ctl"))?;
    command
        .args(args)
        .arg("-D")
        .arg(data_dir.join("postgresql").join("data"));
    run_checked(command, &format!("pg_ctl {}", args.join(" ")))
}

/// Starts the cluster under `data_dir` on `port` with the throwaway
/// cluster's settings and `extra` (later settings win).
fn pg_ctl_start(data_dir: &Path, port: u16, extra: &str) -> anyhow::Result<()> {
    pg_ctl_start_in(None, data_dir, port, extra)
}

/// [`pg_ctl_start`] inside network namespace `netns`.
fn pg_ctl_start_in(
    netns: Option<&str>,
    data_dir: &Path,
    port: u16,
    extra: &str,
) -> anyhow::Result<()> {
    let owner_dir = data_dir.join("postgresql");
    let options = format!(
        "-c port={port} -c listen_addresses=127.0.0.1 -c unix_socket_directories='' \
         -c fsync=off -c full_page_writes=off -c shared_buffers=128MB {extra}"
    );
    let bin_dir = find_bin_dir().context("PostgreSQL binaries")?;
    let mut command = as_postgres_in(netns, bin_dir.join("pg_ctl"))?;
    command
        .args(["start", "-w", "-t", "60", "-D"])
        .arg(owner_dir.join("data"))
        .arg("-l")
        .arg(owner_dir.join("server.log"))
        .arg("-o")
        .arg(options);
    run_checked(command, &format!("pg_ctl start on port {port}"))
}

impl Drop for SoakPostgres {
    fn drop(&mut self) {
        if self.running {
            let _ = stop_data_dir(&self.data_dir);
        }
    }
}

/// PostgreSQL refuses to run as root: the same user the embedded start
/// chose (`postgres`, else `nobody`), or none when not root.
pub(crate) fn cluster_owner() -> anyhow::Result<Option<String>> {
    let uid = Command::new("id").arg("-u").output().context("id -u")?;
    if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        return Ok(None);
    }
    for user in ["postgres", "nobody"] {
        if Command::new("id")
            .arg("-u")
            .arg(user)
            .output()?
            .status
            .success()
        {
            return Ok(Some(user.to_owned()));
        }
    }
    bail!("running as root, but there is no `postgres` or `nobody` user for PostgreSQL")
}
