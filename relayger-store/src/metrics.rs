//! Counters for what happens to jobs, fed from the runtime log as it is
//! written (one hook, so a new log kind cannot be forgotten), and the
//! bounded per-runtime job gauges read at scrape time. Without an installed
//! recorder (`--metrics-listen` not given) the counters cost nothing.
//!
//! Events are counted when their log record is written inside the
//! transaction; a transaction rolled back after that (a rare conflict)
//! counts its events although they did not happen. A one-statement finish
//! (the usual one) is counted after its commit, only for the jobs its fence
//! matched.

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
                "SELECT runtime_id, count(*)::bigint AS jobs FROM jobs WHERE state = '",
                $state,
                "' GROUP BY runtime_id ORDER BY jobs DESC, runtime_id LIMIT $1"
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

/// Counts one runtime log record. `batched` is true for the claim's policy
/// skips (written by `log_jobs`), false for records of a worker's request.
pub(crate) fn runtime_event(kind: &str, detail: &serde_json::Value, batched: bool) {
    let text = |key: &str| detail.get(key).and_then(serde_json::Value::as_str);
    match kind {
        "claimed" => metrics::counter!("relayger_grants_total").increment(1),
        "released" => metrics::counter!("relayger_releases_total").increment(1),
        "retried" => {
            metrics::counter!("relayger_retries_total", "cause" => "manual").increment(1);
        }
        "expired" => {
            metrics::counter!("relayger_lease_expiries_total").increment(1);
            metrics::counter!("relayger_retries_total", "cause" => "lease_expired").increment(1);
        }
        "failed" => {
            metrics::counter!("relayger_finishes_total", "outcome" => "failed").increment(1);
            metrics::counter!("relayger_retries_total", "cause" => "failed").increment(1);
        }
        "dead_letter" => {
            if text("reason") == Some("lease_expired") {
                metrics::counter!("relayger_lease_expiries_total").increment(1);
                metrics::counter!("relayger_dead_letters_total", "cause" => "lease_expired")
                    .increment(1);
            } else {
                metrics::counter!("relayger_finishes_total", "outcome" => "dead_letter")
                    .increment(1);
                metrics::counter!("relayger_dead_letters_total", "cause" => "failed").increment(1);
            }
        }
        "replied" => {
            let outcome = if detail.get("replyMessageId").is_some_and(|v| !v.is_null()) {
                "replied"
            } else {
                "handled"
            };
            metrics::counter!("relayger_finishes_total", "outcome" => outcome).increment(1);
        }
        "skipped" if batched => {
            metrics::counter!("relayger_skips_total", "source" => "policy", "reason" => reason_label(text("reason")))
                .increment(1);
        }
        "skipped" => {
            metrics::counter!("relayger_finishes_total", "outcome" => "skipped").increment(1);
            metrics::counter!("relayger_skips_total", "source" => "worker", "reason" => reason_label(text("skip")))
                .increment(1);
        }
        _ => {}
    }
}

#[derive(QueryableByName)]
struct CountRow {
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    runtime_id: Uuid,
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

#[cfg(all(test, feature = "test-support"))]
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
