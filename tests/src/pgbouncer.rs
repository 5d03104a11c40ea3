//! A real PgBouncer (Debian's `pgbouncer`) in front of a test database,
//! as the cluster's user when we are root (it refuses to run as root).

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Context, bail};

use crate::soak::{cluster_owner, give_to_cluster_owner};
use crate::{START_TIMEOUT, signal_process, wait_timeout};

/// A running PgBouncer with one database entry; dropping it stops it.
#[derive(Debug)]
pub struct PgBouncer {
    child: Option<Child>,
    url: String,
    log: PathBuf,
    dir: PathBuf,
}

/// `postgres://USER[:PASSWORD]@HOST:PORT/DB[?…]` taken apart.
struct Upstream<'a> {
    user_info: &'a str,
    host: &'a str,
    port: &'a str,
    database: &'a str,
    query: &'a str,
}

fn upstream(url: &str) -> anyhow::Result<Upstream<'_>> {
    let rest = url
        .strip_prefix("postgres://")
        .or_else(|| url.strip_prefix("postgresql://"))
        .context("a postgres:// URL")?;
    let (user_info, rest) = rest.split_once('@').context("a user in the URL")?;
    let (address, rest) = rest.split_once('/').context("a database in the URL")?;
    let (host, port) = address.rsplit_once(':').context("a port in the URL")?;
    let (database, query) = rest.split_once('?').unwrap_or((rest, ""));
    Ok(Upstream {
        user_info,
        host,
        port,
        database,
        query,
    })
}

impl PgBouncer {
    /// Starts PgBouncer with `pool_mode` (`session`, `transaction`),
    /// serving the database of `database_url` under the same name, and
    /// returns once it listens.
    pub fn start(database_url: &str, pool_mode: &str) -> anyhow::Result<PgBouncer> {
        let up = upstream(database_url)?;
        let dir = crate::temp_dir("pgbouncer")?;
        let user = up.user_info.split(':').next().unwrap_or(up.user_info);
        let password = up.user_info.split_once(':').map(|(_, p)| p);
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").context("a free port")?;
            listener.local_addr()?.port()
        };
        let mut server = format!(
            "host={} port={} dbname={} user={user}",
            up.host, up.port, up.database
        );
        if let Some(password) = password {
            server.push_str(&format!(" password={password}"));
        }
        let log = dir.join("pgbouncer.log");
        let ini = format!(
            "[databases]\n{database} = {server}\n\n[pgbouncer]\n\
             listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n\
             auth_type = any\npool_mode = {pool_mode}\n\
             max_client_conn = 500\ndefault_pool_size = 20\n\
             logfile = {log}\n",
            database = up.database,
            log = log.display(),
        );
        let ini_path = dir.join("pgbouncer.ini");
        std::fs::write(&ini_path, ini).context("write pgbouncer.ini")?;
        give_to_cluster_owner(&dir)?;
        let mut command = Command::new("pgbouncer");
        // As root it switches to the cluster's user itself (so the child
        // is PgBouncer, not a wrapper that might not pass signals on).
        if let Some(user) = cluster_owner()? {
            command.args(["-u", &user]);
        }
        command
            .arg(&ini_path)
            .current_dir("/")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = command
            .spawn()
            .context("spawn pgbouncer (Debian package `pgbouncer`)")?;
        let stderr = child.stderr.take().context("pgbouncer stderr")?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stderr);
            let mut line = String::new();
            while reader.read_line(&mut line).unwrap_or(0) > 0 {
                if line.contains("process up") {
                    let _ = tx.send(());
                }
                line.clear();
            }
            // Drain whatever else it prints so it never blocks on a pipe.
            let _ = reader.read_to_end(&mut Vec::new());
        });
        let bouncer = PgBouncer {
            child: Some(child),
            url: format!(
                "postgres://{}@127.0.0.1:{port}/{}{}{}",
                up.user_info,
                up.database,
                if up.query.is_empty() { "" } else { "?" },
                up.query
            ),
            log,
            dir,
        };
        if rx.recv_timeout(START_TIMEOUT).is_err() {
            bail!(
                "pgbouncer did not come up: {}",
                std::fs::read_to_string(&bouncer.log).unwrap_or_default()
            );
        }
        Ok(bouncer)
    }

    /// The URL of the database through PgBouncer.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// PgBouncer's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        if let Some(child) = self.child.take() {
            let pid = child.id();
            // SIGTERM: immediate shutdown (SIGINT would wait for clients).
            let _ = signal_process(pid, "TERM");
            if wait_timeout(child, Duration::from_secs(10)).is_err() {
                let _ = signal_process(pid, "KILL");
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
