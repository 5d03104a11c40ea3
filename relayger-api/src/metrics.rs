//! Prometheus metrics: the request metrics recorded by the access-log
//! middleware, the open-socket gauge, and the scrape endpoint served on its
//! own listener (`relayger-server --metrics-listen`). The job counters are
//! recorded by relayger-store as runtime log records are written. Until
//! [`MetricsExporter::install`] runs, every recording is a no-op.
//!
//! docs/metrics.md lists every metric.

use std::collections::HashSet;
use std::future::Future;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use metrics_exporter_prometheus::{BuildError, PrometheusBuilder, PrometheusHandle};
use tokio::sync::Mutex;

use crate::AppState;
use crate::route_table::path_of;

/// Latency buckets in seconds, for every histogram.
const BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// Runtimes reported per job state; the rest are left out (the gauges are
/// for spotting the busiest, `runtimes stats` answers for any one).
pub const MAX_GAUGED_RUNTIMES: i64 = 500;

/// The routes with a latency histogram of their own, by handler: their
/// paths come from the route table, so a renamed route keeps its histogram.
const TIMED_HANDLERS: [(&str, &str); 3] = [
    ("runtime::claim", "relayger_claim_duration_seconds"),
    ("runtime::finish", "relayger_finish_duration_seconds"),
    ("runtime::finish_batch", "relayger_finish_duration_seconds"),
];

/// The histogram of `route` (a route table path), if it has one.
fn timed_histogram(route: &str) -> Option<&'static str> {
    static TIMED: LazyLock<Vec<(&'static str, &'static str)>> = LazyLock::new(|| {
        TIMED_HANDLERS
            .iter()
            .map(|&(handler, histogram)| {
                let path = path_of(handler)
                    .unwrap_or_else(|| panic!("{handler} is not in the route table"));
                (path, histogram)
            })
            .collect()
    });
    TIMED
        .iter()
        .find(|(path, _)| *path == route)
        .map(|&(_, histogram)| histogram)
}

/// Records one answered request (called by the access-log middleware).
pub(crate) fn record_request(method: &str, route: &str, status: u16, latency: Duration) {
    let labels = [
        ("method", method.to_owned()),
        ("route", route.to_owned()),
        ("status", status.to_string()),
    ];
    metrics::counter!("relayger_http_requests_total", &labels).increment(1);
    metrics::histogram!("relayger_http_request_duration_seconds", &labels)
        .record(latency.as_secs_f64());
    let outcome = if (200..300).contains(&status) {
        "ok"
    } else {
        "error"
    };
    if let Some(histogram) = timed_histogram(route) {
        metrics::histogram!(histogram, "result" => outcome).record(latency.as_secs_f64());
    }
}

/// The size of one batch finish request.
pub(crate) fn record_finish_batch(jobs: usize) {
    metrics::histogram!("relayger_finish_batch_jobs").record(jobs as f64);
}

/// Counts one answered claim: `granted` when it handed out a job, else
/// `idle`.
pub(crate) fn record_claim(jobs: usize) {
    let result = if jobs > 0 { "granted" } else { "idle" };
    metrics::counter!("relayger_claims_total", "result" => result).increment(1);
}

/// Records how long a wake took from its publish (just after its commit,
/// on whichever instance committed) to the socket frame about to be sent.
pub(crate) fn record_signal_lag(published: crate::hub::Published) {
    // A clock that stepped back since the publish counts as no lag.
    let lag = published.at.elapsed().unwrap_or_default();
    metrics::histogram!("relayger_signal_lag_seconds", "path" => published.path.label())
        .record(lag.as_secs_f64());
}

/// Counts an open WebSocket for as long as it lives.
#[derive(Debug)]
pub(crate) struct OpenSocket;

impl OpenSocket {
    pub(crate) fn new() -> OpenSocket {
        metrics::gauge!("relayger_open_sockets").increment(1.0);
        OpenSocket
    }
}

impl Drop for OpenSocket {
    fn drop(&mut self) {
        metrics::gauge!("relayger_open_sockets").decrement(1.0);
    }
}

/// `--metrics-listen`: a bare port means the loopback interface.
pub fn metrics_listen_address(given: &str) -> String {
    if !given.is_empty() && given.bytes().all(|b| b.is_ascii_digit()) {
        format!("127.0.0.1:{given}")
    } else {
        given.to_owned()
    }
}

/// The installed Prometheus recorder and what the scrape needs.
#[derive(Debug, Clone)]
pub struct MetricsExporter {
    handle: PrometheusHandle,
    gauges: Arc<Mutex<GaugeCache>>,
}

#[derive(Debug, Default)]
struct GaugeCache {
    /// (runtime id, runtime name, state) last reported, reset to 0 when
    /// they vanish.
    reported: HashSet<(String, String, &'static str)>,
}

impl MetricsExporter {
    /// Installs the process-wide recorder; call once, before serving.
    pub fn install() -> Result<MetricsExporter, BuildError> {
        let handle = PrometheusBuilder::new()
            .set_buckets(BUCKETS)?
            .install_recorder()?;
        describe();
        Ok(MetricsExporter {
            handle,
            gauges: Arc::default(),
        })
    }

    /// The exposition text, after bringing the gauges up to date.
    async fn scrape(&self, state: &AppState) -> String {
        let load = state.store.pool_load();
        metrics::gauge!("relayger_db_pool_max").set(load.max as f64);
        metrics::gauge!("relayger_db_pool_in_use").set(load.in_use as f64);
        metrics::gauge!("relayger_db_pool_waiting").set(load.waiting as f64);
        self.refresh_runtime_gauges(state).await;
        let sent = state.store.statement_counts();
        metrics::counter!("relayger_db_statements_total").absolute(sent.statements);
        metrics::counter!("relayger_db_prepares_total", "statement" => "cached")
            .absolute(sent.prepares_cached);
        metrics::counter!("relayger_db_prepares_total", "statement" => "uncached")
            .absolute(sent.prepares_uncached);
        metrics::counter!("relayger_db_pipelined_total").absolute(sent.pipelined);
        metrics::counter!("relayger_db_round_trips_total").absolute(sent.round_trips());
        self.handle.run_upkeep();
        self.handle.render()
    }

    /// Three grouped counts, one per state, each over its partial index
    /// and capped at [`MAX_GAUGED_RUNTIMES`] rows. A scrape that arrives
    /// while another is refreshing renders the previous values instead of
    /// queueing more queries.
    async fn refresh_runtime_gauges(&self, state: &AppState) {
        let Ok(mut cache) = self.gauges.try_lock() else {
            return;
        };
        let gauges = match state.store.runtime_job_gauges(MAX_GAUGED_RUNTIMES).await {
            Ok(gauges) => gauges,
            Err(err) => {
                // The scrape still answers; the database gauges go stale.
                tracing::warn!(%err, "runtime job gauges unavailable");
                return;
            }
        };
        let mut reported = HashSet::new();
        for gauge in gauges {
            let runtime = gauge.runtime_id.to_string();
            metrics::gauge!("relayger_runtime_jobs", "runtime" => runtime.clone(), "runtime_name" => gauge.runtime_name.clone(), "state" => gauge.state)
                .set(gauge.jobs as f64);
            reported.insert((runtime, gauge.runtime_name, gauge.state));
        }
        for (runtime, name, state) in cache.reported.difference(&reported) {
            metrics::gauge!("relayger_runtime_jobs", "runtime" => runtime.clone(), "runtime_name" => name.clone(), "state" => *state)
                .set(0.0);
        }
        cache.reported = reported;
    }
}

fn describe() {
    use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
    describe_counter!(
        "relayger_http_requests_total",
        "HTTP requests answered, by method, route template and status"
    );
    describe_histogram!(
        "relayger_http_request_duration_seconds",
        Unit::Seconds,
        "HTTP request latency, by method, route template and status"
    );
    describe_histogram!(
        "relayger_claim_duration_seconds",
        Unit::Seconds,
        "Claim request latency"
    );
    describe_histogram!(
        "relayger_finish_duration_seconds",
        Unit::Seconds,
        "Finish request latency (single and batch)"
    );
    describe_histogram!(
        "relayger_finish_batch_jobs",
        "Finishes carried by one batch finish request"
    );
    describe_gauge!("relayger_db_pool_max", "Request pool: connections at most");
    describe_gauge!(
        "relayger_db_pool_in_use",
        "Request pool: connections handed out"
    );
    describe_gauge!(
        "relayger_db_pool_waiting",
        "Request pool: requests waiting for a connection"
    );
    describe_counter!(
        "relayger_db_statements_total",
        "Statements sent to PostgreSQL by the server's pools (BEGIN and COMMIT included)"
    );
    describe_counter!(
        "relayger_db_prepares_total",
        "Statement prepares: cached (kept on the connection, once per text) or uncached (every run)"
    );
    describe_counter!(
        "relayger_db_pipelined_total",
        "Statements sent while another on the same connection had not answered (no round trip of their own)"
    );
    describe_counter!(
        "relayger_db_round_trips_total",
        "Round trips to PostgreSQL: statements plus prepares, less statements pipelined behind another"
    );
    describe_gauge!("relayger_open_sockets", "Open WebSockets");
    describe_histogram!(
        "relayger_signal_lag_seconds",
        Unit::Seconds,
        "From a write's commit to the inbox_changed frame on a socket, by path (local, notify)"
    );
    describe_gauge!(
        "relayger_runtime_jobs",
        "Jobs per runtime in state pending, claimed or dead (the busiest runtimes)"
    );
    describe_counter!(
        "relayger_claims_total",
        "Claims answered: granted (at least one job) or idle"
    );
    describe_counter!("relayger_grants_total", "Leases granted (jobs claimed)");
    describe_counter!("relayger_releases_total", "Leases released unfinished");
    describe_counter!("relayger_finishes_total", "Finished attempts, by outcome");
    describe_counter!("relayger_skips_total", "Skipped jobs, by source and reason");
    describe_counter!("relayger_lease_expiries_total", "Leases that expired");
    describe_counter!(
        "relayger_dead_letters_total",
        "Jobs that became dead letters, by cause"
    );
    describe_counter!(
        "relayger_retries_total",
        "Jobs made pending again, by cause"
    );
}

async fn metrics_endpoint(
    State((state, exporter)): State<(AppState, MetricsExporter)>,
) -> Response {
    let body = exporter.scrape(&state).await;
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        body,
    )
        .into_response()
}

/// The metrics listener's routes: `GET /metrics` only.
pub fn metrics_router(state: AppState, exporter: MetricsExporter) -> Router {
    Router::new()
        .route("/metrics", get(metrics_endpoint))
        .with_state((state, exporter))
}

/// Serves `GET /metrics` until `shutdown` resolves.
pub async fn serve_metrics(
    listener: tokio::net::TcpListener,
    state: AppState,
    exporter: MetricsExporter,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, metrics_router(state, exporter))
        .with_graceful_shutdown(shutdown)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_port_listens_on_loopback() {
        let cases = [
            ("9464", "127.0.0.1:9464"),
            ("0", "127.0.0.1:0"),
            ("0.0.0.0:9464", "0.0.0.0:9464"),
            ("[::1]:9464", "[::1]:9464"),
            ("localhost:9464", "localhost:9464"),
        ];
        for (given, address) in cases {
            assert_eq!(metrics_listen_address(given), address, "{given}");
        }
    }

    #[test]
    fn claim_and_finish_routes_have_their_histograms() {
        let cases = [
            (
                "/v1/runtimes/{id}/claim",
                Some("relayger_claim_duration_seconds"),
            ),
            (
                "/v1/runtimes/{id}/jobs/{job}/finish",
                Some("relayger_finish_duration_seconds"),
            ),
            (
                "/v1/runtimes/{id}/finishes",
                Some("relayger_finish_duration_seconds"),
            ),
            ("/v1/runtimes/{id}/jobs/{job}/heartbeat", None),
            ("/v1/runtimes/{id}", None),
        ];
        for (route, histogram) in cases {
            assert_eq!(timed_histogram(route), histogram, "{route}");
        }
    }
}
