//! The figures as a Markdown table (pasted as-is into BENCHMARKS.md) with
//! the details that explain them, or as JSON.

use serde_json::{Value, json};

use super::cluster::DbProfile;
use super::peers;
use super::procs::CpuSplit;
use super::timings::Timings;
use super::{Options, Results};

/// One table row.
struct Row {
    figure: String,
    value: String,
    baseline: String,
    ratio: Option<f64>,
    target: String,
    met: Option<bool>,
}

impl Row {
    /// A figure with nothing to compare it with.
    fn unbased(figure: String, value: String, target: &str, met: Option<bool>) -> Row {
        Row {
            figure,
            value,
            baseline: "—".into(),
            ratio: None,
            target: target.into(),
            met,
        }
    }

    /// A p50 against the same p50 measured where `baseline` holds (e.g.
    /// fewer rooms): met while at most `limit` times that.
    fn p50_against(
        figure: String,
        p50_ms: f64,
        baseline: String,
        baseline_ms: f64,
        limit: f64,
    ) -> Row {
        let ratio = p50_ms / baseline_ms;
        Row {
            figure,
            value: format!("{p50_ms:.2} ms"),
            baseline: format!("{baseline}: {baseline_ms:.2} ms"),
            ratio: Some(ratio),
            target: format!("≤ {limit}×"),
            met: Some(ratio <= limit),
        }
    }
}

fn rows(results: &Results) -> Vec<Row> {
    let mut rows = Vec::new();
    let base = results.baseline;
    if let Some(p1) = &results.p1 {
        let one = base.map(|b| b.one.latency_ms);
        for (label, value, limit) in [
            // Issue #37's targets.
            ("p50", p1.latency.p50_ms, 4.0),
            ("p99", p1.latency.p99_ms, 10.0),
        ] {
            let ratio = one.map(|one| value / one);
            rows.push(Row {
                figure: format!(
                    "P1 {label} `send --ask` → reply visible ({} sequential)",
                    p1.latency.n
                ),
                value: format!("{value:.2} ms"),
                baseline: one.map_or("—".into(), |v| format!("pgbench -c1 avg {v:.2} ms")),
                ratio,
                target: format!("≤ {limit}×"),
                met: ratio.map(|r| r <= limit),
            });
        }
    }
    if let Some(p2) = &results.p2 {
        let third = base.map(|b| b.sixteen.tps / 3.0);
        let ratio = third.map(|t| p2.answered_per_s / t);
        rows.push(Row {
            figure: format!(
                "P2 answered/s ({} questions, {} rooms, {} workers, concurrency 64)",
                p2.questions, p2.rooms, p2.workers
            ),
            value: format!("{:.0} /s", p2.answered_per_s),
            baseline: third.map_or("—".into(), |t| format!("pgbench -c16 TPS ÷ 3 = {t:.0}")),
            ratio,
            target: "≥ 2.5×".into(),
            met: ratio.map(|r| r >= 2.5),
        });
    }
    if let Some(graphile) = results.peers.iter().find(|run| run.is_graphile_unbatched()) {
        let peer = format!("{} {}, unbatched", graphile.peer, graphile.version);
        if let Some(p1) = &results.p1 {
            rows.push(Row::p50_against(
                "P1 p50 against graphile-worker's add → completion p50".into(),
                p1.latency.p50_ms,
                peer.clone(),
                graphile.latency.p50_ms,
                1.2,
            ));
        }
        if let Some(p2) = &results.p2 {
            let ratio = p2.answered_per_s / graphile.jobs_per_s;
            rows.push(Row {
                figure: "P2 answered/s against graphile-worker's jobs/s".into(),
                value: format!("{:.0} /s", p2.answered_per_s),
                baseline: format!("{peer}: {:.0} jobs/s", graphile.jobs_per_s),
                ratio: Some(ratio),
                target: "≥ 2×".into(),
                met: Some(ratio >= 2.0),
            });
        }
    }
    if let Some(p3) = &results.p3 {
        rows.push(Row::unbased(
            format!("P3 idle worker: requests ({:.0} s)", p3.window_s),
            format!("{} ({:.1}/min)", p3.requests, p3.requests_per_min),
            "≤ 2 a minute",
            Some(p3.requests_per_min <= 2.0 + 1e-9),
        ));
        rows.push(Row::unbased(
            format!("P3 idle worker: CPU ({:.0} s)", p3.window_s),
            format!("{:.3} s", p3.cpu_s),
            "< 0.05 s",
            Some(p3.cpu_s < 0.05),
        ));
        rows.push(Row::unbased(
            "P3 idle worker: model calls".into(),
            p3.model_calls.to_string(),
            "0",
            Some(p3.model_calls == 0),
        ));
    }
    if let Some(p4) = &results.p4 {
        rows.push(Row::p50_against(
            format!(
                "P4 claim p50, agent in {} rooms ({} claims)",
                p4.rooms_large, p4.large.n
            ),
            p4.large.p50_ms,
            format!("{} rooms", p4.rooms_small),
            p4.small.p50_ms,
            1.5,
        ));
    }
    if let Some(p5) = &results.p5 {
        let tps = base.map(|b| b.sixteen.tps);
        let ratio = tps.map(|t| p5.per_s / t);
        rows.push(Row {
            figure: format!("P5 messages/s, {} senders into {0} rooms", p5.senders),
            value: format!("{:.0} /s", p5.per_s),
            baseline: tps.map_or("—".into(), |t| format!("pgbench -c16 TPS {t:.0}")),
            ratio,
            target: "≥ 0.8×".into(),
            met: ratio.map(|r| r >= 0.8),
        });
    }
    if let Some(p6) = &results.p6 {
        rows.push(Row::p50_against(
            format!(
                "P6 claim p50 with {} pending jobs ({} claims)",
                p6.large_backlog, p6.large.n
            ),
            p6.large.p50_ms,
            format!("{} pending", p6.small_backlog),
            p6.small.p50_ms,
            1.5,
        ));
    }
    if let Some(p7) = &results.p7 {
        rows.push(Row::p50_against(
            format!(
                "P7 P1 p50 in a room holding {} messages ({} questions)",
                p7.history, p7.full.n
            ),
            p7.full.p50_ms,
            "empty room".into(),
            p7.empty.p50_ms,
            1.3,
        ));
    }
    if let Some(p2) = &results.p2 {
        rows.push(Row::unbased(
            "Server RSS, peak during P2".into(),
            mib(p2.server_rss_peak_kib),
            "report",
            None,
        ));
    }
    if let Some(p3) = &results.p3 {
        rows.push(Row::unbased(
            "Worker RSS, idle".into(),
            mib(p3.worker_rss_kib),
            "< 20 MiB",
            Some(p3.worker_rss_kib < 20 * 1024),
        ));
    }
    rows
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

pub(crate) fn print_table(options: &Options, results: &Results) {
    let mut out = String::new();
    out.push_str(&header(options, results));
    out.push_str("\n| figure | value | baseline | ratio | target | met? |\n");
    out.push_str("| --- | --- | --- | --- | --- | --- |\n");
    for row in rows(results) {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            row.figure,
            row.value,
            row.baseline,
            row.ratio.map_or("—".into(), |r| format!("{r:.2}×")),
            row.target,
            match row.met {
                Some(true) => "yes",
                Some(false) => "**no**",
                None => "—",
            }
        ));
    }
    out.push_str(&peers::table(results));
    out.push_str(&counts_table(results));
    out.push_str(&details(results));
    #[allow(clippy::print_stdout)]
    {
        print!("{out}");
    }
}

fn header(options: &Options, results: &Results) -> String {
    let mut out = String::new();
    if let Some(s) = &results.settings {
        out.push_str(&format!(
            "PostgreSQL {} (one cluster for pgbench and Relayger): fsync={}, synchronous_commit={}, \
             full_page_writes={}, wal_sync_method={}, shared_buffers={}, pg_stat_statements loaded\n",
            s.version,
            s.fsync,
            s.synchronous_commit,
            s.full_page_writes,
            s.wal_sync_method,
            s.shared_buffers
        ));
    }
    out.push_str(&format!(
        "machine: {} CPUs; sizes: {}\n",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        if options.quick { "--quick" } else { "full" }
    ));
    for (when, load) in &results.loads {
        out.push_str(&format!("load average (1, 5, 15 min) {when}: {load}\n"));
    }
    if let Some(b) = &results.baseline {
        for run in [b.one, b.sixteen] {
            out.push_str(&format!(
                "pgbench -N -c{} -T {}: {:.1} TPS, latency average {:.3} ms\n",
                run.clients, options.pgbench_secs, run.tps, run.latency_ms
            ));
        }
    }
    out
}

/// What one item of each figure cost in the database: statements (as the
/// server sent them and as `pg_stat_statements` counted them), round trips,
/// prepares and commits.
fn counts_table(results: &Results) -> String {
    let mut lines = Vec::new();
    let mut add = |figure: &str, per: &str, db: &DbProfile, n: usize| {
        let n = n.max(1) as f64;
        let per_item = |v: u64| v as f64 / n;
        lines.push(format!(
            "| {figure} | {per} | {:.2} | {:.2} | {:.2} | {:.2} ({:.2} + {:.2}) | {:.2} | {:.2} | {:.0} |\n",
            per_item(db.sent.statements),
            per_item(db.total_calls),
            per_item(db.sent.round_trips),
            per_item(db.sent.prepares()),
            per_item(db.sent.prepares_cached),
            per_item(db.sent.prepares_uncached),
            per_item(db.commits),
            per_item(db.wal_syncs),
            per_item(db.wal_bytes),
        ));
    };
    if let Some(p1) = &results.p1 {
        add("P1", "question", &p1.db, p1.latency.n);
    }
    if let Some(p2) = &results.p2 {
        add("P2", "answered question", &p2.db, p2.questions);
    }
    if let Some(p4) = &results.p4 {
        let small = format!("P4, {} rooms", p4.rooms_small);
        add(&small, "send+claim+finish", &p4.db_small, p4.small.n);
        let large = format!("P4, {} rooms", p4.rooms_large);
        add(&large, "send+claim+finish", &p4.db_large, p4.large.n);
    }
    if let Some(p5) = &results.p5 {
        add("P5", "message", &p5.db, p5.messages as usize);
    }
    if let Some(p6) = &results.p6 {
        add(
            "P6 (both backlogs)",
            "send+claim+finish",
            &p6.db,
            p6.small.n + p6.large.n,
        );
    }
    if let Some(p7) = &results.p7 {
        add(
            "P7 (both rooms)",
            "question",
            &p7.db,
            p7.empty.n + p7.full.n,
        );
    }
    if lines.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "\n### Per item\n| figure | per | statements sent | statements (pg_stat_statements) \
         | round trips | prepares (cached + uncached) | commits (read-only included) \
         | WAL flushes | WAL bytes |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for line in lines {
        out.push_str(&line);
    }
    out
}

/// Where an item's time goes inside the server: each route's answer time
/// and each signal path's lag, per item (question, message). Against P1's
/// mean latency (`mean_ms`) the rest is the clients' part; the signal lags
/// are not inside the route times (they run after a commit, beside the
/// answer), so the sum is an estimate, not a partition. Under load (P2, P5)
/// the routes overlap, so there is no mean to set them against.
fn server_time_block(timings: &Timings, items: u64, per: &str, mean_ms: Option<f64>) -> String {
    let rows = timings.per_item(items);
    let mut out =
        format!("server time per {per} (route answer or signal lag: calls × mean = ms):\n");
    for row in &rows {
        out.push_str(&format!(
            "  {:<48} {:>5.2} × {:>6.3} = {:>6.3} ms\n",
            row.series, row.calls_per_item, row.mean_ms, row.ms_per_item
        ));
    }
    if let Some(mean_ms) = mean_ms {
        let inside: f64 = rows.iter().map(|row| row.ms_per_item).sum();
        out.push_str(&format!(
            "  in the server {inside:.2} ms of the mean {mean_ms:.2} ms; the other {:.2} ms are \
             the clients (HTTP, the worker, the asker), sockets and scheduling\n",
            (mean_ms - inside).max(0.0)
        ));
    }
    out
}

fn details(results: &Results) -> String {
    let mut out = String::new();
    if let Some(p1) = &results.p1 {
        out.push_str(&format!(
            "\n### P1 detail\nlatency ms: mean {:.2}, p50 {:.2}, p90 {:.2}, p99 {:.2}, max {:.2}; \
             send round trip p50 {:.2} ms; thread reads per question {:.2}\n",
            p1.latency.mean_ms,
            p1.latency.p50_ms,
            p1.latency.p90_ms,
            p1.latency.p99_ms,
            p1.latency.max_ms,
            p1.send.p50_ms,
            p1.reads_per_question
        ));
        out.push_str(&server_time_block(
            &p1.server,
            p1.latency.n as u64,
            "question",
            Some(p1.latency.mean_ms),
        ));
        out.push_str(&cpu_line(&p1.cpu, p1.latency.n));
        out.push_str(&db_block(&p1.db, p1.latency.n as u64, "question"));
    }
    if let Some(p2) = &results.p2 {
        out.push_str(&format!(
            "\n### P2 detail\n{} handled, {} skipped, {} dead in {:.2} s (pre-send took {:.1} s)\n",
            p2.handled, p2.skipped, p2.dead, p2.elapsed_s, p2.presend_s
        ));
        out.push_str(&server_time_block(
            &p2.server,
            p2.questions as u64,
            "answered question",
            None,
        ));
        out.push_str(&cpu_line(&p2.cpu, p2.questions));
        out.push_str(&db_block(&p2.db, p2.questions as u64, "answered question"));
    }
    if let Some(p3) = &results.p3 {
        out.push_str(&format!(
            "\n### P3 detail\nrequests in the window: {:?}; runtime claims (granted) {}\n",
            p3.request_lines, p3.claims
        ));
    }
    if let Some(p4) = &results.p4 {
        out.push_str(&format!(
            "\n### P4 detail\nsetup {:.1} s; claim ms, {} rooms: p50 {:.2} p90 {:.2} p99 {:.2}; \
             {} rooms: p50 {:.2} p90 {:.2} p99 {:.2}\n",
            p4.setup_s,
            p4.rooms_small,
            p4.small.p50_ms,
            p4.small.p90_ms,
            p4.small.p99_ms,
            p4.rooms_large,
            p4.large.p50_ms,
            p4.large.p90_ms,
            p4.large.p99_ms
        ));
        out.push_str(&format!("{} rooms:\n", p4.rooms_large));
        out.push_str(&db_block(
            &p4.db_large,
            p4.large.n as u64,
            "send+claim+finish",
        ));
        out.push_str(&format!("{} rooms:\n", p4.rooms_small));
        out.push_str(&db_block(
            &p4.db_small,
            p4.small.n as u64,
            "send+claim+finish",
        ));
    }
    if let Some(p5) = &results.p5 {
        out.push_str(&format!(
            "\n### P5 detail\n{} messages in {:.2} s\n",
            p5.messages, p5.elapsed_s
        ));
        out.push_str(&server_time_block(&p5.server, p5.messages, "message", None));
        out.push_str(&cpu_line(&p5.cpu, p5.messages as usize));
        out.push_str(&db_block(&p5.db, p5.messages, "message"));
    }
    if let Some(p6) = &results.p6 {
        out.push_str(&format!(
            "\n### P6 detail\nseeding {:.1} s; claim ms, {} pending: p50 {:.2} p90 {:.2} p99 {:.2}; \
             {} pending: p50 {:.2} p90 {:.2} p99 {:.2}\n",
            p6.seed_s,
            p6.small_backlog,
            p6.small.p50_ms,
            p6.small.p90_ms,
            p6.small.p99_ms,
            p6.large_backlog,
            p6.large.p50_ms,
            p6.large.p90_ms,
            p6.large.p99_ms
        ));
        out.push_str(&db_block(
            &p6.db,
            (p6.small.n + p6.large.n) as u64,
            "send+claim+finish",
        ));
    }
    if let Some(p7) = &results.p7 {
        out.push_str(&format!(
            "\n### P7 detail\nseeding {:.1} s; latency ms, empty room: p50 {:.2} p90 {:.2} p99 {:.2}; \
             {} messages: p50 {:.2} p90 {:.2} p99 {:.2}; thread reads per question {:.2}\n",
            p7.seed_s,
            p7.empty.p50_ms,
            p7.empty.p90_ms,
            p7.empty.p99_ms,
            p7.history,
            p7.full.p50_ms,
            p7.full.p90_ms,
            p7.full.p99_ms,
            p7.reads_per_question
        ));
        out.push_str(&db_block(
            &p7.db,
            (p7.empty.n + p7.full.n) as u64,
            "question",
        ));
    }
    out
}

fn cpu_line(cpu: &CpuSplit, jobs: usize) -> String {
    let per = |s: f64| s * 1e3 / jobs.max(1) as f64;
    format!(
        "CPU seconds over {:.1} s wall (2 cores = {:.1} s available): server {:.2}, workers {:.2}, \
         PostgreSQL {:.2}, bench clients {:.2}; per item ms: server {:.3}, workers {:.3}, \
         PostgreSQL {:.3}\n",
        cpu.wall_s,
        cpu.wall_s * 2.0,
        cpu.server_s,
        cpu.workers_s,
        cpu.postgres_s,
        cpu.bench_s,
        per(cpu.server_s),
        per(cpu.workers_s),
        per(cpu.postgres_s)
    )
}

fn db_block(db: &DbProfile, jobs: u64, per: &str) -> String {
    let n = jobs.max(1) as f64;
    let mut out = format!(
        "database per {per}: {:.2} statements, {:.2} commits, {:.3} rollbacks, {:.2} WAL flushes, \
         {:.0} WAL bytes, {:.3} ms executing; \
         the server sent {:.2} statements in {:.2} round trips with {:.2} prepares \
         ({:.2} kept, {:.2} uncached)\n",
        db.total_calls as f64 / n,
        db.commits as f64 / n,
        db.rollbacks as f64 / n,
        db.wal_syncs as f64 / n,
        db.wal_bytes as f64 / n,
        db.total_ms / n,
        db.sent.statements as f64 / n,
        db.sent.round_trips as f64 / n,
        db.sent.prepares() as f64 / n,
        db.sent.prepares_cached as f64 / n,
        db.sent.prepares_uncached as f64 / n,
    );
    out.push_str(&format!(
        "planning per item: {:.2} plans, {:.3} ms (a statement running a cached generic \
         plan is not planned again)\n",
        db.total_plans as f64 / n,
        db.total_plan_ms / n,
    ));
    out.push_str(
        "| calls/item | ms/item | plans/item | plan ms/item | statement |\n\
         | --- | --- | --- | --- | --- |\n",
    );
    for row in db.statements.iter().take(12) {
        let mut query: String = row.query.chars().take(150).collect();
        if row.query.chars().count() > 150 {
            query.push('…');
        }
        out.push_str(&format!(
            "| {:.2} | {:.3} | {:.2} | {:.3} | `{}` |\n",
            row.calls as f64 / n,
            row.total_ms / n,
            row.plans as f64 / n,
            row.plan_ms / n,
            query.replace('|', "\\|").replace('`', "'")
        ));
    }
    if !db.wal_by_relation.is_empty() {
        out.push_str(
            "WAL per item by the relation a record changes and its type (pg_walinspect):\n\
             | relation | record | records/item | bytes/item | of which full-page images |\n\
             | --- | --- | --- | --- | --- |\n",
        );
        for share in db.wal_by_relation.iter().take(24) {
            out.push_str(&format!(
                "| {} | {} | {:.2} | {:.0} | {:.0} |\n",
                share.relation,
                share.record,
                share.records as f64 / n,
                share.bytes as f64 / n,
                share.fpi_bytes as f64 / n,
            ));
        }
    }
    out
}

fn db_json(db: &DbProfile, jobs: u64) -> Value {
    let n = jobs.max(1) as f64;
    json!({
        "statementsPerItem": db.total_calls as f64 / n,
        "commitsPerItem": db.commits as f64 / n,
        "rollbacksPerItem": db.rollbacks as f64 / n,
        "walFlushesPerItem": db.wal_syncs as f64 / n,
        "walBytesPerItem": db.wal_bytes as f64 / n,
        "execMsPerItem": db.total_ms / n,
        "plansPerItem": db.total_plans as f64 / n,
        "planMsPerItem": db.total_plan_ms / n,
        "sentPerItem": {
            "statements": db.sent.statements as f64 / n,
            "roundTrips": db.sent.round_trips as f64 / n,
            "preparesCached": db.sent.prepares_cached as f64 / n,
            "preparesUncached": db.sent.prepares_uncached as f64 / n,
        },
        "walByRelation": db.wal_by_relation.iter().map(|share| json!({
            "relation": share.relation,
            "record": share.record,
            "recordsPerItem": share.records as f64 / n,
            "bytesPerItem": share.bytes as f64 / n,
            "fpiBytesPerItem": share.fpi_bytes as f64 / n,
        })).collect::<Vec<_>>(),
        "top": db.statements.iter().take(20).map(|row| json!({
            "callsPerItem": row.calls as f64 / n,
            "msPerItem": row.total_ms / n,
            "plansPerItem": row.plans as f64 / n,
            "planMsPerItem": row.plan_ms / n,
            "query": row.query,
        })).collect::<Vec<_>>(),
    })
}

pub(crate) fn print_json(options: &Options, results: &Results) {
    let table: Vec<Value> = rows(results)
        .into_iter()
        .map(|row| {
            json!({
                "figure": row.figure, "value": row.value, "baseline": row.baseline,
                "ratio": row.ratio, "target": row.target, "met": row.met,
            })
        })
        .collect();
    let value = json!({
        "quick": options.quick,
        "settings": results.settings.as_ref().map(|s| json!({
            "version": s.version, "fsync": s.fsync, "synchronousCommit": s.synchronous_commit,
            "fullPageWrites": s.full_page_writes, "walSyncMethod": s.wal_sync_method,
            "sharedBuffers": s.shared_buffers,
        })),
        "baseline": results.baseline.map(|b| json!({
            "c1": {"tps": b.one.tps, "latencyMs": b.one.latency_ms},
            "c16": {"tps": b.sixteen.tps, "latencyMs": b.sixteen.latency_ms},
        })),
        "table": table,
        "p1": results.p1.as_ref().map(|p| json!({
            "latency": p.latency, "send": p.send, "readsPerQuestion": p.reads_per_question,
            "serverTime": p.server.per_item(p.latency.n as u64),
            "cpu": p.cpu, "db": db_json(&p.db, p.latency.n as u64),
        })),
        "p2": results.p2.as_ref().map(|p| json!({
            "questions": p.questions, "rooms": p.rooms, "workers": p.workers,
            "elapsedS": p.elapsed_s, "answeredPerS": p.answered_per_s, "handled": p.handled,
            "skipped": p.skipped, "dead": p.dead, "serverRssPeakKib": p.server_rss_peak_kib,
            "serverTime": p.server.per_item(p.questions as u64), "cpu": p.cpu, "db": db_json(&p.db, p.questions as u64),
        })),
        "p3": results.p3.as_ref().map(|p| json!({
            "windowS": p.window_s, "requests": p.requests, "requestsPerMin": p.requests_per_min,
            "requestLines": p.request_lines, "cpuS": p.cpu_s, "modelCalls": p.model_calls,
            "workerRssKib": p.worker_rss_kib,
        })),
        "p4": results.p4.as_ref().map(|p| json!({
            "roomsSmall": p.rooms_small, "roomsLarge": p.rooms_large, "small": p.small,
            "large": p.large, "dbLarge": db_json(&p.db_large, p.large.n as u64),
            "dbSmall": db_json(&p.db_small, p.small.n as u64),
        })),
        "p5": results.p5.as_ref().map(|p| json!({
            "senders": p.senders, "messages": p.messages, "elapsedS": p.elapsed_s,
            "perS": p.per_s, "serverTime": p.server.per_item(p.messages), "cpu": p.cpu, "db": db_json(&p.db, p.messages),
        })),
        "p6": results.p6.as_ref().map(|p| json!({
            "smallBacklog": p.small_backlog, "largeBacklog": p.large_backlog,
            "small": p.small, "large": p.large, "seedS": p.seed_s,
            "db": db_json(&p.db, (p.small.n + p.large.n) as u64),
        })),
        "p7": results.p7.as_ref().map(|p| json!({
            "history": p.history, "empty": p.empty, "full": p.full, "seedS": p.seed_s,
            "readsPerQuestion": p.reads_per_question,
            "db": db_json(&p.db, (p.empty.n + p.full.n) as u64),
        })),
        "peers": peers::json(&results.peers),
        "loads": results.loads.iter().map(|(when, load)| json!({"when": when, "load": load}))
            .collect::<Vec<_>>(),
    });
    #[allow(clippy::print_stdout)]
    {
        println!(
            "{}",
            serde_json::to_string_pretty(&value).unwrap_or_default()
        );
    }
}
