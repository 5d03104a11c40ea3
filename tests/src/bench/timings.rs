//! Where a figure's time goes inside the server: the request-duration and
//! signal-lag summaries of its `/metrics`, read before and after a stretch.

use std::collections::BTreeMap;

/// Seconds spent and how many times, in one series.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Spent {
    pub(crate) seconds: f64,
    pub(crate) count: u64,
}

/// The server's timed series by name: `METHOD ROUTE` (all statuses
/// together; from answer to answer, as the access log times it) and
/// `signal PATH` (a commit's publish → the socket frame).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Timings(BTreeMap<String, Spent>);

/// One row of [`Timings::per_item`].
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TimingRow {
    pub(crate) series: String,
    pub(crate) calls_per_item: f64,
    pub(crate) mean_ms: f64,
    pub(crate) ms_per_item: f64,
}

impl Timings {
    /// Reads the `_sum` and `_count` samples of
    /// `relayger_http_request_duration_seconds` and
    /// `relayger_signal_lag_seconds` from Prometheus text.
    pub(crate) fn parse(text: &str) -> Timings {
        let mut out: BTreeMap<String, Spent> = BTreeMap::new();
        for line in text.lines() {
            let Some((series, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let Ok(value) = value.parse::<f64>() else {
                continue;
            };
            let Some((name, labels)) = series.split_once('{') else {
                continue;
            };
            let labels = labels.trim_end_matches('}');
            let label = |key: &str| {
                labels.split(',').find_map(|pair| {
                    let (k, v) = pair.split_once('=')?;
                    (k == key).then(|| v.trim_matches('"').to_owned())
                })
            };
            let (base, is_sum) = if let Some(base) = name.strip_suffix("_sum") {
                (base, true)
            } else if let Some(base) = name.strip_suffix("_count") {
                (base, false)
            } else {
                continue;
            };
            let key = match base {
                "relayger_http_request_duration_seconds" => {
                    match (label("method"), label("route")) {
                        (Some(method), Some(route)) => format!("{method} {route}"),
                        _ => continue,
                    }
                }
                "relayger_signal_lag_seconds" => match label("path") {
                    Some(path) => format!("signal {path}"),
                    None => continue,
                },
                _ => continue,
            };
            let spent = out.entry(key).or_default();
            if is_sum {
                spent.seconds += value;
            } else {
                spent.count += value as u64;
            }
        }
        Timings(out)
    }

    /// What was spent between `earlier` and this reading.
    pub(crate) fn since(&self, earlier: &Timings) -> Timings {
        let spent = self
            .0
            .iter()
            .map(|(key, now)| {
                let before = earlier.0.get(key).copied().unwrap_or_default();
                let spent = Spent {
                    seconds: (now.seconds - before.seconds).max(0.0),
                    count: now.count.saturating_sub(before.count),
                };
                (key.clone(), spent)
            })
            .filter(|(_, spent)| spent.count > 0)
            .collect();
        Timings(spent)
    }

    /// Each series per item (`items` questions, messages…), most time first.
    pub(crate) fn per_item(&self, items: u64) -> Vec<TimingRow> {
        let items = items.max(1) as f64;
        let mut rows: Vec<TimingRow> = self
            .0
            .iter()
            .map(|(series, spent)| TimingRow {
                series: series.clone(),
                calls_per_item: spent.count as f64 / items,
                mean_ms: spent.seconds * 1000.0 / spent.count.max(1) as f64,
                ms_per_item: spent.seconds * 1000.0 / items,
            })
            .collect();
        rows.sort_by(|a, b| b.ms_per_item.total_cmp(&a.ms_per_item));
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"# TYPE relayger_http_request_duration_seconds summary
relayger_http_request_duration_seconds{method="POST",route="/v1/messages",status="201",quantile="0.5"} 0.001
relayger_http_request_duration_seconds_sum{method="POST",route="/v1/messages",status="201"} 0.5
relayger_http_request_duration_seconds_count{method="POST",route="/v1/messages",status="201"} 100
relayger_http_request_duration_seconds_sum{method="POST",route="/v1/messages",status="200"} 0.1
relayger_http_request_duration_seconds_count{method="POST",route="/v1/messages",status="200"} 10
relayger_signal_lag_seconds_sum{path="local"} 0.02
relayger_signal_lag_seconds_count{path="local"} 200
relayger_db_statements_total 5
"#;

    #[test]
    fn statuses_add_up_and_other_series_are_left_out() {
        let timings = Timings::parse(TEXT);
        let rows = timings.since(&Timings::default()).per_item(100);
        assert_eq!(rows.len(), 2, "{rows:?}");
        let send = &rows[0];
        assert_eq!(send.series, "POST /v1/messages");
        assert!((send.calls_per_item - 1.1).abs() < 1e-9);
        assert!((send.ms_per_item - 6.0).abs() < 1e-9);
        let signal = &rows[1];
        assert_eq!(signal.series, "signal local");
        assert!((signal.mean_ms - 0.1).abs() < 1e-9);
    }

    #[test]
    fn a_stretch_counts_only_what_moved() {
        let before = Timings::parse(TEXT);
        let after = Timings::parse(
            &TEXT
                .replace(" 200\n", " 250\n")
                .replace(" 0.02\n", " 0.03\n"),
        );
        let rows = after.since(&before).per_item(50);
        assert_eq!(rows.len(), 1, "{rows:?}");
        assert_eq!(rows[0].series, "signal local");
        assert!((rows[0].calls_per_item - 1.0).abs() < 1e-9);
        assert!((rows[0].mean_ms - 0.2).abs() < 1e-9);
    }
}
