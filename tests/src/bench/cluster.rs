//! The benchmark's own PostgreSQL: one durable cluster in a temporary
//! directory holding Relayger's database and pgbench's, so the baseline and
//! the product run against the same settings, disk and CPUs.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use relayger_store::embedded::{ClusterMode, EmbeddedPostgres, find_bin_dir};

/// The database Relayger's server uses.
const RELAYGER_DB: &str = "relayger";
/// The database `pgbench -i` fills.
const PGBENCH_DB: &str = "pgbench";

/// A running cluster with both databases and `pg_stat_statements` loaded.
#[derive(Debug)]
pub(crate) struct Cluster {
    pg: EmbeddedPostgres,
    bin_dir: PathBuf,
    pgdata: PathBuf,
}

/// The settings that decide what a commit costs, as the cluster reports them.
#[derive(Debug, Clone)]
pub(crate) struct ClusterSettings {
    pub(crate) version: String,
    pub(crate) fsync: String,
    pub(crate) synchronous_commit: String,
    pub(crate) full_page_writes: String,
    pub(crate) wal_sync_method: String,
    pub(crate) shared_buffers: String,
}

impl Cluster {
    /// Starts a durable cluster (ClusterMode::Persistent: fsync and
    /// synchronous_commit stay at their defaults, on) under `dir`, creates the
    /// two databases and restarts once so `pg_stat_statements` is preloaded.
    pub(crate) fn start(dir: &Path) -> anyhow::Result<Cluster> {
        let bin_dir = find_bin_dir()?;
        let pg = EmbeddedPostgres::start(dir, ClusterMode::Persistent)
            .context("start the benchmark's PostgreSQL")?;
        let maintenance = pg.maintenance_url();
        psql(
            &bin_dir,
            &maintenance,
            &format!("CREATE DATABASE {RELAYGER_DB}"),
        )?;
        psql(
            &bin_dir,
            &maintenance,
            &format!("CREATE DATABASE {PGBENCH_DB}"),
        )?;
        psql(
            &bin_dir,
            &maintenance,
            "ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'",
        )?;
        // Only a restart loads a preload library; the data directory (and its
        // password file) survive, so the same call brings it back.
        pg.stop().context("restart PostgreSQL (stop)")?;
        let pg = EmbeddedPostgres::start(dir, ClusterMode::Persistent)
            .context("restart PostgreSQL (start)")?;
        let cluster = Cluster {
            pg,
            bin_dir,
            pgdata: std::path::absolute(dir)?.join("postgresql").join("data"),
        };
        cluster.sql("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")?;
        // Where a stretch's WAL went, table by table (`DbProfile::wal_by_relation`).
        cluster.sql("CREATE EXTENSION IF NOT EXISTS pg_walinspect")?;
        // Planning time per statement, to tell re-planned statements (a
        // custom plan each call) from those that run a cached generic plan;
        // known only once the library is loaded, and a reload applies it.
        cluster.sql("ALTER SYSTEM SET pg_stat_statements.track_planning = on")?;
        cluster.sql("SELECT pg_reload_conf()")?;
        Ok(cluster)
    }

    /// The URL of Relayger's database.
    pub(crate) fn relayger_url(&self) -> String {
        self.url_of(RELAYGER_DB)
    }

    /// Creates an empty database `name` (for a peer job queue); its URL.
    pub(crate) fn create_database(&self, name: &str) -> anyhow::Result<String> {
        psql(
            &self.bin_dir,
            &self.pg.maintenance_url(),
            &format!("CREATE DATABASE {name}"),
        )?;
        Ok(self.url_of(name))
    }

    fn url_of(&self, database: &str) -> String {
        let maintenance = self.pg.maintenance_url();
        let base = maintenance
            .rsplit_once('/')
            .map(|(base, _)| base)
            .unwrap_or(&maintenance);
        format!("{base}/{database}")
    }

    /// The postmaster's pid (line 1 of postmaster.pid), for CPU accounting.
    pub(crate) fn postmaster_pid(&self) -> anyhow::Result<u32> {
        let text = std::fs::read_to_string(self.pgdata.join("postmaster.pid"))
            .context("read postmaster.pid")?;
        text.lines()
            .next()
            .and_then(|line| line.trim().parse().ok())
            .context("postmaster.pid has no pid")
    }

    /// Runs SQL in Relayger's database; its unaligned output (`|` between
    /// columns, one row a line).
    pub(crate) fn sql(&self, sql: &str) -> anyhow::Result<String> {
        psql(&self.bin_dir, &self.relayger_url(), sql)
    }

    pub(crate) fn settings(&self) -> anyhow::Result<ClusterSettings> {
        let show = |name: &str| -> anyhow::Result<String> {
            Ok(self.sql(&format!("SHOW {name}"))?.trim().to_owned())
        };
        Ok(ClusterSettings {
            version: self
                .sql("SELECT current_setting('server_version')")?
                .trim()
                .to_owned(),
            fsync: show("fsync")?,
            synchronous_commit: show("synchronous_commit")?,
            full_page_writes: show("full_page_writes")?,
            wal_sync_method: show("wal_sync_method")?,
            shared_buffers: show("shared_buffers")?,
        })
    }

    /// `pgbench -i -s SCALE` into the pgbench database.
    pub(crate) fn pgbench_init(&self, scale: u32) -> anyhow::Result<()> {
        let output = self
            .pgbench_command()
            .args(["-i", "-q", "-s", &scale.to_string()])
            .arg(self.url_of(PGBENCH_DB))
            .output()
            .context("run pgbench -i")?;
        if !output.status.success() {
            bail!(
                "pgbench -i failed: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Ok(())
    }

    /// `pgbench -N -c CLIENTS -j THREADS -T SECS`: the simple-update
    /// transaction (three updates/inserts and a select, one commit each).
    pub(crate) fn pgbench_run(
        &self,
        clients: u32,
        threads: u32,
        secs: u32,
    ) -> anyhow::Result<Pgbench> {
        let output = self
            .pgbench_command()
            .args(["-N", "-n"])
            .args(["-c", &clients.to_string()])
            .args(["-j", &threads.to_string()])
            .args(["-T", &secs.to_string()])
            .arg(self.url_of(PGBENCH_DB))
            .output()
            .context("run pgbench")?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        if !output.status.success() {
            bail!(
                "pgbench failed: {stdout}{}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Pgbench::parse(clients, &stdout)
    }

    fn pgbench_command(&self) -> Command {
        let mut command = Command::new(self.bin_dir.join("pgbench"));
        clean_env(&mut command);
        command
    }
}

/// One pgbench run's figures.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pgbench {
    pub(crate) clients: u32,
    pub(crate) tps: f64,
    pub(crate) latency_ms: f64,
}

impl Pgbench {
    fn parse(clients: u32, stdout: &str) -> anyhow::Result<Pgbench> {
        let number_after = |prefix: &str| -> Option<f64> {
            stdout.lines().find_map(|line| {
                line.trim()
                    .strip_prefix(prefix)?
                    .split_whitespace()
                    .next()?
                    .parse()
                    .ok()
            })
        };
        let tps = number_after("tps = ").context("pgbench printed no tps")?;
        let latency_ms =
            number_after("latency average = ").context("pgbench printed no latency average")?;
        Ok(Pgbench {
            clients,
            tps,
            latency_ms,
        })
    }
}

/// One statement's share of a measured stretch, from `pg_stat_statements`.
#[derive(Debug, Clone)]
pub(crate) struct StatementRow {
    pub(crate) calls: u64,
    pub(crate) total_ms: f64,
    /// Times planned (a cached generic plan is planned once per connection).
    pub(crate) plans: u64,
    pub(crate) plan_ms: f64,
    pub(crate) query: String,
}

/// The database's transaction and WAL counters at one moment.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct XactCounters {
    commits: u64,
    rollbacks: u64,
    wal_syncs: u64,
    wal_bytes: u64,
    /// The WAL flush position, in bytes from `0/0`.
    wal_lsn: u64,
}

/// One relation's share of a stretch's WAL, from `pg_walinspect`.
#[derive(Debug, Clone, Default)]
pub(crate) struct WalShare {
    pub(crate) relation: String,
    /// The resource manager and record type (`Heap INSERT`, `Btree INSERT_LEAF`, …).
    pub(crate) record: String,
    pub(crate) records: u64,
    pub(crate) bytes: u64,
    /// Bytes of full-page images among `bytes`.
    pub(crate) fpi_bytes: u64,
}

/// What the database did over a stretch: statements, commits, rollbacks.
#[derive(Debug, Clone, Default)]
pub(crate) struct DbProfile {
    pub(crate) statements: Vec<StatementRow>,
    pub(crate) total_calls: u64,
    pub(crate) total_ms: f64,
    pub(crate) total_plans: u64,
    pub(crate) total_plan_ms: f64,
    pub(crate) commits: u64,
    pub(crate) rollbacks: u64,
    /// WAL flushes to disk (`pg_stat_wal.wal_sync`, the whole cluster): the
    /// durable commits, fewer than the writing transactions when group
    /// commit joins them; read-only transactions flush nothing.
    pub(crate) wal_syncs: u64,
    /// WAL bytes written (`pg_stat_wal.wal_bytes`, the whole cluster).
    pub(crate) wal_bytes: u64,
    /// The stretch's WAL records by the relation they change (the first block
    /// a record names) and their type, heaviest first: where `wal_bytes` went.
    pub(crate) wal_by_relation: Vec<WalShare>,
    /// What the server's connections sent over the stretch (its `/metrics`).
    pub(crate) sent: super::procs::Sent,
}

impl Cluster {
    /// Starts a measured stretch: statement statistics reset, commit counters
    /// read.
    ///
    /// The set-up before a stretch may have grown tables by thousands of
    /// rows in seconds; autovacuum would ANALYZE them within its naptime (5 s
    /// on the self-managed cluster, `relayger_store::embedded`), which also
    /// makes every connection re-plan its cached statements. The stretch
    /// measures that steady state, not the seconds after a burst: the
    /// database is analyzed first.
    pub(crate) fn profile_start(&self) -> anyhow::Result<XactCounters> {
        self.sql("ANALYZE")?;
        self.sql("SELECT pg_stat_statements_reset()")?;
        self.xact_counters()
    }

    /// The statements Relayger's database ran since `profile_start`
    /// (pgbench's database excluded), heaviest first.
    pub(crate) fn profile_end(&self, start: XactCounters) -> anyhow::Result<DbProfile> {
        // The counters are per-backend and flushed at transaction end; a
        // short pause lets idle pool connections report theirs.
        std::thread::sleep(std::time::Duration::from_millis(600));
        let end = self.xact_counters()?;
        let rows = self.sql(
            "SELECT s.calls, round(s.total_exec_time::numeric, 3), s.plans, \
             round(s.total_plan_time::numeric, 3), regexp_replace(s.query, '\\s+', ' ', 'g') \
             FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid \
             WHERE d.datname = current_database() \
             AND s.query NOT LIKE '%pg_stat_statements%' \
             AND s.query NOT LIKE '%pg_stat_database%' \
             ORDER BY s.total_exec_time DESC",
        )?;
        let mut profile = DbProfile {
            commits: end.commits.saturating_sub(start.commits),
            rollbacks: end.rollbacks.saturating_sub(start.rollbacks),
            wal_syncs: end.wal_syncs.saturating_sub(start.wal_syncs),
            wal_bytes: end.wal_bytes.saturating_sub(start.wal_bytes),
            wal_by_relation: self.wal_by_relation(start.wal_lsn, end.wal_lsn)?,
            ..DbProfile::default()
        };
        for line in rows.lines() {
            let mut parts = line.splitn(5, '|');
            let (Some(calls), Some(ms), Some(plans), Some(plan_ms), Some(query)) = (
                parts.next(),
                parts.next(),
                parts.next(),
                parts.next(),
                parts.next(),
            ) else {
                continue;
            };
            let row = StatementRow {
                calls: calls.trim().parse().unwrap_or(0),
                total_ms: ms.trim().parse().unwrap_or(0.0),
                plans: plans.trim().parse().unwrap_or(0),
                plan_ms: plan_ms.trim().parse().unwrap_or(0.0),
                query: query.trim().to_owned(),
            };
            profile.total_calls += row.calls;
            profile.total_ms += row.total_ms;
            profile.total_plans += row.plans;
            profile.total_plan_ms += row.plan_ms;
            profile.statements.push(row);
        }
        Ok(profile)
    }

    /// The WAL records between two positions, summed by the relation of
    /// their first block (Relayger's own tables and indexes by name) and type.
    fn wal_by_relation(&self, start: u64, end: u64) -> anyhow::Result<Vec<WalShare>> {
        if end <= start {
            return Ok(Vec::new());
        }
        let rows = self.sql(&format!(
            "WITH r AS ( \
               SELECT resource_manager || ' ' || record_type AS kind, record_length, fpi_length, \
                      regexp_match(block_ref, 'rel \\d+/(\\d+)/(\\d+)') AS m \
               FROM pg_get_wal_records_info('0/0'::pg_lsn + {start}, '0/0'::pg_lsn + {end})) \
             SELECT CASE WHEN r.m IS NULL THEN '(no relation)' \
                         ELSE coalesce(c.relname, '(another database)') END, \
                    r.kind, count(*), sum(r.record_length), sum(r.fpi_length) \
             FROM r LEFT JOIN pg_class c ON c.relfilenode = (r.m)[2]::oid \
               AND (r.m)[1]::oid = (SELECT oid FROM pg_database WHERE datname = current_database()) \
             GROUP BY 1, 2 ORDER BY 4 DESC"
        ))?;
        Ok(rows
            .lines()
            .filter_map(|line| {
                let mut parts = line.split('|');
                Some(WalShare {
                    relation: parts.next()?.to_owned(),
                    record: parts.next()?.to_owned(),
                    records: parts.next()?.parse().ok()?,
                    bytes: parts.next()?.parse().ok()?,
                    fpi_bytes: parts.next()?.parse().ok()?,
                })
            })
            .collect())
    }

    fn xact_counters(&self) -> anyhow::Result<XactCounters> {
        let row = self.sql(
            "SELECT d.xact_commit, d.xact_rollback, w.wal_sync, w.wal_bytes, \
             pg_current_wal_flush_lsn() - '0/0'::pg_lsn \
             FROM pg_stat_database d, pg_stat_wal w \
             WHERE d.datname = current_database()",
        )?;
        let mut parts = row.trim().split('|');
        let mut next = || parts.next().and_then(|v| v.parse().ok()).unwrap_or(0);
        Ok(XactCounters {
            commits: next(),
            rollbacks: next(),
            wal_syncs: next(),
            wal_bytes: next(),
            wal_lsn: next(),
        })
    }
}

fn psql(bin_dir: &Path, url: &str, sql: &str) -> anyhow::Result<String> {
    let mut command = Command::new(bin_dir.join("psql"));
    clean_env(&mut command);
    let output = command
        .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"])
        .args(["-d", url, "-c", sql])
        .output()
        .context("run psql")?;
    if !output.status.success() {
        bail!(
            "psql `{sql}` failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The caller's libpq settings, which would steer psql, pgbench (and the
/// peers' node-postgres) elsewhere.
pub(crate) const LIBPQ_ENV: [&str; 7] = [
    "PGHOST",
    "PGPORT",
    "PGUSER",
    "PGPASSWORD",
    "PGDATABASE",
    "PGSERVICE",
    "PGOPTIONS",
];

fn clean_env(command: &mut Command) {
    for var in LIBPQ_ENV {
        command.env_remove(var);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_pgbench_output() {
        let out = "transaction type: <builtin: simple update>\n\
                   latency average = 2.345 ms\n\
                   initial connection time = 3.1 ms\n\
                   tps = 426.4 (without initial connection time)\n";
        let run = Pgbench::parse(1, out).expect("parse");
        assert!((run.tps - 426.4).abs() < 1e-9);
        assert!((run.latency_ms - 2.345).abs() < 1e-9);
    }
}
