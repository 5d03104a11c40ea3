//! An existing database upgraded to the redesigned job spine keeps every
//! fact it held: a job's completion moves onto the attempt that completed
//! it, budget units become the attempts' running grant count, and the log
//! records an attempt stands for are read back from the attempt.

use diesel::sql_types::{BigInt, Nullable, Text};
use diesel_async::async_connection_wrapper::AsyncConnectionWrapper;
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl, SimpleAsyncConnection};
use diesel_migrations::MigrationHarness;
use relayger_store::{Caller, MIGRATIONS, run_migrations};
use relayger_testdb::TestDatabase;
use uuid::Uuid;

/// The last migration before the redesign.
const BEFORE: &str = "20261206000201";

const AGENT: &str = "00000000-0000-7000-8000-00000000a001";
const ASKER: &str = "00000000-0000-7000-8000-00000000a002";
const ROOM: &str = "00000000-0000-7000-8000-00000000b001";
const QUESTION: &str = "00000000-0000-7000-8000-00000000c001";
const SECOND: &str = "00000000-0000-7000-8000-00000000c002";
const REPLY: &str = "00000000-0000-7000-8000-00000000c003";
const RUNTIME: &str = "00000000-0000-7000-8000-00000000d001";
const ANSWERED: &str = "00000000-0000-7000-8000-00000000e001";
const RELEASED: &str = "00000000-0000-7000-8000-00000000e002";
const FINGERPRINT: &str = "ab";

/// The last migration before messages knew their thread's root.
const BEFORE_THREAD_ROOT: &str = "20261207000301";

/// Applies the migrations up to and including `BEFORE`.
async fn migrate_to_before(url: &str) {
    migrate_to(url, BEFORE).await;
}

/// Applies the migrations up to and including `last`.
async fn migrate_to(url: &str, last: &'static str) {
    let url = url.to_owned();
    tokio::task::spawn_blocking(move || {
        let mut conn =
            <AsyncConnectionWrapper<AsyncPgConnection> as diesel::Connection>::establish(&url)
                .expect("connect");
        loop {
            let version = conn
                .run_next_migration(MIGRATIONS)
                .expect("migrate")
                .to_string();
            if version == last {
                break;
            }
        }
    })
    .await
    .expect("migration task");
}

#[derive(diesel::QueryableByName, Debug, PartialEq)]
struct AttemptFacts {
    #[diesel(sql_type = BigInt)]
    lease_version: i64,
    #[diesel(sql_type = BigInt)]
    grant_seq: i64,
    #[diesel(sql_type = Nullable<Text>)]
    end_event: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    fingerprint: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    reply: Option<String>,
}

#[tokio::test(flavor = "multi_thread")]
async fn an_upgraded_database_keeps_completions_budget_and_log() {
    let db = TestDatabase::create_empty().await;
    migrate_to_before(db.url()).await;
    let mut conn = AsyncPgConnection::establish(db.url())
        .await
        .expect("connect");
    let fingerprint = FINGERPRINT.repeat(32);
    // A runtime with two jobs: one answered on its second attempt (the first
    // expired), one released; three budget units; the log records of all of
    // it, written the way the spine before the redesign wrote them.
    conn.batch_execute(&format!(
        "INSERT INTO identities (id, number, kind, display_name) VALUES
             ('{AGENT}', '100000001', 'agent', 'bot'), ('{ASKER}', '100000002', 'person', 'asker');
         INSERT INTO rooms (id, kind, name, created_by, last_seq) VALUES ('{ROOM}', 'group', 'r', '{ASKER}', 3);
         INSERT INTO room_members (room_id, identity_id) VALUES ('{ROOM}', '{AGENT}'), ('{ROOM}', '{ASKER}');
         INSERT INTO messages (id, room_id, seq, sender_id, text, ask) VALUES
             ('{QUESTION}', '{ROOM}', 1, '{ASKER}', 'q1', true),
             ('{SECOND}', '{ROOM}', 2, '{ASKER}', 'q2', true);
         INSERT INTO messages (id, room_id, seq, sender_id, text, reply_to, by_runtime, runtime_id)
             VALUES ('{REPLY}', '{ROOM}', 3, '{AGENT}', 'Q1', '{QUESTION}', true, '{RUNTIME}');
         INSERT INTO runtimes (id, agent_id, name, from_mode, policy, policy_fingerprint)
             VALUES ('{RUNTIME}', '{AGENT}', 'old', 'now', '{{\"concurrency\": 1}}', repeat('0', 64));
         INSERT INTO jobs (id, runtime_id, room_id, message_id, job_key, state, attempts) VALUES
             ('{ANSWERED}', '{RUNTIME}', '{ROOM}', '{QUESTION}', 'job_a', 'handled', 2),
             ('{RELEASED}', '{RUNTIME}', '{ROOM}', '{SECOND}', 'job_b', 'pending', 0);
         INSERT INTO attempts (job_id, runtime_id, attempt, lease_owner, lease_version, claimed_at,
                               finished_at, outcome, ended, model_calls, input_tokens, output_tokens)
         VALUES
             ('{ANSWERED}', '{RUNTIME}', 1, repeat('1', 32), 10, now() - interval '3 minutes',
              NULL, NULL, 'expired', NULL, NULL, NULL),
             ('{ANSWERED}', '{RUNTIME}', 2, repeat('2', 32), 11, now() - interval '2 minutes',
              now() - interval '1 minute', 'replied', 'finished', 0, 0, 0),
             ('{RELEASED}', '{RUNTIME}', 1, repeat('3', 32), 12, now() - interval '30 seconds',
              NULL, NULL, 'released', NULL, NULL, NULL);
         INSERT INTO completions (job_id, fingerprint, lease_version, reply_message_id, reply_room_id, outcome)
             VALUES ('{ANSWERED}', '{fingerprint}', 11, '{REPLY}', '{ROOM}',
                     '{{\"outcome\": \"replied\", \"replyMessageId\": \"{REPLY}\"}}');
         INSERT INTO budget_units (runtime_id, granted_at, seq) VALUES
             ('{RUNTIME}', now() - interval '3 minutes', 1),
             ('{RUNTIME}', now() - interval '2 minutes', 2),
             ('{RUNTIME}', now() - interval '30 seconds', 3);
         INSERT INTO runtime_log (runtime_id, kind, job_key, room_id, message_id, detail) VALUES
             ('{RUNTIME}', 'registered', NULL, NULL, NULL, '{{\"name\": \"old\"}}'),
             ('{RUNTIME}', 'claimed', 'job_a', '{ROOM}', '{QUESTION}', '{{\"attempt\": 1}}'),
             ('{RUNTIME}', 'expired', 'job_a', '{ROOM}', '{QUESTION}', '{{\"attempt\": 1}}'),
             ('{RUNTIME}', 'claimed', 'job_a', '{ROOM}', '{QUESTION}', '{{\"attempt\": 2}}'),
             ('{RUNTIME}', 'replied', 'job_a', '{ROOM}', '{QUESTION}', '{{\"attempt\": 2}}'),
             ('{RUNTIME}', 'claimed', 'job_b', '{ROOM}', '{SECOND}', '{{\"attempt\": 1}}'),
             ('{RUNTIME}', 'released', 'job_b', '{ROOM}', '{SECOND}', '{{}}'),
             ('{RUNTIME}', 'skipped', 'job_c', '{ROOM}', '{SECOND}', '{{\"reason\": \"not_allowed\"}}');"
    ))
    .await
    .expect("the old schema's rows");

    run_migrations(db.url()).await.expect("the upgrade");

    let attempts: Vec<AttemptFacts> = diesel::sql_query(
        "SELECT lease_version, grant_seq, end_event, encode(fingerprint, 'hex') AS fingerprint,
                reply_message_id::text AS reply
         FROM attempts ORDER BY lease_version",
    )
    .load(&mut conn)
    .await
    .expect("attempts");
    let fact =
        |lease_version, grant_seq, end: &str, fingerprint: Option<&str>, reply: Option<&str>| {
            AttemptFacts {
                lease_version,
                grant_seq,
                end_event: Some(end.to_owned()),
                fingerprint: fingerprint.map(str::to_owned),
                reply: reply.map(str::to_owned),
            }
        };
    assert_eq!(
        attempts,
        [
            fact(10, 1, "expired", None, None),
            fact(11, 2, "replied", Some(&fingerprint), Some(REPLY)),
            fact(12, 3, "released", None, None),
        ]
    );

    // The log: the rows without an attempt stay rows, the rest is read
    // from the attempts; stats and the budget count the same grants.
    let store = db.store().await;
    let caller = Caller {
        identity_id: AGENT.parse().expect("uuid"),
        token_id: Uuid::now_v7(),
        rooms: None,
    };
    let runtime: Uuid = RUNTIME.parse().expect("uuid");
    let log = store
        .runtime_log(&caller, runtime, None)
        .await
        .expect("log");
    let mut kinds: Vec<&str> = log.iter().map(|record| record.kind.as_str()).collect();
    kinds.sort_unstable();
    assert_eq!(
        kinds,
        [
            "claimed",
            "claimed",
            "claimed",
            "expired",
            "registered",
            "released",
            "replied",
            "skipped"
        ]
    );
    let replied = log
        .iter()
        .find(|record| record.kind == "replied")
        .expect("replied");
    assert_eq!(replied.detail["replyMessageId"], REPLY);
    assert_eq!(replied.detail["attempt"], 2);
    let stats = store.runtime_stats(&caller, runtime).await.expect("stats");
    assert_eq!(stats.claims, 3);
    assert_eq!(stats.finished_attempts, 1);
    assert_eq!(stats.unfinished_attempts, 2);
    assert_eq!(stats.budget_used_last_hour, 3);
}

#[derive(diesel::QueryableByName, Debug, PartialEq)]
struct ThreadRoot {
    #[diesel(sql_type = Text)]
    text: String,
    #[diesel(sql_type = Text)]
    root: String,
}

#[tokio::test(flavor = "multi_thread")]
async fn an_upgraded_database_knows_each_messages_thread_root() {
    let db = TestDatabase::create_empty().await;
    migrate_to(db.url(), BEFORE_THREAD_ROOT).await;
    let mut conn = AsyncPgConnection::establish(db.url())
        .await
        .expect("connect");
    // Two threads in one room: a root with a chain two deep and a sibling
    // reply, and a root with one reply; the same in a second room, under
    // the same ids (ids are unique per room), where they are its own.
    let mut rooms = String::new();
    for room in [ROOM, "00000000-0000-7000-8000-00000000b002"] {
        rooms.push_str(&format!(
            "INSERT INTO rooms (id, kind, name, created_by, last_seq) VALUES ('{room}', 'group', 'r', '{ASKER}', 6);
             INSERT INTO messages (id, room_id, seq, sender_id, text, reply_to) VALUES
                 ('{QUESTION}', '{room}', 1, '{ASKER}', 'a', NULL),
                 ('{SECOND}', '{room}', 2, '{ASKER}', 'b', NULL),
                 ('{REPLY}', '{room}', 3, '{ASKER}', 'a.1', '{QUESTION}'),
                 ('00000000-0000-7000-8000-00000000c004', '{room}', 4, '{ASKER}', 'b.1', '{SECOND}'),
                 ('00000000-0000-7000-8000-00000000c005', '{room}', 5, '{ASKER}', 'a.1.1', '{REPLY}'),
                 ('00000000-0000-7000-8000-00000000c006', '{room}', 6, '{ASKER}', 'a.2', '{QUESTION}');",
        ));
    }
    conn.batch_execute(&format!(
        "INSERT INTO identities (id, number, kind, display_name) VALUES ('{ASKER}', '100000002', 'person', 'asker');
         {rooms}"
    ))
    .await
    .expect("the old schema's rows");

    run_migrations(db.url()).await.expect("the upgrade");

    let roots: Vec<ThreadRoot> = diesel::sql_query(
        "SELECT m.text, r.text AS root FROM messages m
         JOIN messages r ON r.room_id = m.room_id AND r.id = m.thread_root
         ORDER BY m.room_id, m.seq",
    )
    .load(&mut conn)
    .await
    .expect("roots");
    let expected: Vec<ThreadRoot> = [
        ("a", "a"),
        ("b", "b"),
        ("a.1", "a"),
        ("b.1", "b"),
        ("a.1.1", "a"),
        ("a.2", "a"),
    ]
    .repeat(2)
    .into_iter()
    .map(|(text, root)| ThreadRoot {
        text: text.to_owned(),
        root: root.to_owned(),
    })
    .collect();
    assert_eq!(roots, expected);
}
