//! [`PooledConnection::pipelined_transaction`] against a real database:
//! `BEGIN` and `COMMIT` share flights with the statements and still run in
//! order, a failure writes nothing, and a dropped transaction closes its
//! connection.

use diesel::QueryableByName;
use diesel::result::QueryResult;
use diesel::sql_types::BigInt;
use diesel_async::{AsyncPgConnection, RunQueryDsl, SimpleAsyncConnection};

use super::{Committed, Count, begin, commit_after};
use crate::prepared::CachedExt;
use crate::test_support::TestDatabase;
use crate::{Store, StoreError};

#[derive(QueryableByName)]
struct Xid {
    #[diesel(sql_type = diesel::sql_types::Nullable<BigInt>)]
    xid: Option<i64>,
}

/// The transaction id of the running transaction, if it has one (none
/// outside a transaction or before its first write). A text of its own
/// per `tag`, so its first run must be prepared.
fn current_xid<'a>(
    mut conn: &'a AsyncPgConnection,
    tag: &'static str,
) -> impl Future<Output = QueryResult<Xid>> + Send + 'a {
    let sql = match tag {
        "first" => "SELECT txid_current_if_assigned() AS xid /* first */",
        _ => "SELECT txid_current_if_assigned() AS xid /* last */",
    };
    diesel::sql_query(sql).cached().get_result(&mut conn)
}

fn insert<'a>(
    mut conn: &'a AsyncPgConnection,
    id: i32,
) -> impl Future<Output = QueryResult<usize>> + Send + 'a {
    diesel::sql_query("INSERT INTO pipelined (id) VALUES ($1)")
        .bind::<diesel::sql_types::Integer, _>(id)
        .cached()
        .execute(&mut conn)
}

/// A test database with the table the pipelined transactions write.
async fn with_table() -> (TestDatabase, Store) {
    let db = TestDatabase::create().await;
    let store = db.store().await;
    store
        .conn()
        .await
        .expect("connection")
        .batch_execute("CREATE TABLE pipelined (id int PRIMARY KEY)")
        .await
        .expect("table");
    (db, store)
}

async fn rows(conn: &mut AsyncPgConnection) -> i64 {
    diesel::sql_query("SELECT count(*) AS count FROM pipelined")
        .get_result::<Count>(conn)
        .await
        .expect("count")
        .count
}

#[tokio::test]
async fn a_pipelined_transaction_sends_begin_and_commit_in_its_flights() {
    let (_db, store) = with_table().await;
    let mut conn = store.conn().await.expect("connection");
    let before = store.statement_counts();
    // A fresh connection's statements: each is prepared on its first
    // run, and still runs in the order sent, `COMMIT` last.
    let (first, last) = conn
        .pipelined_transaction(async |conn| {
            let shared: &AsyncPgConnection = conn;
            let (begun, _, first) = futures_util::try_join!(
                begin(shared),
                insert(shared, 1),
                current_xid(shared, "first")
            )?;
            let last = commit_after(shared, begun, async {
                Ok(current_xid(shared, "last").await?)
            })
            .await?;
            Ok(last.map(|last| (first.xid, last.xid)))
        })
        .await
        .expect("committed");
    assert!(first.is_some(), "the insert ran inside the transaction");
    assert_eq!(first, last, "the last statement ran before COMMIT");
    let sent = store.statement_counts();
    assert_eq!(rows(&mut conn).await, 1, "committed");
    assert_eq!(
        sent.statements - before.statements,
        5,
        "BEGIN, insert, read, read, COMMIT"
    );
    // Prepared now: the same transaction again is two round trips.
    let before = store.statement_counts();
    conn.pipelined_transaction(async |conn| {
        let shared: &AsyncPgConnection = conn;
        let (begun, _) = futures_util::try_join!(begin(shared), insert(shared, 2))?;
        commit_after(shared, begun, async { Ok(insert(shared, 3).await?) }).await
    })
    .await
    .expect("committed");
    let sent = store.statement_counts();
    assert_eq!(sent.round_trips() - before.round_trips(), 2);
    assert_eq!(rows(&mut conn).await, 3);
    assert_eq!(store.pool.status().size, 1, "the connection stays pooled");
}

#[tokio::test]
async fn a_failed_pipelined_transaction_writes_nothing_and_leaves_a_clean_connection() {
    let (_db, store) = with_table().await;
    let mut conn = store.conn().await.expect("connection");
    // The last statement fails (a duplicate key): the COMMIT behind it
    // ends the transaction as a rollback.
    let failed = conn
        .pipelined_transaction(async |conn| {
            let shared: &AsyncPgConnection = conn;
            let (begun, _) = futures_util::try_join!(begin(shared), insert(shared, 1))?;
            commit_after(shared, begun, async { Ok(insert(shared, 1).await?) }).await
        })
        .await;
    assert!(failed.is_err(), "{failed:?}");
    // The body fails between its flights (a rule's answer): rolled back.
    let refused: Result<(), StoreError> = conn
        .pipelined_transaction(async |conn| {
            let shared: &AsyncPgConnection = conn;
            futures_util::try_join!(begin(shared), insert(shared, 2))?;
            Err(StoreError::not_found("refused after the first flight"))
        })
        .await;
    assert!(refused.is_err());
    assert_eq!(rows(&mut conn).await, 0, "nothing was written");
    let outside: Xid = current_xid(&conn, "first").await.expect("xid");
    assert_eq!(outside.xid, None, "no transaction left open");
    drop(conn);
    assert_eq!(
        store.pool.status().size,
        1,
        "a clean connection stays pooled"
    );
}

#[tokio::test]
async fn a_pipelined_transaction_dropped_midway_closes_its_connection() {
    let (_db, store) = with_table().await;
    let mut conn = store.conn().await.expect("connection");
    let (wrote, written) = tokio::sync::oneshot::channel();
    let transaction =
        conn.pipelined_transaction(async move |conn| -> Result<Committed<()>, StoreError> {
            let shared: &AsyncPgConnection = conn;
            futures_util::try_join!(begin(shared), insert(shared, 1))?;
            let _ = wrote.send(());
            std::future::pending().await
        });
    tokio::select! {
        _ = transaction => panic!("the transaction never ends"),
        _ = written => {}
    }
    drop(conn);
    assert_eq!(store.pool.status().size, 0, "taken out of the pool");
    let mut conn = store.conn().await.expect("connection");
    assert_eq!(rows(&mut conn).await, 0, "rolled back");
}
