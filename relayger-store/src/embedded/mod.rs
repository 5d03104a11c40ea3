//! The self-managed PostgreSQL behind `relayger-server`'s zero-configuration
//! mode and the test suite's throwaway cluster.
//!
//! Given a data directory it finds the installed server binaries, runs
//! `initdb` on first start, starts the cluster on a private loopback port with
//! no Unix socket, and stops it again. PostgreSQL refuses to run as root, so a
//! root process runs it through `runuser` as a dedicated user: `postgres`, or
//! the one configured (never `root` or `nobody`); as root it touches only
//! paths nobody else can change ([`ownership`]).
//!
//! Layout under the data directory:
//! ```text
//! DATA_DIR/relayger.lock      held by the process using the directory (its id)
//! DATA_DIR/pg-password        the superuser password (persistent mode, 0600)
//! DATA_DIR/postgresql/        owned by the user PostgreSQL runs as
//! DATA_DIR/postgresql/data    PGDATA
//! DATA_DIR/postgresql/server.log
//! ```

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use thiserror::Error;

mod bin_dir;
mod lock;
mod ownership;
#[cfg(test)]
mod tests;

pub use self::bin_dir::find_bin_dir;

use lock::{DataDirLock, lock_data_dir};
use ownership::DbUser;

const DATA_SUBDIR: &str = "postgresql";
const PASSWORD_FILE: &str = "pg-password";
const SUPERUSER: &str = "postgres";
/// How often autovacuum looks at the server's own cluster (PostgreSQL's
/// default is a minute). The server's hot statements run cached generic
/// plans; one planned while a table was nearly empty keeps its sequential
/// scans until the next ANALYZE re-plans it, so a table that grows from
/// empty (a new deployment, a busy hour) should be analyzed within seconds:
/// `bench p1` on a fresh cluster spent 4.7 ms a question executing
/// statements with the default and 1.9 ms with an ANALYZE every few seconds.
const AUTOVACUUM_NAPTIME: &str = "5s";

/// The database the server uses inside a persistent cluster.
pub const PERSISTENT_DATABASE: &str = "relayger";

/// How the cluster is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterMode {
    /// `relayger-server`'s own data: password authentication, durable settings.
    Persistent,
    /// A test cluster: trust authentication on loopback and durability turned
    /// off (fsync, full-page writes), because it is thrown away afterwards.
    Throwaway,
}

#[derive(Debug, Error)]
pub enum EmbeddedError {
    #[error(
        "PostgreSQL server binaries (initdb, pg_ctl, postgres) were not found in PATH, \
         `pg_config --bindir` or /usr/lib/postgresql/*/bin. Install the PostgreSQL server \
         (Debian/Ubuntu: `apt-get install postgresql`; Fedora: `dnf install postgresql-server`; \
         macOS: `brew install postgresql`), set RELAYGER_PG_BIN_DIR, or pass --database-url"
    )]
    BinariesNotFound,
    #[error("cannot prepare the data directory {path}: {source}")]
    DataDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "PostgreSQL runs as user `{user}`, which cannot reach {path}; choose a data directory \
         whose parent directories that user can enter (for example under /var/lib or /tmp)"
    )]
    Unreachable { user: String, path: PathBuf },
    #[error(
        "refusing to prepare the data directory as root: {path} {reason}; choose a data \
         directory that only root can change (for example under /var/lib)"
    )]
    UnsafeDataDir { path: PathBuf, reason: String },
    #[error(
        "the data directory {path} is in use by {holder}; stop it or choose another data directory"
    )]
    InUse { path: PathBuf, holder: String },
    #[error("{detail}")]
    PostgresUser { detail: String },
    #[error("`{command}` failed: {detail}")]
    Command { command: String, detail: String },
    #[error("cannot generate a password: the system random source failed")]
    Random,
}

/// A running cluster started (or adopted) by this process. Dropping it stops
/// the cluster unless it was [`detach`](EmbeddedPostgres::detach)ed.
#[derive(Debug)]
pub struct EmbeddedPostgres {
    bin_dir: PathBuf,
    pgdata: PathBuf,
    run_as: Option<String>,
    port: u16,
    database_url: String,
    running: bool,
    /// Held while this handle lives (dropped after the cluster stops).
    _lock: DataDirLock,
}

impl EmbeddedPostgres {
    /// Starts the cluster under `data_dir`, creating it on first use. A cluster
    /// left running by a crashed process is adopted rather than started twice.
    /// As root it runs as `postgres`; [`EmbeddedPostgres::start_as`] chooses.
    pub fn start(data_dir: &Path, mode: ClusterMode) -> Result<EmbeddedPostgres, EmbeddedError> {
        EmbeddedPostgres::start_as(data_dir, mode, None)
    }

    /// [`EmbeddedPostgres::start`], run (when this process is root) as
    /// `postgres_user` instead of `postgres`: a dedicated user, never `root`
    /// or `nobody`. Without root no user can be chosen (it is an error).
    pub fn start_as(
        data_dir: &Path,
        mode: ClusterMode,
        postgres_user: Option<&str>,
    ) -> Result<EmbeddedPostgres, EmbeddedError> {
        let bin_dir = find_bin_dir()?;
        let user = ownership::postgres_user(postgres_user)?;
        let run_as = user.as_ref().map(|user| user.name.clone());
        let data_dir = absolute(data_dir)?;
        let owner_dir = data_dir.join(DATA_SUBDIR);
        let pgdata = owner_dir.join("data");
        prepare_dirs(&data_dir, &owner_dir, user.as_ref())?;
        let lock = lock_data_dir(&data_dir)?;

        let password = match mode {
            ClusterMode::Persistent => Some(load_or_create_password(&data_dir)?),
            ClusterMode::Throwaway => None,
        };
        if !pgdata.join("PG_VERSION").exists() {
            initdb(
                &bin_dir,
                &owner_dir,
                &pgdata,
                user.as_ref(),
                password.as_deref(),
                mode,
            )?;
        }

        let mut cluster = EmbeddedPostgres {
            bin_dir,
            pgdata,
            run_as,
            port: 0,
            database_url: String::new(),
            running: false,
            _lock: lock,
        };
        match cluster.running_port() {
            Some(port) => {
                tracing::info!(
                    port,
                    "adopting the PostgreSQL cluster left running in the data directory"
                );
                cluster.port = port;
            }
            None => cluster.port = cluster.start_on_free_port(&owner_dir, mode)?,
        }
        cluster.running = true;
        let database = match mode {
            ClusterMode::Persistent => PERSISTENT_DATABASE,
            ClusterMode::Throwaway => "postgres",
        };
        cluster.database_url = url(password.as_deref(), cluster.port, database);
        Ok(cluster)
    }

    /// The URL of the cluster's working database (`relayger` in persistent
    /// mode, `postgres` for a throwaway cluster). In persistent mode the
    /// caller creates that database with [`ensure_database`].
    pub fn database_url(&self) -> &str {
        &self.database_url
    }

    /// The URL of the maintenance database `postgres` on the same cluster.
    pub fn maintenance_url(&self) -> String {
        self.database_url
            .rsplit_once('/')
            .map(|(base, _)| format!("{base}/postgres"))
            .unwrap_or_default()
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Stops the cluster (fast shutdown: running transactions roll back,
    /// committed data is safe).
    pub fn stop(mut self) -> Result<(), EmbeddedError> {
        self.stop_inner()
    }

    /// Leaves the cluster running after this handle is dropped; a later
    /// [`stop_data_dir`] stops it.
    pub fn detach(mut self) {
        self.running = false;
    }

    fn stop_inner(&mut self) -> Result<(), EmbeddedError> {
        if !self.running {
            return Ok(());
        }
        self.running = false;
        pg_ctl_stop(&self.bin_dir, &self.pgdata, self.run_as.as_deref())
    }

    /// The port of a postmaster already serving this PGDATA, if any.
    fn running_port(&self) -> Option<u16> {
        let status = run(pg_command(&self.bin_dir, "pg_ctl", self.run_as.as_deref())
            .arg("status")
            .arg("-D")
            .arg(&self.pgdata))
        .ok()?;
        if !status.status.success() {
            return None;
        }
        read_pid_file_port(&self.pgdata)
    }

    fn start_on_free_port(
        &self,
        owner_dir: &Path,
        mode: ClusterMode,
    ) -> Result<u16, EmbeddedError> {
        let mut last_error = None;
        for _ in 0..5 {
            let port = free_port()?;
            let mut options = format!(
                "-c port={port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=''"
            );
            if mode == ClusterMode::Throwaway {
                options.push_str(
                    " -c fsync=off -c synchronous_commit=off -c full_page_writes=off \
                     -c max_connections=400 -c shared_buffers=128MB",
                );
            } else {
                options.push_str(" -c max_connections=200");
                options.push_str(&format!(" -c autovacuum_naptime={AUTOVACUUM_NAPTIME}"));
            }
            let output = run(pg_command(&self.bin_dir, "pg_ctl", self.run_as.as_deref())
                .arg("start")
                .arg("-w")
                .args(["-t", "60"])
                .arg("-D")
                .arg(&self.pgdata)
                .arg("-l")
                .arg(owner_dir.join("server.log"))
                .arg("-o")
                .arg(options))?;
            if output.status.success() {
                return Ok(port);
            }
            last_error = Some(command_error(
                "pg_ctl start",
                &output,
                &owner_dir.join("server.log"),
            ));
        }
        Err(last_error.unwrap_or(EmbeddedError::Command {
            command: "pg_ctl start".into(),
            detail: "no free port".into(),
        }))
    }
}

impl Drop for EmbeddedPostgres {
    fn drop(&mut self) {
        if let Err(err) = self.stop_inner() {
            tracing::warn!(%err, "stopping the self-managed PostgreSQL failed");
        }
    }
}

/// Stops a cluster under `data_dir` that a detached handle left running.
/// Does nothing when none is running.
pub fn stop_data_dir(data_dir: &Path) -> Result<(), EmbeddedError> {
    let bin_dir = find_bin_dir()?;
    let owner_dir = absolute(data_dir)?.join(DATA_SUBDIR);
    let run_as = ownership::cluster_user(&owner_dir)?.map(|user| user.name);
    let pgdata = owner_dir.join("data");
    if !pgdata.join("postmaster.pid").exists() {
        return Ok(());
    }
    pg_ctl_stop(&bin_dir, &pgdata, run_as.as_deref())
}

/// Whether a postmaster is serving the cluster under `data_dir`.
pub fn is_running(data_dir: &Path) -> Result<bool, EmbeddedError> {
    let bin_dir = find_bin_dir()?;
    let owner_dir = absolute(data_dir)?.join(DATA_SUBDIR);
    let run_as = ownership::cluster_user(&owner_dir)?.map(|user| user.name);
    let pgdata = owner_dir.join("data");
    let output = run(pg_command(&bin_dir, "pg_ctl", run_as.as_deref())
        .arg("status")
        .arg("-D")
        .arg(&pgdata))?;
    Ok(output.status.success())
}

/// The database URL of a persistent cluster running under `data_dir`, for
/// administrative tools that attach to a server's self-managed database.
pub fn running_url(data_dir: &Path) -> Result<Option<String>, EmbeddedError> {
    let data_dir = absolute(data_dir)?;
    if !is_running(&data_dir)? {
        return Ok(None);
    }
    let pgdata = data_dir.join(DATA_SUBDIR).join("data");
    let Some(port) = read_pid_file_port(&pgdata) else {
        return Ok(None);
    };
    let password = std::fs::read_to_string(data_dir.join(PASSWORD_FILE)).ok();
    Ok(Some(url(
        password.as_deref().map(str::trim),
        port,
        PERSISTENT_DATABASE,
    )))
}

fn url(password: Option<&str>, port: u16, database: &str) -> String {
    match password {
        Some(password) => format!("postgres://{SUPERUSER}:{password}@127.0.0.1:{port}/{database}"),
        None => format!("postgres://{SUPERUSER}@127.0.0.1:{port}/{database}"),
    }
}

/// Line 4 of postmaster.pid is the port the postmaster listens on.
fn read_pid_file_port(pgdata: &Path) -> Option<u16> {
    let pid_file = std::fs::read_to_string(pgdata.join("postmaster.pid")).ok()?;
    pid_file.lines().nth(3)?.trim().parse().ok()
}

fn pg_ctl_stop(bin_dir: &Path, pgdata: &Path, run_as: Option<&str>) -> Result<(), EmbeddedError> {
    let output = run(pg_command(bin_dir, "pg_ctl", run_as)
        .arg("stop")
        .arg("-w")
        .args(["-t", "60"])
        .args(["-m", "fast"])
        .arg("-D")
        .arg(pgdata))?;
    if output.status.success() || !pgdata.join("postmaster.pid").exists() {
        Ok(())
    } else {
        Err(command_error("pg_ctl stop", &output, Path::new("")))
    }
}

fn initdb(
    bin_dir: &Path,
    owner_dir: &Path,
    pgdata: &Path,
    user: Option<&DbUser>,
    password: Option<&str>,
    mode: ClusterMode,
) -> Result<(), EmbeddedError> {
    let mut command = pg_command(bin_dir, "initdb", user.map(|user| user.name.as_str()));
    command
        .arg("-D")
        .arg(pgdata)
        .args(["-U", SUPERUSER, "-E", "UTF8", "--locale=C"]);
    // initdb reads the password from a file the cluster's user can read; it is
    // removed as soon as initdb is done. That user owns the directory, so the
    // file is made fresh (a link or file planted there is removed, never
    // followed) and handed over through its open handle.
    let pwfile = owner_dir.join("initdb-pwfile");
    match password {
        Some(password) => {
            write_private(&pwfile, password, user)?;
            command
                .arg("--auth=scram-sha-256")
                .arg(format!("--pwfile={}", pwfile.display()));
        }
        None => {
            command.arg("--auth=trust");
        }
    }
    if mode == ClusterMode::Throwaway {
        command.arg("--no-sync");
    }
    let output = run(&mut command);
    let _ = std::fs::remove_file(&pwfile);
    let output = output?;
    if output.status.success() {
        Ok(())
    } else {
        // Leave no half-initialised PGDATA behind: the next start retries.
        let _ = std::fs::remove_dir_all(pgdata);
        Err(command_error("initdb", &output, Path::new("")))
    }
}

fn prepare_dirs(
    data_dir: &Path,
    owner_dir: &Path,
    user: Option<&DbUser>,
) -> Result<(), EmbeddedError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| EmbeddedError::DataDir { path, source }
    };
    let Some(user) = user else {
        return std::fs::create_dir_all(owner_dir).map_err(io(owner_dir));
    };
    use std::os::unix::fs::PermissionsExt;
    // Root: only through paths nobody else can change, checked again once
    // the missing part exists.
    ownership::check_path(data_dir)?;
    std::fs::create_dir_all(data_dir).map_err(io(data_dir))?;
    ownership::check_path(data_dir)?;
    // The cluster's user must be able to enter the data directory, but
    // not list it (it holds the password file).
    let mode = std::fs::metadata(data_dir)
        .map_err(io(data_dir))?
        .permissions()
        .mode();
    if mode & 0o001 == 0 {
        std::fs::set_permissions(
            data_dir,
            std::fs::Permissions::from_mode((mode & 0o7770) | 0o001),
        )
        .map_err(io(data_dir))?;
    }
    ownership::hand_over_dir(owner_dir, user)?;
    let probe = run(Command::new("runuser")
        .args(["-u", &user.name, "--", "test", "-w"])
        .arg(owner_dir))?;
    if !probe.status.success() {
        return Err(EmbeddedError::Unreachable {
            user: user.name.clone(),
            path: owner_dir.to_path_buf(),
        });
    }
    Ok(())
}

fn load_or_create_password(data_dir: &Path) -> Result<String, EmbeddedError> {
    let path = data_dir.join(PASSWORD_FILE);
    if let Ok(existing) = std::fs::read_to_string(&path) {
        let existing = existing.trim();
        if !existing.is_empty() {
            return Ok(existing.to_owned());
        }
    }
    let mut bytes = [0u8; 24];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes)
        .map_err(|_| EmbeddedError::Random)?;
    let password: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    write_private(&path, &password, None)?;
    Ok(password)
}

/// Writes `content` to a fresh 0600 file at `path`, owned by `owner` when
/// given ([`ownership::create_private`]).
fn write_private(path: &Path, content: &str, owner: Option<&DbUser>) -> Result<(), EmbeddedError> {
    use std::io::Write;
    let io = |source| EmbeddedError::DataDir {
        path: path.to_path_buf(),
        source,
    };
    let mut file = ownership::create_private(path, owner)?;
    file.write_all(content.as_bytes()).map_err(io)?;
    file.sync_all().map_err(io)
}

fn pg_command(bin_dir: &Path, program: &str, run_as: Option<&str>) -> Command {
    let program = bin_dir.join(program);
    let mut command = match run_as {
        Some(user) => {
            let mut command = Command::new("runuser");
            command.args(["-u", user, "--"]).arg(program);
            command
        }
        None => Command::new(program),
    };
    // A directory the cluster's user can enter; the caller's may be private.
    command.current_dir("/");
    // Keep the caller's libpq settings from steering initdb/pg_ctl.
    for var in [
        "PGDATA",
        "PGPORT",
        "PGHOST",
        "PGUSER",
        "PGPASSWORD",
        "PGDATABASE",
    ] {
        command.env_remove(var);
    }
    command.env("LC_ALL", "C");
    command
}

fn run(command: &mut Command) -> Result<Output, EmbeddedError> {
    command.output().map_err(|e| EmbeddedError::Command {
        command: format!("{:?}", command.get_program()),
        detail: e.to_string(),
    })
}

fn command_error(command: &str, output: &Output, log: &Path) -> EmbeddedError {
    let mut detail = String::from_utf8_lossy(&output.stderr).trim().to_owned();
    if detail.is_empty() {
        detail = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    }
    if let Ok(log) = std::fs::read_to_string(log) {
        let tail: Vec<&str> = log.lines().rev().take(10).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        detail.push_str("\nserver log:\n");
        detail.push_str(&tail.join("\n"));
    }
    EmbeddedError::Command {
        command: command.to_owned(),
        detail,
    }
}

fn free_port() -> Result<u16, EmbeddedError> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| EmbeddedError::Command {
        command: "bind 127.0.0.1:0".into(),
        detail: e.to_string(),
    })?;
    let port = listener
        .local_addr()
        .map_err(|e| EmbeddedError::Command {
            command: "local_addr".into(),
            detail: e.to_string(),
        })?
        .port();
    drop(listener);
    // Give the kernel a moment so PostgreSQL's bind does not race our close.
    std::thread::sleep(Duration::from_millis(5));
    Ok(port)
}

fn absolute(path: &Path) -> Result<PathBuf, EmbeddedError> {
    std::path::absolute(path).map_err(|source| EmbeddedError::DataDir {
        path: path.to_path_buf(),
        source,
    })
}
