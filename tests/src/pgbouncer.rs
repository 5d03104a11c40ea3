//! A real PgBouncer in front of a test database, as the cluster's user when
//! we are root (it refuses to run as root): Debian's packaged `pgbouncer`
//! (1.18 on Debian 12) or the 1.24 that `scripts/build-pgbouncer` builds
//! (`max_prepared_statements`, for transaction pooling).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
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
    admin_url: String,
    log: PathBuf,
    dir: PathBuf,
}

/// How to run PgBouncer.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The `pgbouncer` program (`None`: the one on `PATH`).
    pub binary: Option<PathBuf>,
    /// `session` or `transaction`.
    pub pool_mode: String,
    /// Server connections per (database, user).
    pub default_pool_size: u32,
    /// Protocol-level prepared statements tracked per server connection
    /// (PgBouncer 1.21 and later; `None` leaves it out of the file).
    pub max_prepared_statements: Option<u32>,
}

impl Settings {
    /// Debian's PgBouncer in `pool_mode`, 20 server connections.
    pub fn packaged(pool_mode: &str) -> Settings {
        Settings {
            binary: None,
            pool_mode: pool_mode.to_owned(),
            default_pool_size: 20,
            max_prepared_statements: None,
        }
    }
}

/// The PgBouncer 1.24 `scripts/build-pgbouncer` built (`scripts/test` runs
/// it): `RELAYGER_TEST_PGBOUNCER`, else `pgbouncer-1.24.1/bin/pgbouncer` in
/// the target directory.
pub fn built_binary() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os("RELAYGER_TEST_PGBOUNCER") {
        return Ok(PathBuf::from(path));
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let path = target.join("pgbouncer-1.24.1/bin/pgbouncer");
    if !path.is_file() {
        bail!(
            "{} is missing; run scripts/build-pgbouncer (scripts/test does)",
            path.display()
        );
    }
    Ok(path)
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
        PgBouncer::start_with(database_url, &Settings::packaged(pool_mode))
    }

    /// Starts PgBouncer as `settings` say, serving the database of
    /// `database_url` under the same name, with an admin console
    /// ([`PgBouncer::show`]); returns once it listens.
    pub fn start_with(database_url: &str, settings: &Settings) -> anyhow::Result<PgBouncer> {
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
        let mut ini = format!(
            "[databases]\n{database} = {server}\n\n[pgbouncer]\n\
             listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n\
             auth_type = any\nadmin_users = {user}\npool_mode = {pool_mode}\n\
             max_client_conn = 500\ndefault_pool_size = {pool_size}\n\
             logfile = {log}\n",
            database = up.database,
            pool_mode = settings.pool_mode,
            pool_size = settings.default_pool_size,
            log = log.display(),
        );
        if let Some(max) = settings.max_prepared_statements {
            ini.push_str(&format!("max_prepared_statements = {max}\n"));
        }
        let ini_path = dir.join("pgbouncer.ini");
        std::fs::write(&ini_path, ini).context("write pgbouncer.ini")?;
        give_to_cluster_owner(&dir)?;
        let mut command = Command::new(
            settings
                .binary
                .clone()
                .unwrap_or_else(|| PathBuf::from("pgbouncer")),
        );
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
            .with_context(|| format!("spawn pgbouncer ({:?})", settings.binary))?;
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
            admin_url: format!("postgres://{user}@127.0.0.1:{port}/pgbouncer"),
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

    /// The rows of admin console command `command` (`SHOW POOLS`, `SHOW
    /// STATS`, …), each column by name (through `psql`: the console speaks
    /// only the simple query protocol).
    pub fn show(&self, command: &str) -> anyhow::Result<Vec<HashMap<String, String>>> {
        let output = Command::new("psql")
            .args(["-X", "-q", "-A", "-F", "\t", "-P", "footer=off", "-d"])
            .arg(&self.admin_url)
            .args(["-c", command])
            .stdin(Stdio::null())
            .output()
            .context("run psql on the admin console")?;
        if !output.status.success() {
            bail!("{command}: {}", String::from_utf8_lossy(&output.stderr));
        }
        let text = String::from_utf8(output.stdout).context("psql output")?;
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next().context("a header")?.split('\t').collect();
        Ok(lines
            .map(|line| {
                header
                    .iter()
                    .zip(line.split('\t'))
                    .map(|(name, value)| ((*name).to_owned(), value.to_owned()))
                    .collect()
            })
            .collect())
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
