//! The job spine's updates that change no indexed column stay on their
//! page (HOT) and write no index entry: a heartbeat (it renews only the
//! lease expiry) and a finish's update of its attempt (it fills in the
//! attempt's end). Read from the WAL those writes produced, so an index
//! on a renewed column shows as index entries here.

use diesel::QueryableByName;
use diesel::sql_types::Text;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use relayger_core::lease::DEFAULT_LEASE_MS;
use relayger_core::wire::StartFrom;
use serde_json::json;

use crate::support::{Agent, execute};

#[derive(QueryableByName, Debug)]
struct WalRecord {
    #[diesel(sql_type = Text)]
    relation: String,
    #[diesel(sql_type = Text)]
    record: String,
}

/// Where the next WAL record goes.
async fn wal_position(conn: &mut AsyncPgConnection) -> String {
    #[derive(QueryableByName)]
    struct Position {
        #[diesel(sql_type = Text)]
        lsn: String,
    }
    diesel::sql_query("SELECT pg_current_wal_insert_lsn()::text AS lsn")
        .get_result::<Position>(conn)
        .await
        .expect("the WAL position")
        .lsn
}

/// The WAL records written since `start` that change a relation of this
/// test's database: the relation's name and the record's type.
async fn records_since(conn: &mut AsyncPgConnection, start: &str) -> Vec<WalRecord> {
    // The test cluster commits asynchronously, and the WAL can be read only
    // as far as it is flushed: a synchronous commit of a write flushes it.
    execute(
        conn,
        "CREATE TABLE IF NOT EXISTS wal_flushed (at timestamptz);
         BEGIN; SET LOCAL synchronous_commit = on; INSERT INTO wal_flushed VALUES (now()); COMMIT",
    )
    .await;
    diesel::sql_query(
        "SELECT c.relname::text AS relation, r.record_type AS record
         FROM pg_get_wal_records_info($1::pg_lsn, pg_current_wal_flush_lsn()) r
         JOIN pg_class c
           ON c.relfilenode = (regexp_match(r.block_ref, 'rel \\d+/\\d+/(\\d+)'))[1]::oid
         WHERE (regexp_match(r.block_ref, 'rel \\d+/(\\d+)/'))[1]::oid
               = (SELECT oid FROM pg_database WHERE datname = current_database())",
    )
    .bind::<Text, _>(start)
    .load(conn)
    .await
    .expect("the WAL records")
}

/// The records on `table` and on its indexes (`{table}_…`).
fn on_table<'a>(records: &'a [WalRecord], table: &str) -> (Vec<&'a str>, Vec<&'a str>) {
    let index_prefix = format!("{table}_");
    let heap = records
        .iter()
        .filter(|r| r.relation == table)
        .map(|r| r.record.as_str())
        .collect();
    let indexes = records
        .iter()
        .filter(|r| r.relation.starts_with(&index_prefix))
        .map(|r| r.relation.as_str())
        .collect();
    (heap, indexes)
}

/// A few jobs, on pages with room for their renewed rows: whether a
/// renewal stays on its page then depends only on the columns it changes.
/// (How much room busy pages keep, the tables' fillfactor, shows in
/// `bench p2`'s WAL by relation.)
const JOBS: usize = 3;

#[tokio::test(flavor = "multi_thread")]
async fn heartbeats_and_a_finishs_attempt_update_write_no_index_entry() {
    let bot = Agent::start().await;
    let (asker, room) = bot.contact("asker").await;
    let runtime = bot
        .runtime("hot", StartFrom::Now, json!({"concurrency": JOBS}))
        .await;
    for n in 0..JOBS {
        bot.ask(&asker, room, &format!("stay on your page {n}"))
            .await;
    }
    let mut jobs = Vec::new();
    while jobs.len() < JOBS {
        let claimed = bot.claim(runtime, u32::try_from(JOBS).expect("jobs")).await;
        assert!(!claimed.jobs.is_empty(), "{claimed:?}");
        jobs.extend(claimed.jobs);
    }
    let mut conn = bot.connection().await;
    execute(&mut conn, "CREATE EXTENSION IF NOT EXISTS pg_walinspect").await;

    let start = wal_position(&mut conn).await;
    for job in &jobs {
        bot.store
            .heartbeat(
                &bot.agent.caller(),
                runtime,
                job.job_id,
                &job.owner,
                job.version,
                DEFAULT_LEASE_MS,
            )
            .await
            .expect("the lease is renewed");
    }
    let records = records_since(&mut conn, &start).await;
    let (heap, indexes) = on_table(&records, "jobs");
    assert_eq!(
        heap.iter().filter(|r| r.starts_with("HOT_UPDATE")).count(),
        JOBS,
        "a HOT update of each job: {heap:?}"
    );
    assert!(
        !heap.iter().any(|r| r.starts_with("UPDATE")),
        "a heartbeat moved its job off its page: {heap:?}"
    );
    assert!(
        indexes.is_empty(),
        "heartbeats wrote job index entries: {indexes:?}"
    );

    let start = wal_position(&mut conn).await;
    for job in &jobs {
        bot.reply(runtime, job).await;
    }
    let records = records_since(&mut conn, &start).await;
    let (heap, indexes) = on_table(&records, "attempts");
    assert_eq!(
        heap.iter().filter(|r| r.starts_with("HOT_UPDATE")).count(),
        JOBS,
        "a HOT update of each attempt: {heap:?}"
    );
    assert!(
        !heap.iter().any(|r| r.starts_with("UPDATE")),
        "a finish moved its attempt off its page: {heap:?}"
    );
    assert!(
        indexes.is_empty(),
        "finishes wrote attempt index entries: {indexes:?}"
    );
}
