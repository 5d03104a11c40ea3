//! The schema against a real PostgreSQL: migrations, the diesel mapping, and
//! the constraints that keep bad states out of the tables.

use diesel::sql_types::{BigInt, Text};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use relayger_store::{MIGRATIONS, applied_migrations, run_migrations};
use relayger_testdb::TestDatabase;

#[derive(diesel::QueryableByName)]
struct Column {
    #[diesel(sql_type = Text)]
    column_name: String,
}

#[derive(diesel::QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

#[tokio::test(flavor = "multi_thread")]
async fn migrations_apply_to_an_empty_database_and_a_rerun_is_a_no_op() {
    use diesel::migration::MigrationSource;
    let db = TestDatabase::create_empty().await;
    let expected: Vec<String> = MigrationSource::<diesel::pg::Pg>::migrations(&MIGRATIONS)
        .expect("embedded migrations")
        .iter()
        .map(|m| m.name().version().to_string())
        .collect();
    assert!(!expected.is_empty());

    let first = run_migrations(db.url()).await.expect("first run");
    assert_eq!(
        first, expected,
        "every migration applies to an empty database"
    );
    let second = run_migrations(db.url()).await.expect("second run");
    assert!(
        second.is_empty(),
        "a re-run applies nothing, got {second:?}"
    );
    assert_eq!(
        applied_migrations(db.url()).await.expect("applied"),
        expected
    );

    let store = db.store().await;
    assert_eq!(
        store.schema_migration_count().await.expect("count"),
        u32::try_from(expected.len()).expect("small")
    );
}

/// Column names of a diesel table, read from the SQL diesel generates for
/// `SELECT <all columns>`: derived from schema.rs, never listed by hand.
macro_rules! diesel_columns {
    ($table:ident) => {{
        use diesel::prelude::*;
        use relayger_store::schema::$table;
        let sql =
            diesel::debug_query::<diesel::pg::Pg, _>(&$table::table.select($table::all_columns))
                .to_string();
        let select = sql.split(" FROM ").next().expect("select list").to_owned();
        let prefix = format!("\"{}\".", stringify!($table));
        let columns: Vec<String> = select
            .trim_start_matches("SELECT ")
            .split(", ")
            .map(|c| {
                c.trim_start_matches(prefix.as_str())
                    .trim_matches('"')
                    .to_owned()
            })
            .collect();
        (stringify!($table), columns)
    }};
}

#[tokio::test(flavor = "multi_thread")]
async fn diesel_schema_matches_the_migrated_catalog() {
    let db = TestDatabase::create().await;
    let mut conn = AsyncPgConnection::establish(db.url())
        .await
        .expect("connect");
    let tables = [
        diesel_columns!(identities),
        diesel_columns!(invites),
        diesel_columns!(tokens),
        diesel_columns!(rooms),
        diesel_columns!(room_members),
        diesel_columns!(contact_requests),
        diesel_columns!(contacts),
        diesel_columns!(blocks),
        diesel_columns!(messages),
        diesel_columns!(mailbox_cursors),
        diesel_columns!(runtimes),
        diesel_columns!(runtime_checkpoints),
        diesel_columns!(runtime_dirty_rooms),
        diesel_columns!(jobs),
        diesel_columns!(attempts),
        diesel_columns!(notes),
        diesel_columns!(runtime_log),
        diesel_columns!(question_cancels),
    ];
    for (table, diesel_columns) in &tables {
        let catalog: Vec<String> = diesel::sql_query(
            "SELECT column_name::text AS column_name FROM information_schema.columns \
             WHERE table_schema = 'public' AND table_name = $1 ORDER BY ordinal_position",
        )
        .bind::<Text, _>(*table)
        .load::<Column>(&mut conn)
        .await
        .expect("catalog")
        .into_iter()
        .map(|c| c.column_name)
        .collect();
        assert_eq!(&catalog, diesel_columns, "table {table}");
    }
    let user_tables: Count = diesel::sql_query(
        "SELECT count(*) AS n FROM information_schema.tables WHERE table_schema = 'public' \
         AND table_type = 'BASE TABLE' AND table_name <> '__diesel_schema_migrations'",
    )
    .get_result(&mut conn)
    .await
    .expect("tables");
    assert_eq!(
        usize::try_from(user_tables.n).expect("count"),
        tables.len(),
        "every table of the migrations is mapped in schema.rs"
    );
}

const SETUP: &str = "
    INSERT INTO identities (id, number, kind, display_name)
        VALUES ('00000000-0000-0000-0000-0000000000a1', '100000001', 'agent', 'a'),
               ('00000000-0000-0000-0000-0000000000b1', '100000002', 'person', 'b');
    INSERT INTO rooms (id, kind, name, created_by)
        VALUES ('00000000-0000-0000-0000-0000000000c1', 'group', 'one', '00000000-0000-0000-0000-0000000000a1'),
               ('00000000-0000-0000-0000-0000000000c2', 'group', 'two', '00000000-0000-0000-0000-0000000000a1');
    INSERT INTO messages (id, room_id, seq, sender_id, text, ask)
        VALUES ('00000000-0000-0000-0000-0000000000d1', '00000000-0000-0000-0000-0000000000c1', 1,
                '00000000-0000-0000-0000-0000000000b1', 'hello', true);
    INSERT INTO runtimes (id, agent_id, name, from_mode, policy, policy_fingerprint)
        VALUES ('00000000-0000-0000-0000-0000000000e1', '00000000-0000-0000-0000-0000000000a1', 'w',
                'now', '{}', repeat('a', 64));
";

/// Statements that describe a bad state; each must be refused by the schema.
const BAD_STATES: &[(&str, &str)] = &[
    (
        "two messages with one (room, seq)",
        "INSERT INTO messages (id, room_id, seq, sender_id, text)
         VALUES (gen_random_uuid(), '00000000-0000-0000-0000-0000000000c1', 1, '00000000-0000-0000-0000-0000000000b1', 'again')",
    ),
    (
        "a message with both text and a sealed payload",
        "INSERT INTO messages (id, room_id, seq, sender_id, text, sealed)
         VALUES (gen_random_uuid(), '00000000-0000-0000-0000-0000000000c1', 2, '00000000-0000-0000-0000-0000000000b1', 'x', '{}')",
    ),
    (
        "a deadline without ask",
        "INSERT INTO messages (id, room_id, seq, sender_id, text, deadline)
         VALUES (gen_random_uuid(), '00000000-0000-0000-0000-0000000000c1', 2, '00000000-0000-0000-0000-0000000000b1', 'x', now())",
    ),
    (
        "a reply whose parent is in another room",
        "INSERT INTO messages (id, room_id, seq, sender_id, text, reply_to)
         VALUES (gen_random_uuid(), '00000000-0000-0000-0000-0000000000c2', 1, '00000000-0000-0000-0000-0000000000b1', 'x',
                 '00000000-0000-0000-0000-0000000000d1')",
    ),
    (
        "a claimed job without a lease",
        "INSERT INTO jobs (id, runtime_id, room_id, message_id, state)
         VALUES (gen_random_uuid(), '00000000-0000-0000-0000-0000000000e1', '00000000-0000-0000-0000-0000000000c1',
                 '00000000-0000-0000-0000-0000000000d1', 'claimed')",
    ),
    (
        "a pending job carrying a lease",
        "INSERT INTO jobs (id, runtime_id, room_id, message_id, state, lease_owner, lease_version, lease_expires_at)
         VALUES (gen_random_uuid(), '00000000-0000-0000-0000-0000000000e1', '00000000-0000-0000-0000-0000000000c1',
                 '00000000-0000-0000-0000-0000000000d1', 'pending', repeat('0', 32), 1, now())",
    ),
    (
        "a job in an unknown state",
        "INSERT INTO jobs (id, runtime_id, room_id, message_id, state)
         VALUES (gen_random_uuid(), '00000000-0000-0000-0000-0000000000e1', '00000000-0000-0000-0000-0000000000c1',
                 '00000000-0000-0000-0000-0000000000d1', 'running')",
    ),
    (
        "a dead job without a reason",
        "INSERT INTO jobs (id, runtime_id, room_id, message_id, state)
         VALUES (gen_random_uuid(), '00000000-0000-0000-0000-0000000000e1', '00000000-0000-0000-0000-0000000000c1',
                 '00000000-0000-0000-0000-0000000000d1', 'dead')",
    ),
    (
        "a job for a message in another room",
        "INSERT INTO jobs (id, runtime_id, room_id, message_id, state)
         VALUES (gen_random_uuid(), '00000000-0000-0000-0000-0000000000e1', '00000000-0000-0000-0000-0000000000c2',
                 '00000000-0000-0000-0000-0000000000d1', 'pending')",
    ),
    (
        "two runtimes with one (agent, name)",
        "INSERT INTO runtimes (id, agent_id, name, from_mode, policy, policy_fingerprint)
         VALUES (gen_random_uuid(), '00000000-0000-0000-0000-0000000000a1', 'w', 'now', '{}', repeat('b', 64))",
    ),
    (
        "a token with an unknown scope",
        "INSERT INTO tokens (id, identity_id, secret_hash, scopes)
         VALUES (gen_random_uuid(), '00000000-0000-0000-0000-0000000000a1', decode(repeat('ab', 32), 'hex'), ARRAY['admin'])",
    ),
    (
        "an identity number with letters",
        "INSERT INTO identities (id, number, kind, display_name) VALUES (gen_random_uuid(), '12345x789', 'agent', 'x')",
    ),
    (
        "a contact pair stored in the wrong order",
        "INSERT INTO contacts (identity_a, identity_b, room_id, state)
         VALUES ('00000000-0000-0000-0000-0000000000b1', '00000000-0000-0000-0000-0000000000a1',
                 '00000000-0000-0000-0000-0000000000c1', 'active')",
    ),
    (
        "a note over 4000 bytes",
        "INSERT INTO notes (id, runtime_id, room_id, note_key, text, version)
         VALUES (gen_random_uuid(), '00000000-0000-0000-0000-0000000000e1', '00000000-0000-0000-0000-0000000000c1',
                 'k', repeat('é', 2001), 1)",
    ),
    (
        "usage reported for only some counters",
        "INSERT INTO attempts (job_id, runtime_id, attempt, lease_owner, lease_version, grant_seq,
                               model_calls)
         SELECT id, runtime_id, 1, repeat('0', 32), 1, 1, 1 FROM jobs LIMIT 1",
    ),
    (
        "a completion storing the answer its outcome and reply already say",
        "INSERT INTO attempts (job_id, runtime_id, attempt, lease_owner, lease_version, grant_seq,
                               finished_at, outcome, finish_response)
         SELECT id, runtime_id, 1, repeat('0', 32), 2, 1, now(), 'handled',
                '{\"outcome\":\"handled\"}' FROM jobs LIMIT 1",
    ),
    (
        "a failed attempt without its answer",
        "INSERT INTO attempts (job_id, runtime_id, attempt, lease_owner, lease_version, grant_seq,
                               finished_at, outcome)
         SELECT id, runtime_id, 1, repeat('0', 32), 3, 1, now(), 'failed' FROM jobs LIMIT 1",
    ),
    (
        "a completion fingerprint that is not 32 bytes",
        "INSERT INTO attempts (job_id, runtime_id, attempt, lease_owner, lease_version, grant_seq,
                               fingerprint)
         SELECT id, runtime_id, 1, repeat('0', 32), 4, 1, '\\xabcd' FROM jobs LIMIT 1",
    ),
];

#[tokio::test(flavor = "multi_thread")]
async fn constraints_refuse_bad_states() {
    let db = TestDatabase::create().await;
    let mut conn = AsyncPgConnection::establish(db.url())
        .await
        .expect("connect");
    for statement in SETUP.split(';').filter(|s| !s.trim().is_empty()) {
        diesel::sql_query(statement)
            .execute(&mut conn)
            .await
            .expect(statement);
    }
    // A good pending job so the attempt case has a job to point at.
    diesel::sql_query(
        "INSERT INTO jobs (id, runtime_id, room_id, message_id, state)
         VALUES (gen_random_uuid(), '00000000-0000-0000-0000-0000000000e1', '00000000-0000-0000-0000-0000000000c1',
                 '00000000-0000-0000-0000-0000000000d1', 'pending')",
    )
    .execute(&mut conn)
    .await
    .expect("a well-formed job is accepted");
    for (what, statement) in BAD_STATES {
        use diesel::result::{DatabaseErrorKind as Kind, Error};
        match diesel::sql_query(*statement).execute(&mut conn).await {
            Ok(_) => panic!("the schema accepted {what}"),
            // A constraint must refuse it, not a typo in the statement.
            Err(Error::DatabaseError(
                Kind::UniqueViolation | Kind::ForeignKeyViolation | Kind::CheckViolation,
                _,
            )) => {}
            Err(other) => panic!("{what}: refused for the wrong reason: {other}"),
        }
    }
}
