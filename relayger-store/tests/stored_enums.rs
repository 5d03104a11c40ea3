//! Each enum relayger-core stores as text is mapped to the database once,
//! as a constraint listing exactly its stored names (a domain's for the
//! job and attempt columns, a CHECK for the log's kind).

use std::collections::BTreeSet;

use diesel::sql_types::Text;
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use relayger_core::job::{AttemptEnd, AttemptOutcome, JobState, RuntimeEvent};
use relayger_testdb::TestDatabase;

#[derive(diesel::QueryableByName)]
struct Definition {
    #[diesel(sql_type = Text)]
    definition: String,
}

/// The quoted names a CHECK constraint lists.
async fn listed(conn: &mut AsyncPgConnection, constraint: &str) -> BTreeSet<String> {
    let found: Definition = diesel::sql_query(
        "SELECT pg_get_constraintdef(oid) AS definition FROM pg_constraint WHERE conname = $1",
    )
    .bind::<Text, _>(constraint)
    .get_result(conn)
    .await
    .unwrap_or_else(|e| panic!("{constraint}: {e}"));
    found
        .definition
        .split('\'')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn every_stored_enum_matches_its_check_constraint() {
    let db = TestDatabase::create().await;
    let mut conn = AsyncPgConnection::establish(db.url())
        .await
        .expect("connect");
    let names =
        |all: Vec<&'static str>| all.into_iter().map(str::to_owned).collect::<BTreeSet<_>>();
    let table = [
        (
            "jobs_state_check",
            names(JobState::ALL.iter().map(|v| v.as_str()).collect()),
        ),
        (
            "attempts_outcome_check",
            names(AttemptOutcome::ALL.iter().map(|v| v.as_str()).collect()),
        ),
        (
            "attempts_ended_check",
            names(AttemptEnd::ALL.iter().map(|v| v.as_str()).collect()),
        ),
        (
            "runtime_log_kind_check",
            names(RuntimeEvent::ALL.iter().map(|v| v.as_str()).collect()),
        ),
    ];
    for (constraint, expected) in table {
        assert_eq!(
            listed(&mut conn, constraint).await,
            expected,
            "{constraint}"
        );
    }
}
