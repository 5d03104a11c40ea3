//! The generic plans of the set-based runtime writes. A claim runs its
//! statements with `plan_cache_mode = force_generic_plan`, where the planner
//! guesses every `unnest($n)` at ten rows; a statement that finds its rows
//! only by joining them to that input was planned as a hash join over a
//! sequential scan of the whole table while the table held about a
//! thousand rows. Each statement here must reach its rows by index.

use diesel::QueryableByName;
use diesel::sql_types::Text;
use diesel_async::{RunQueryDsl, SimpleAsyncConnection};

use crate::test_support::TestDatabase;

#[derive(QueryableByName)]
struct PlanLine {
    #[diesel(sql_type = Text, column_name = "QUERY PLAN")]
    line: String,
}

/// The generic plan of `sql` (parameter types `types`) run with `args`,
/// once `jobs` and `attempts` hold a thousand analyzed rows (the size at
/// which `bench p1` found the sequential scan; the old statements planned
/// it here, and from a few thousand rows on the planner chose the index
/// anyway).
async fn generic_plan(sql: &str, types: &str, args: &str) -> String {
    generic_plan_with(sql, types, args, "").await
}

/// [`generic_plan`] with `more_rows` (SQL) written before the statistics.
async fn generic_plan_with(sql: &str, types: &str, args: &str, more_rows: &str) -> String {
    // Rows for the planner's statistics only: the foreign keys are not
    // checked for them (a replica's session), and this database is the
    // test's own.
    let rows = format!(
        "SET session_replication_role = replica;
         INSERT INTO jobs (id, runtime_id, room_id, message_id, state)
         SELECT gen_random_uuid(), gen_random_uuid(), gen_random_uuid(), gen_random_uuid(), 'handled'
         FROM generate_series(1, 1000) AS n;
         INSERT INTO attempts (job_id, runtime_id, attempt, lease_owner, lease_version, grant_seq)
         SELECT id, runtime_id, 1, repeat('a', 32), row_number() OVER (), 1 FROM jobs;
         {more_rows}
         SET session_replication_role = DEFAULT;"
    );
    plan_after(&rows, sql, types, args).await
}

/// The generic plan of `sql` run with `args` in a claim's transaction,
/// once `rows` (SQL) are written and `jobs` and `attempts` analyzed.
async fn plan_after(rows: &str, sql: &str, types: &str, args: &str) -> String {
    let db = TestDatabase::create().await;
    let store = db.store().await;
    let mut conn = store.conn().await.expect("connection");
    conn.batch_execute(&format!("{rows} ANALYZE jobs, attempts;"))
        .await
        .expect("statistics");
    // The planner settings of a claim's transaction, from the claim's own
    // statement (they last until the transaction ends).
    conn.batch_execute(&format!(
        "BEGIN; PREPARE claim_settings(bigint) AS {}; EXECUTE claim_settings(10000)",
        super::statements::GENERIC_PLANS
    ))
    .await
    .expect("the claim's planner settings");
    conn.batch_execute(&format!("PREPARE under_test({types}) AS {sql}"))
        .await
        .expect("prepare");
    let lines: Vec<PlanLine> = diesel::sql_query(format!("EXPLAIN EXECUTE under_test({args})"))
        .load(&mut conn)
        .await
        .expect("explain");
    lines
        .into_iter()
        .map(|l| l.line)
        .collect::<Vec<_>>()
        .join("\n")
}

const RUNTIME: &str = "'00000000-0000-7000-8000-000000000001'::uuid";

#[tokio::test]
async fn a_claims_grants_and_skips_find_their_jobs_by_primary_key() {
    let plan = generic_plan(
        super::statements::GRANT_AND_SKIP,
        "uuid, uuid[], text[], text[], bigint, bigint",
        &format!("{RUNTIME}, '{{}}', '{{}}', '{{}}', 30000, 0"),
    )
    .await;
    assert!(!plan.contains("Seq Scan on jobs"), "{plan}");
    assert!(plan.contains("jobs_pkey"), "{plan}");
}

#[tokio::test]
async fn expired_leases_end_by_index() {
    let plan = generic_plan(
        super::statements::END_EXPIRED,
        "uuid, uuid[], bigint[], text[], bigint[], text[]",
        &format!("{RUNTIME}, '{{}}', '{{}}', '{{}}', '{{}}', '{{}}'"),
    )
    .await;
    assert!(!plan.contains("Seq Scan on jobs"), "{plan}");
    assert!(!plan.contains("Seq Scan on attempts"), "{plan}");
}

/// What a claim reads for `retryAt` finds the next backoff end among the
/// few jobs that wait one, not by walking every pending job of the runtime
/// (`bench p2` has 20,000).
#[tokio::test]
async fn the_next_backoff_end_is_read_from_the_waiting_jobs_only() {
    let plan = generic_plan_with(
        super::statements::IDLE_FACTS,
        "uuid",
        RUNTIME,
        &format!(
            "INSERT INTO jobs (id, runtime_id, room_id, message_id, state, not_before)
             SELECT gen_random_uuid(), {RUNTIME}, gen_random_uuid(), gen_random_uuid(), 'pending',
                    CASE WHEN n % 1000 = 0 THEN now() + interval '1 minute' END
             FROM generate_series(1, 5000) AS n;"
        ),
    )
    .await;
    assert!(plan.contains("jobs_backoff_idx"), "{plan}");
}

/// A connection keeps the generic plan it made at a runtime's first claim,
/// while the runtime had no job yet (a new runtime, or a new database: its
/// first scan writes the jobs after the claim planned). On an empty table a
/// sequential scan costs nothing, and a plan that chose one read every job
/// of every runtime on each later claim (`bench p2`: thousands of scans of
/// its 20,000 jobs) until an analyze replanned it. What a claim reads must
/// come by index even when planned on an empty table.
#[tokio::test]
async fn a_claim_planned_while_there_are_no_jobs_reads_them_by_index() {
    let agent = "'00000000-0000-7000-8000-000000000002'::uuid";
    for (what, sql, types, args) in [
        (
            "claim_state.sql",
            super::statements::CLAIM_STATE,
            "uuid",
            RUNTIME.to_owned(),
        ),
        (
            "expired_leases.sql",
            super::statements::EXPIRED_LEASES,
            "uuid, uuid",
            format!("{RUNTIME}, {agent}"),
        ),
        (
            "idle_facts.sql",
            super::statements::IDLE_FACTS,
            "uuid",
            RUNTIME.to_owned(),
        ),
        (
            "candidates.sql",
            super::statements::CANDIDATES,
            "uuid, uuid, uuid[], timestamptz, uuid, bigint, bigint",
            format!("{RUNTIME}, {agent}, NULL, NULL, NULL, 64, 4"),
        ),
    ] {
        let plan = plan_after("", sql, types, &args).await;
        assert!(!plan.contains("Seq Scan on jobs"), "{what}: {plan}");
        assert!(!plan.contains("Seq Scan on attempts"), "{what}: {plan}");
    }
}

/// No statement a claim sends is planned with a path its settings disable
/// (a sequential scan where no index serves it: such a plan costs more than
/// `jit_above_cost`, and a JIT-compiled count of pending contact requests
/// took 23 ms of a 27 ms claim in `bench p1`). Planned on empty tables, the
/// case where a sequential scan looks cheapest.
#[tokio::test]
async fn no_statement_of_a_claim_is_planned_with_a_disabled_path() {
    let agent = "'00000000-0000-7000-8000-000000000002'::uuid";
    let runtime_and_agent = format!("{RUNTIME}, {agent}");
    let statements = [
        (
            "lock_runtime.sql",
            super::statements::LOCK_RUNTIME,
            "uuid, uuid",
            runtime_and_agent.clone(),
        ),
        (
            "expired_leases.sql",
            super::statements::EXPIRED_LEASES,
            "uuid, uuid",
            runtime_and_agent.clone(),
        ),
        (
            "end_expired.sql",
            super::statements::END_EXPIRED,
            "uuid, uuid[], bigint[], text[], bigint[], text[]",
            format!("{RUNTIME}, '{{}}', '{{}}', '{{}}', '{{}}', '{{}}'"),
        ),
        (
            "claim_state.sql",
            super::statements::CLAIM_STATE,
            "uuid",
            RUNTIME.to_owned(),
        ),
        (
            "the pending contact requests",
            crate::contacts::PENDING_REQUEST_COUNT,
            "uuid",
            agent.to_owned(),
        ),
        (
            "lock_rooms.sql",
            super::statements::LOCK_ROOMS,
            "uuid, uuid, bigint",
            format!("{runtime_and_agent}, 128"),
        ),
        (
            "write_scan.sql",
            super::statements::WRITE_SCAN,
            "uuid, uuid, bigint, bigint",
            format!("{runtime_and_agent}, 200, 128"),
        ),
        (
            "candidates.sql",
            super::statements::CANDIDATES,
            "uuid, uuid, uuid[], timestamptz, uuid, bigint, bigint",
            format!("{runtime_and_agent}, NULL, NULL, NULL, 64, 4"),
        ),
        (
            "grant_and_skip.sql",
            super::statements::GRANT_AND_SKIP,
            "uuid, uuid[], text[], text[], bigint, bigint",
            format!("{RUNTIME}, '{{}}', '{{}}', '{{}}', 30000, 0"),
        ),
        (
            "idle_facts.sql",
            super::statements::IDLE_FACTS,
            "uuid",
            RUNTIME.to_owned(),
        ),
    ];
    for (what, sql, types, args) in statements {
        let plan = plan_after("", sql, types, &args).await;
        assert!(!plan.contains("cost=10000000000"), "{what}: {plan}");
    }
}
