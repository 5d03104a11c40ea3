//! Database errors as the store classifies them, raised by a real
//! PostgreSQL: a lost race (deadlock, lock or statement timeout) is
//! `Contention`, a backend that went away is `Connect`, whatever their
//! message says.

use diesel::QueryResult;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use relayger_store::StoreError;
use relayger_testdb::TestDatabase;

use crate::support::{SOMEONE_WAITS_ON_A_LOCK, connect, execute, query_n, wait_for};

/// The class a store error has, for the assertions' messages.
fn class(err: &StoreError) -> &'static str {
    match err {
        StoreError::Contention(_) => "contention",
        StoreError::Connect(_) => "connect",
        StoreError::Query(_) => "query",
        _ => "other",
    }
}

/// The class of a statement's failure; panics when it succeeds.
fn failure_class<T: std::fmt::Debug>(what: &str, answer: QueryResult<T>) -> &'static str {
    match answer {
        Ok(answer) => panic!("{what} succeeded: {answer:?}"),
        Err(err) => class(&StoreError::from(err)),
    }
}

async fn run(conn: &mut AsyncPgConnection, sql: &str) -> QueryResult<usize> {
    diesel::sql_query(sql).execute(conn).await
}

/// A database with a two-row table `pair` to lock rows of.
async fn database_with_a_pair() -> TestDatabase {
    let db = TestDatabase::create().await;
    execute(
        &mut connect(&db).await,
        "CREATE TABLE pair (id int PRIMARY KEY, n int NOT NULL);
         INSERT INTO pair VALUES (1, 0), (2, 0)",
    )
    .await;
    db
}

#[tokio::test]
async fn a_deadlock_is_contention() {
    let db = database_with_a_pair().await;
    let mut first = connect(&db).await;
    let mut second = connect(&db).await;
    execute(&mut first, "BEGIN; UPDATE pair SET n = 1 WHERE id = 1").await;
    execute(&mut second, "BEGIN; UPDATE pair SET n = 2 WHERE id = 2").await;
    // The first waits on the second's row, then the second on the first's.
    let crossing =
        tokio::spawn(async move { run(&mut first, "UPDATE pair SET n = 1 WHERE id = 2").await });
    wait_for(
        &mut connect(&db).await,
        "the first transaction to wait on the second's row",
        SOMEONE_WAITS_ON_A_LOCK,
    )
    .await;
    let closing = run(&mut second, "UPDATE pair SET n = 2 WHERE id = 1").await;
    let crossing = crossing.await.expect("the first update's task");
    // PostgreSQL breaks the cycle by failing exactly one of the two.
    let lost = match (crossing, closing) {
        (Err(lost), Ok(_)) | (Ok(_), Err(lost)) => lost,
        other => panic!("one of the two should lose the deadlock: {other:?}"),
    };
    assert_eq!(class(&StoreError::from(lost)), "contention");
}

#[tokio::test]
async fn a_lock_timeout_is_contention() {
    let db = database_with_a_pair().await;
    let mut holder = connect(&db).await;
    execute(
        &mut holder,
        "BEGIN; SELECT * FROM pair WHERE id = 1 FOR UPDATE",
    )
    .await;
    let mut waiter = connect(&db).await;
    execute(&mut waiter, "SET lock_timeout = '50ms'").await;
    let answer = run(&mut waiter, "UPDATE pair SET n = 1 WHERE id = 1").await;
    assert_eq!(failure_class("the update", answer), "contention");
}

#[tokio::test]
async fn a_statement_timeout_is_contention() {
    let db = TestDatabase::create().await;
    let mut conn = connect(&db).await;
    execute(&mut conn, "SET statement_timeout = '50ms'").await;
    let answer = run(&mut conn, "SELECT pg_sleep(30)").await;
    assert_eq!(failure_class("the statement", answer), "contention");
}

/// This backend's process id.
async fn backend_pid(conn: &mut AsyncPgConnection) -> i64 {
    query_n(conn, "SELECT pg_backend_pid()::bigint AS n").await
}

#[tokio::test]
async fn a_terminated_backend_is_connect_during_its_statement_and_after() {
    let db = TestDatabase::create().await;
    let mut doomed = connect(&db).await;
    let pid = backend_pid(&mut doomed).await;
    let running = tokio::spawn(async move {
        let answer = run(&mut doomed, "SELECT pg_sleep(30)").await;
        (doomed, answer)
    });
    let mut killer = connect(&db).await;
    wait_for(
        &mut killer,
        "the statement to run",
        &format!(
            "SELECT EXISTS (SELECT 1 FROM pg_stat_activity \
             WHERE pid = {pid} AND wait_event = 'PgSleep') AS flag"
        ),
    )
    .await;
    execute(&mut killer, &format!("SELECT pg_terminate_backend({pid})")).await;
    let (mut doomed, answer) = running.await.expect("the statement's task");
    // The server answers the running statement with admin_shutdown…
    assert_eq!(failure_class("the killed statement", answer), "connect");
    // …and the connection is closed under the next one (no SQLSTATE).
    let answer = run(&mut doomed, "SELECT 1").await;
    assert_eq!(
        failure_class("a statement after the kill", answer),
        "connect"
    );
}

/// The server ends a session left idle in its transaction while no
/// statement runs, so the next statement finds the connection closed (an
/// error without a SQLSTATE).
#[tokio::test]
async fn an_idle_in_transaction_timeout_is_connect() {
    let db = TestDatabase::create().await;
    let mut idle = connect(&db).await;
    let pid = backend_pid(&mut idle).await;
    execute(
        &mut idle,
        "SET idle_in_transaction_session_timeout = '50ms'; BEGIN",
    )
    .await;
    wait_for(
        &mut connect(&db).await,
        "the idle session to be ended",
        &format!("SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = {pid}) AS flag"),
    )
    .await;
    let answer = run(&mut idle, "SELECT 1").await;
    assert_eq!(
        failure_class("a statement after the timeout", answer),
        "connect"
    );
}

/// The class is the SQLSTATE's: an error raised with a contention or
/// connection code and any message is classified by the code, and a
/// message that reads like one of them under another code is not.
#[tokio::test]
async fn the_class_follows_the_code_not_the_message() {
    let db = TestDatabase::create().await;
    let mut conn = connect(&db).await;
    let table: [(&str, &str, &str); 10] = [
        ("deadlock_detected", "x", "contention"),
        ("serialization_failure", "x", "contention"),
        ("lock_not_available", "x", "contention"),
        ("query_canceled", "x", "contention"),
        ("admin_shutdown", "x", "connect"),
        ("connection_failure", "x", "connect"),
        ("raise_exception", "deadlock detected", "query"),
        (
            "raise_exception",
            "canceling statement due to statement timeout",
            "query",
        ),
        (
            "data_exception",
            "terminating connection due to administrator command",
            "query",
        ),
        (
            "internal_error",
            "server closed the connection unexpectedly",
            "query",
        ),
    ];
    for (code, message, expected) in table {
        let answer = run(
            &mut conn,
            &format!("DO $$ BEGIN RAISE EXCEPTION '{message}' USING ERRCODE = '{code}'; END $$"),
        )
        .await;
        assert_eq!(
            failure_class(code, answer),
            expected,
            "{code} with the message {message:?}"
        );
    }
}
