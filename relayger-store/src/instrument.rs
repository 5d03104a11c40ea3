//! What the pooled connections send to PostgreSQL, counted: statements,
//! prepares and round trips, per [`Store`](crate::Store) (its request and
//! probe pools). Read with [`Store::statement_counts`](crate::Store) and
//! exported as `relayger_db_*_total` (docs/metrics.md).
//!
//! diesel reports every statement it starts, and a `CacheQuery` event when
//! it prepares a statement it will keep (a named prepared statement, see
//! [`crate::prepared`]). A statement that is not kept is prepared unnamed
//! for that one run, which diesel does not report: it is recognised when it
//! ends, as a statement whose SQL text was never kept on this connection
//! and that is not one of the transaction manager's simple queries
//! (`BEGIN`, `COMMIT`, `ROLLBACK`, savepoints).
//!
//! Round trips follow from the extended protocol as diesel-async drives it:
//! a prepare (kept or not) is a round trip of its own before the execute,
//! a cached statement's later runs and a simple query are one — except a
//! statement sent while another on the same connection has not answered
//! yet (pipelined, see the claim and finish paths): it shares that flight.

use std::collections::HashSet;
use std::hash::{DefaultHasher, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use diesel::connection::{Instrumentation, InstrumentationEvent};

/// Totals since the store was built.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatementCounts {
    /// Statements sent (simple queries included).
    pub statements: u64,
    /// Statements prepared to be kept on their connection (once per
    /// connection and SQL text).
    pub prepares_cached: u64,
    /// Statements prepared for one run only (every run of an uncached
    /// statement).
    pub prepares_uncached: u64,
    /// Statements sent while an earlier one on the same connection had not
    /// answered (pipelined: no round trip of their own).
    pub pipelined: u64,
}

impl StatementCounts {
    /// All prepares: each is a round trip before its statement runs.
    pub fn prepares(&self) -> u64 {
        self.prepares_cached + self.prepares_uncached
    }

    /// Round trips to PostgreSQL: one per statement plus one per prepare,
    /// less the pipelined statements.
    pub fn round_trips(&self) -> u64 {
        (self.statements + self.prepares()).saturating_sub(self.pipelined)
    }
}

/// The shared totals one store's connections add to.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    statements: AtomicU64,
    prepares_cached: AtomicU64,
    prepares_uncached: AtomicU64,
    pipelined: AtomicU64,
}

impl Counters {
    pub(crate) fn read(&self) -> StatementCounts {
        StatementCounts {
            statements: self.statements.load(Ordering::Relaxed),
            prepares_cached: self.prepares_cached.load(Ordering::Relaxed),
            prepares_uncached: self.prepares_uncached.load(Ordering::Relaxed),
            pipelined: self.pipelined.load(Ordering::Relaxed),
        }
    }
}

/// The instrumentation installed on each pooled connection.
pub(crate) struct Counting {
    counters: Arc<Counters>,
    /// Hashes of the SQL texts this connection keeps prepared.
    kept: HashSet<u64>,
    /// Transaction events seen whose simple query has not ended yet.
    simple: u32,
    /// Statements started and not yet ended on this connection.
    in_flight: u32,
}

impl Counting {
    pub(crate) fn new(counters: Arc<Counters>) -> Counting {
        Counting {
            counters,
            kept: HashSet::new(),
            simple: 0,
            in_flight: 0,
        }
    }
}

/// A hash of a statement's SQL text, written straight from its `Display`
/// (no copy of the text).
fn sql_hash(sql: &dyn std::fmt::Display) -> u64 {
    struct HashWriter(DefaultHasher);
    impl std::fmt::Write for HashWriter {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            self.0.write(s.as_bytes());
            Ok(())
        }
    }
    let mut writer = HashWriter(DefaultHasher::new());
    let _ = std::fmt::write(&mut writer, format_args!("{sql}"));
    writer.0.finish()
}

impl Instrumentation for Counting {
    fn on_connection_event(&mut self, event: InstrumentationEvent<'_>) {
        match event {
            InstrumentationEvent::StartQuery { .. } => {
                self.counters.statements.fetch_add(1, Ordering::Relaxed);
                if self.in_flight > 0 {
                    self.counters.pipelined.fetch_add(1, Ordering::Relaxed);
                }
                self.in_flight += 1;
            }
            InstrumentationEvent::CacheQuery { sql, .. } => {
                self.counters
                    .prepares_cached
                    .fetch_add(1, Ordering::Relaxed);
                self.kept.insert(sql_hash(&sql));
            }
            InstrumentationEvent::BeginTransaction { .. }
            | InstrumentationEvent::CommitTransaction { .. }
            | InstrumentationEvent::RollbackTransaction { .. } => {
                self.simple += 1;
                // The transaction manager runs its queries alone: whatever
                // a dropped pipeline left unanswered is over.
                self.in_flight = 0;
            }
            InstrumentationEvent::FinishQuery { query, .. } => {
                self.in_flight = self.in_flight.saturating_sub(1);
                if self.simple > 0 {
                    self.simple -= 1;
                } else if !self.kept.contains(&sql_hash(&query)) {
                    self.counters
                        .prepares_uncached
                        .fetch_add(1, Ordering::Relaxed);
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use diesel::QueryableByName;
    use diesel::sql_types::Integer;
    use diesel_async::{AsyncConnection, RunQueryDsl};

    use super::StatementCounts;
    use crate::StoreError;
    use crate::prepared::CachedExt;
    use crate::test_support::TestDatabase;

    #[derive(QueryableByName)]
    struct Value {
        #[diesel(sql_type = Integer)]
        v: i32,
    }

    fn since(now: StatementCounts, before: StatementCounts) -> StatementCounts {
        StatementCounts {
            statements: now.statements - before.statements,
            prepares_cached: now.prepares_cached - before.prepares_cached,
            prepares_uncached: now.prepares_uncached - before.prepares_uncached,
            pipelined: now.pipelined - before.pipelined,
        }
    }

    #[tokio::test]
    async fn statements_prepares_and_round_trips_are_counted() {
        let db = TestDatabase::create().await;
        let store = db.store().await;
        let mut conn = store.conn().await.expect("connection");
        // (cached, the statement, what three runs send, round trips, why)
        let table = [
            (
                false,
                "SELECT $1 + 0 AS v",
                StatementCounts {
                    statements: 3,
                    prepares_cached: 0,
                    prepares_uncached: 3,
                    pipelined: 0,
                },
                6,
                "an uncached statement is prepared on every run",
            ),
            (
                true,
                "SELECT $1 + 1 AS v",
                StatementCounts {
                    statements: 3,
                    prepares_cached: 1,
                    prepares_uncached: 0,
                    pipelined: 0,
                },
                4,
                "a cached statement is prepared once",
            ),
        ];
        for (offset, (cached, sql, expected, round_trips, why)) in (0..).zip(table) {
            let start = store.statement_counts();
            for v in 0..3 {
                let query = diesel::sql_query(sql).bind::<Integer, _>(v);
                let row: Value = if cached {
                    query.cached().get_result(&mut *conn).await
                } else {
                    query.get_result(&mut *conn).await
                }
                .expect(why);
                assert_eq!(row.v, v + offset);
            }
            let sent = since(store.statement_counts(), start);
            assert_eq!(sent, expected, "{why}");
            assert_eq!(sent.round_trips(), round_trips, "{why}");
        }

        // BEGIN and COMMIT are simple queries: statements, never prepares.
        let start = store.statement_counts();
        conn.transaction(async |conn| -> Result<(), StoreError> {
            diesel::sql_query("SELECT $1 + 1 AS v")
                .bind::<Integer, _>(9)
                .cached()
                .get_result::<Value>(conn)
                .await?;
            Ok(())
        })
        .await
        .expect("transaction");
        let transaction = since(store.statement_counts(), start);
        assert_eq!(
            transaction,
            StatementCounts {
                statements: 3,
                prepares_cached: 0,
                prepares_uncached: 0,
                pipelined: 0,
            }
        );
        assert_eq!(transaction.round_trips(), 3);

        // Three statements polled together share one flight: BEGIN, the
        // flight, COMMIT.
        let start = store.statement_counts();
        conn.transaction(async |conn| -> Result<(), StoreError> {
            let mut shared: &diesel_async::AsyncPgConnection = conn;
            let one = |v: i32| {
                diesel::sql_query("SELECT $1 + 1 AS v")
                    .bind::<Integer, _>(v)
                    .cached()
            };
            let (a, b, c) = futures_util::try_join!(
                one(1).get_result::<Value>(&mut shared),
                one(2).get_result::<Value>(&mut shared),
                one(3).get_result::<Value>(&mut shared),
            )?;
            assert_eq!((a.v, b.v, c.v), (2, 3, 4));
            // Alone again: a round trip of its own.
            let d: Value = one(4).get_result(conn).await?;
            assert_eq!(d.v, 5);
            Ok(())
        })
        .await
        .expect("pipelined transaction");
        let pipelined = since(store.statement_counts(), start);
        assert_eq!(
            pipelined,
            StatementCounts {
                statements: 6,
                prepares_cached: 0,
                prepares_uncached: 0,
                pipelined: 2,
            }
        );
        assert_eq!(pipelined.round_trips(), 4);
    }
}
