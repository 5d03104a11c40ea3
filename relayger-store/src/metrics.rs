//! Counters for what happens to jobs, fed from the runtime log as it is
//! written (one hook, so a new log kind cannot be forgotten), and the
//! bounded per-runtime job gauges read at scrape time. Without an installed
//! recorder (`--metrics-listen` not given) the counters cost nothing.
//!
//! An event raised inside a transaction run by [`count_when_committed`] is
//! counted once that transaction has committed, and not at all when it
//! rolls back (a conflict retried in a new transaction counts once). A
//! one-statement finish (the usual one) is counted after its commit, only
//! for the jobs its fence matched.

use std::cell::RefCell;

use diesel::QueryableByName;
use diesel_async::RunQueryDsl;
use uuid::Uuid;

use crate::prepared::CachedExt;
use crate::{Store, StoreError};

/// One state's grouped count. The state is written into the text, not
/// bound: a bound state would let a cached generic plan (the store keeps
/// prepared statements) miss the state's partial index and scan every job
/// ever finished.
macro_rules! gauge_query {
    ($state:literal) => {
        (
            $state,
            concat!(
                "SELECT c.runtime_id, r.name, c.jobs FROM (",
                "SELECT runtime_id, count(*)::bigint AS jobs FROM jobs WHERE state = '",
                $state,
                "' GROUP BY runtime_id ORDER BY jobs DESC, runtime_id LIMIT $1",
                ") c JOIN runtimes r ON r.id = c.runtime_id ORDER BY c.jobs DESC, c.runtime_id"
            ),
        )
    };
}

/// The job states reported per runtime and their queries; each is read
/// through the state's partial index, so a scrape never scans finished
/// jobs.
const GAUGE_QUERIES: [(&str, &str); 3] = [
    gauge_query!("pending"),
    gauge_query!("claimed"),
    gauge_query!("dead"),
];

/// One runtime's count of jobs in one state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeJobGauge {
    pub runtime_id: Uuid,
    /// The runtime's name (unique per agent; with the id, a label a person
    /// reads).
    pub runtime_name: String,
    pub state: &'static str,
    pub jobs: i64,
}

/// A reason as a label: a short snake_case word is kept, anything else
/// (a worker's free text) becomes `other`, so labels stay few.
pub fn reason_label(reason: Option<&str>) -> String {
    match reason {
        Some(r)
            if !r.is_empty()
                && r.len() <= 32
                && r.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') =>
        {
            r.to_owned()
        }
        Some(_) => "other".to_owned(),
        None => "none".to_owned(),
    }
}

tokio::task_local! {
    /// The counters of the events raised by the transaction this task is
    /// running ([`count_when_committed`]), not yet incremented.
    static UNCOMMITTED: RefCell<Vec<metrics::Counter>>;
}

/// Runs `transaction` (a future that answers once it has committed, `Ok`,
/// or rolled back, `Err`) and increments the counters of the events it
/// raised only if it committed.
pub(crate) async fn count_when_committed<T, E>(
    transaction: impl Future<Output = Result<T, E>>,
) -> Result<T, E> {
    let (answer, counters) = UNCOMMITTED
        .scope(RefCell::new(Vec::new()), async {
            let answer = transaction.await;
            (answer, UNCOMMITTED.with(RefCell::take))
        })
        .await;
    if answer.is_ok() {
        for counter in counters {
            counter.increment(1);
        }
    }
    answer
}

/// Counts one event: once the enclosing [`count_when_committed`]
/// transaction has committed, or at once outside one.
fn count(counter: metrics::Counter) {
    let mut counter = Some(counter);
    // Outside a transaction's scope the counter stays here.
    let _ = UNCOMMITTED.try_with(|uncommitted| uncommitted.borrow_mut().extend(counter.take()));
    if let Some(counter) = counter {
        counter.increment(1);
    }
}

/// Counts one runtime log record. `batched` is true for the claim's policy
/// skips (written by `log_jobs`), false for records of a worker's request.
pub(crate) fn runtime_event(kind: &str, detail: &serde_json::Value, batched: bool) {
    let text = |key: &str| detail.get(key).and_then(serde_json::Value::as_str);
    match kind {
        "claimed" => count(metrics::counter!("relayger_grants_total")),
        "released" => count(metrics::counter!("relayger_releases_total")),
        "retried" => {
            count(metrics::counter!("relayger_retries_total", "cause" => "manual"));
        }
        "expired" => {
            count(metrics::counter!("relayger_lease_expiries_total"));
            count(metrics::counter!("relayger_retries_total", "cause" => "lease_expired"));
        }
        "failed" => {
            count(metrics::counter!("relayger_finishes_total", "outcome" => "failed"));
            count(metrics::counter!("relayger_retries_total", "cause" => "failed"));
        }
        "dead_letter" => {
            if text("reason") == Some("lease_expired") {
                count(metrics::counter!("relayger_lease_expiries_total"));
                count(metrics::counter!("relayger_dead_letters_total", "cause" => "lease_expired"));
            } else {
                count(metrics::counter!("relayger_finishes_total", "outcome" => "dead_letter"));
                count(metrics::counter!("relayger_dead_letters_total", "cause" => "failed"));
            }
        }
        "replied" => {
            let outcome = if detail.get("replyMessageId").is_some_and(|v| !v.is_null()) {
                "replied"
            } else {
                "handled"
            };
            count(metrics::counter!("relayger_finishes_total", "outcome" => outcome));
        }
        "skipped" if batched => {
            count(
                metrics::counter!("relayger_skips_total", "source" => "policy", "reason" => reason_label(text("reason"))),
            );
        }
        "skipped" => {
            count(metrics::counter!("relayger_finishes_total", "outcome" => "skipped"));
            count(
                metrics::counter!("relayger_skips_total", "source" => "worker", "reason" => reason_label(text("skip"))),
            );
        }
        _ => {}
    }
}

#[derive(QueryableByName)]
struct CountRow {
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    runtime_id: Uuid,
    #[diesel(sql_type = diesel::sql_types::Text)]
    name: String,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    jobs: i64,
}

impl Store {
    /// Pending, claimed and dead jobs per runtime, at most `max_runtimes`
    /// runtimes per state (those with the most jobs). Each state is one
    /// grouped count over its partial index: the cost follows the live and
    /// dead jobs, never the finished history.
    pub async fn runtime_job_gauges(
        &self,
        max_runtimes: i64,
    ) -> Result<Vec<RuntimeJobGauge>, StoreError> {
        let mut conn = self.conn().await?;
        let mut gauges = Vec::new();
        for (state, query) in GAUGE_QUERIES {
            let rows: Vec<CountRow> = diesel::sql_query(query)
                .bind::<diesel::sql_types::BigInt, _>(max_runtimes)
                .cached()
                .load(&mut conn)
                .await?;
            gauges.extend(rows.into_iter().map(|row| RuntimeJobGauge {
                runtime_id: row.runtime_id,
                runtime_name: row.name,
                state,
                jobs: row.jobs,
            }));
        }
        Ok(gauges)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_become_few_labels() {
        let cases = [
            (Some("sealed"), "sealed"),
            (Some("max_calls_per_hour"), "max_calls_per_hour"),
            (Some("Not For Me"), "other"),
            (Some(""), "other"),
            (Some("a_very_long_reason_that_goes_on_and_on"), "other"),
            (None, "none"),
        ];
        for (reason, label) in cases {
            assert_eq!(reason_label(reason), label, "{reason:?}");
        }
    }

    /// The states are written into the SQL text as literals (see
    /// [`gauge_query!`]); each must be the column value of a core `JobState`.
    #[test]
    fn gauge_states_are_job_states() {
        for (state, query) in GAUGE_QUERIES {
            let parsed = relayger_core::job::JobState::parse(state);
            assert_eq!(parsed.map(|s| s.as_str()), Some(state), "{state}");
            assert!(query.contains(&format!("state = '{state}'")), "{query}");
        }
    }
}

#[cfg(test)]
mod plans {
    use diesel::sql_types::Text;
    use diesel_async::SimpleAsyncConnection;

    use super::*;
    use crate::test_support::TestDatabase;

    #[derive(QueryableByName)]
    struct PlanLine {
        #[diesel(sql_type = Text, column_name = "QUERY PLAN")]
        line: String,
    }

    /// With sequential scans priced out, each state's count reads its
    /// partial index: the plan a scrape gets never depends on the size of
    /// the finished history.
    #[tokio::test]
    async fn every_gauge_query_reads_its_states_partial_index() {
        let db = TestDatabase::create().await;
        let store = db.store().await;
        let mut conn = store.conn().await.expect("conn");
        conn.batch_execute("SET enable_seqscan = off")
            .await
            .expect("set");
        for (state, query) in GAUGE_QUERIES {
            let plan: Vec<PlanLine> =
                diesel::sql_query(format!("EXPLAIN {}", query.replace("$1", "500")))
                    .load(&mut conn)
                    .await
                    .expect("explain");
            let plan: Vec<String> = plan.into_iter().map(|p| p.line).collect();
            assert!(
                plan.iter()
                    .any(|line| line.contains(&format!("jobs_{state}"))),
                "{state}: {plan:#?}"
            );
            assert!(
                !plan.iter().any(|line| line.contains("Seq Scan")),
                "{state}: {plan:#?}"
            );
        }
    }
}
