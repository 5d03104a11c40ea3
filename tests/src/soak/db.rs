//! The soak's own view of the database: a connection that reconnects after
//! PostgreSQL restarts, the checkpoint sampler, and the completion count.

use std::collections::HashMap;
use std::time::Duration;

use anyhow::Context;
use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Text, Uuid as SqlUuid};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use tokio::sync::watch;
use uuid::Uuid;

/// How often the checkpoints are read.
const SAMPLE_EVERY: Duration = Duration::from_millis(200);

pub(crate) struct Db {
    url: String,
    conn: Option<AsyncPgConnection>,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL may carry a password.
        f.debug_struct("Db")
            .field("connected", &self.conn.is_some())
            .finish_non_exhaustive()
    }
}

impl Db {
    pub(crate) fn new(url: &str) -> Db {
        Db {
            url: url.to_owned(),
            conn: None,
        }
    }

    /// A live connection, opened again after a failure.
    pub(crate) async fn conn(&mut self) -> anyhow::Result<&mut AsyncPgConnection> {
        if self.conn.is_none() {
            let conn = AsyncPgConnection::establish(&self.url)
                .await
                .context("connect to PostgreSQL")?;
            self.conn = Some(conn);
        }
        self.conn.as_mut().context("connection")
    }

    /// Drops the connection after an error, so the next call reconnects.
    pub(crate) fn reset(&mut self) {
        self.conn = None;
    }
}

#[derive(QueryableByName)]
struct CheckpointRow {
    #[diesel(sql_type = SqlUuid)]
    runtime_id: Uuid,
    #[diesel(sql_type = SqlUuid)]
    room_id: Uuid,
    #[diesel(sql_type = BigInt)]
    seq: i64,
}

/// What the checkpoint sampler saw.
#[derive(Debug, Default, Clone)]
pub(crate) struct CheckpointWatch {
    pub(crate) samples: u64,
    /// Samples that failed (PostgreSQL restarting).
    pub(crate) failed_samples: u64,
    /// (room, earlier seq, later seq) for every move backwards.
    pub(crate) regressions: Vec<(Uuid, i64, i64)>,
    /// Checkpoints that vanished between two samples.
    pub(crate) vanished: u64,
    pub(crate) rooms: usize,
}

/// Reads every runtime checkpoint until `stop` turns true; a checkpoint
/// must never be lower than in an earlier sample, nor disappear.
pub(crate) async fn watch_checkpoints(
    url: String,
    mut stop: watch::Receiver<bool>,
) -> CheckpointWatch {
    let mut db = Db::new(&url);
    let mut seen: HashMap<(Uuid, Uuid), i64> = HashMap::new();
    let mut watch = CheckpointWatch::default();
    loop {
        match sample(&mut db).await {
            Ok(rows) => {
                watch.samples += 1;
                let mut present = 0;
                for row in rows {
                    present += 1;
                    let key = (row.runtime_id, row.room_id);
                    if let Some(before) = seen.insert(key, row.seq)
                        && row.seq < before
                    {
                        watch.regressions.push((row.room_id, before, row.seq));
                    }
                }
                if present < seen.len() {
                    watch.vanished += 1;
                }
            }
            Err(_) => {
                watch.failed_samples += 1;
                db.reset();
            }
        }
        // One last sample after the stop, so the final state is compared too.
        if *stop.borrow() {
            break;
        }
        let _ = tokio::time::timeout(SAMPLE_EVERY, stop.changed()).await;
    }
    watch.rooms = seen.len();
    watch
}

async fn sample(db: &mut Db) -> anyhow::Result<Vec<CheckpointRow>> {
    let conn = db.conn().await?;
    Ok(
        diesel::sql_query("SELECT runtime_id, room_id, seq FROM runtime_checkpoints")
            .load(conn)
            .await?,
    )
}

#[derive(QueryableByName, Debug, Default, Clone, Copy)]
pub(crate) struct JobTally {
    #[diesel(sql_type = BigInt)]
    pub(crate) jobs: i64,
    #[diesel(sql_type = BigInt)]
    pub(crate) done: i64,
}

/// How many jobs the runtime has and how many are final (handled, skipped
/// or dead).
pub(crate) async fn job_tally(db: &mut Db, runtime_id: Uuid) -> anyhow::Result<JobTally> {
    let conn = db.conn().await?;
    let tally = diesel::sql_query(
        "SELECT count(*) AS jobs,
                count(*) FILTER (WHERE state IN ('handled', 'skipped', 'dead')) AS done
         FROM jobs WHERE runtime_id = $1",
    )
    .bind::<SqlUuid, _>(runtime_id)
    .get_result(conn)
    .await;
    match tally {
        Ok(tally) => Ok(tally),
        Err(err) => {
            db.reset();
            Err(err.into())
        }
    }
}

#[derive(QueryableByName)]
struct RuntimeRow {
    #[diesel(sql_type = SqlUuid)]
    id: Uuid,
}

/// The runtime's id by agent and name, straight from the table.
pub(crate) async fn runtime_id(db: &mut Db, agent_id: Uuid, name: &str) -> anyhow::Result<Uuid> {
    let conn = db.conn().await?;
    let row: RuntimeRow =
        diesel::sql_query("SELECT id FROM runtimes WHERE agent_id = $1 AND name = $2")
            .bind::<SqlUuid, _>(agent_id)
            .bind::<Text, _>(name)
            .get_result(conn)
            .await
            .context("the runtime row")?;
    Ok(row.id)
}

/// Waits until the synchronous standby confirms a commit: with
/// `synchronous_standby_names` set, a transaction that wrote WAL returns
/// from COMMIT only once the standby has flushed it.
pub(crate) async fn wait_for_synchronous_standby(
    db: &mut Db,
    timeout: Duration,
) -> anyhow::Result<()> {
    let commit = async {
        diesel::sql_query("SELECT pg_current_xact_id()::text AS xid")
            .execute(db.conn().await?)
            .await
            .context("a commit the standby confirms")
    };
    tokio::time::timeout(timeout, commit)
        .await
        .with_context(|| {
            format!("no synchronous standby confirmed a commit within {timeout:?}")
        })??;
    Ok(())
}
