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
        let bin_dir = find_bin_dir().context("PostgreSQL binaries")?;
        let owner_dir = self.data_dir.join("postgresql");
        let options = format!(
            "-c port={} -c listen_addresses=127.0.0.1 -c unix_socket_directories='' \
             -c fsync=off -c synchronous_commit=off -c full_page_writes=off \
             -c max_connections=400 -c shared_buffers=128MB",
            self.port
        );
        let pg_ctl = bin_dir.join("pg_ctl");
        let mut command = match postgres_user()? {
            Some(user) => {
                let mut command = Command::new("runuser");
                command.args(["-u", &user, "--"]).arg(pg_ctl);
                command
            }
            None => Command::new(pg_ctl),
        };
        command
            .args(["start", "-w", "-t", "60", "-D"])
            .arg(owner_dir.join("data"))
            .arg("-l")
            .arg(owner_dir.join("server.log"))
            .arg("-o")
            .arg(options)
            .current_dir("/")
            .env("LC_ALL", "C");
        for var in ["PGDATA", "PGPORT", "PGHOST", "PGUSER", "PGDATABASE"] {
            command.env_remove(var);
        }
        let output = command.output().context("run pg_ctl start")?;
        if !output.status.success() {
            bail!(
                "pg_ctl start on port {} failed: {}{}",
                self.port,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        self.running = true;
        Ok(())
    }
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
fn postgres_user() -> anyhow::Result<Option<String>> {
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
