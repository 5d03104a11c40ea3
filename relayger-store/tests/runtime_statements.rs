//! The runtime's statements against the migrated schema: each one prepares,
//! names its parameters in its header and its job states as the core names
//! them, and is a `.sql` file listed under its own path; where a statement
//! applies a rule of the core itself (the scan's triggers, the first
//! candidate round's share of the free lease slots), it answers what the
//! core says for every case.

use std::collections::{BTreeSet, HashSet};
use std::path::Path;

use diesel::sql_types::{Array, BigInt, Nullable, Timestamptz};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl, SimpleAsyncConnection};
use relayger_core::claim_plan::{ROUND_MARGIN, first_round_limit, first_round_size};
use relayger_core::job::JobState;
use relayger_core::policy::{MessageFacts, Policy};
use relayger_store::{Caller, runtime_statements};
use relayger_testdb::TestDatabase;
use time::OffsetDateTime;
use uuid::Uuid;

/// The statement called `name` in the list.
fn statement(name: &str) -> &'static str {
    runtime_statements()
        .iter()
        .find(|(listed, _)| *listed == name)
        .map(|(_, text)| *text)
        .unwrap_or_else(|| panic!("{name} is not listed"))
}

/// The statement's header (its leading comment lines) and its body.
fn header_and_body(text: &str) -> (Vec<&str>, Vec<&str>) {
    let lines: Vec<&str> = text.lines().collect();
    let split = lines
        .iter()
        .position(|line| !line.starts_with("--"))
        .unwrap_or(lines.len());
    (lines[..split].to_vec(), lines[split..].to_vec())
}

/// The parameter numbers in `text` (`$1`, `$12`, …).
fn parameters(text: &str) -> BTreeSet<u32> {
    let mut found = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        rest = &rest[at + 1..];
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        if let Ok(n) = digits.parse() {
            found.insert(n);
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread")]
async fn every_runtime_statement_prepares_against_the_migrated_schema() {
    let db = TestDatabase::create().await;
    let mut conn = connect(&db).await;
    assert!(!runtime_statements().is_empty());
    for (n, (name, text)) in runtime_statements().iter().enumerate() {
        // Without parameter types: each statement says its own.
        conn.batch_execute(&format!("PREPARE listed_{n} AS {text}"))
            .await
            .unwrap_or_else(|err| panic!("{name} does not prepare: {err}"));
    }
}

#[test]
fn every_statement_names_its_parameters_and_states_in_its_header_and_body() {
    for (name, text) in runtime_statements() {
        let (header, body) = header_and_body(text);
        assert!(
            header.len() >= 2,
            "{name} opens with a comment that says what it does"
        );
        let named: BTreeSet<u32> = header
            .iter()
            .filter_map(|line| line.strip_prefix("-- $"))
            .map(|line| {
                let number: String = line.chars().take_while(char::is_ascii_digit).collect();
                assert!(
                    line[number.len()..].starts_with(' '),
                    "{name}: `-- ${line}` names no parameter"
                );
                number.parse().expect("a parameter number")
            })
            .collect();
        let body = body.join("\n");
        assert!(
            !body.contains("--"),
            "{name}: comments belong in the header"
        );
        let used = parameters(&body);
        assert_eq!(named, used, "{name}: the header names the parameters used");
        assert_eq!(
            used,
            (1..=u32::try_from(used.len()).expect("few")).collect(),
            "{name}: parameters are numbered from $1 without gaps"
        );
        // Job states are written as literals (a partial index on a state is
        // only chosen for a literal); each is one the core knows.
        for (at, _) in body.match_indices("state = '") {
            let state: String = body[at + "state = '".len()..]
                .chars()
                .take_while(|c| *c != '\'')
                .collect();
            assert!(
                JobState::parse(&state).is_some(),
                "{name}: `{state}` is not a job state"
            );
        }
    }
}

/// Every `.sql` file below `dir`, as `/`-separated paths relative to `root`.
fn sql_files(root: &Path, dir: &Path, out: &mut BTreeSet<String>) {
    for entry in std::fs::read_dir(dir).expect("read a folder") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            sql_files(root, &path, out);
        } else if path.extension().is_some_and(|ext| ext == "sql") {
            let relative = path.strip_prefix(root).expect("below the root");
            let parts: Vec<_> = relative
                .components()
                .map(|part| part.as_os_str().to_string_lossy().into_owned())
                .collect();
            out.insert(parts.join("/"));
        }
    }
}

#[test]
fn every_sql_file_of_the_runtime_is_listed_under_its_own_path() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/runtime");
    let mut files = BTreeSet::new();
    sql_files(&root, &root, &mut files);
    let listed: BTreeSet<String> = runtime_statements()
        .iter()
        .map(|(name, _)| (*name).to_owned())
        .collect();
    assert_eq!(
        files, listed,
        "runtime::statements lists every .sql file, once"
    );
    for (name, text) in runtime_statements() {
        let file = std::fs::read_to_string(root.join(name)).expect("read");
        assert_eq!(&file, text, "{name} is listed with another file's text");
    }
}

/// A connection of its own to `db`.
async fn connect(db: &TestDatabase) -> AsyncPgConnection {
    AsyncPgConnection::establish(db.url())
        .await
        .expect("connect")
}

/// A question from someone else.
const QUESTION: MessageFacts = MessageFacts {
    from_self: false,
    ask: true,
    by_runtime: false,
};

/// An agent, a person, and a group room of the two holding `messages`
/// (each: sent by the agent itself, a question, written by a runtime), by
/// SQL, so a statement's inputs are exactly what a case needs.
struct World {
    agent: Uuid,
    room: Uuid,
    /// The messages' ids, in seq order.
    messages: Vec<Uuid>,
}

impl World {
    async fn new(conn: &mut AsyncPgConnection, messages: &[MessageFacts]) -> World {
        let (agent, person, room) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
        let ids: Vec<Uuid> = messages.iter().map(|_| Uuid::now_v7()).collect();
        let mut sql = format!(
            "INSERT INTO identities (id, number, kind, display_name) VALUES
                 ('{agent}', '100000001', 'agent', 'agent'),
                 ('{person}', '100000002', 'person', 'person');
             INSERT INTO rooms (id, kind, name, created_by, last_seq)
                 VALUES ('{room}', 'group', 'room', '{person}', {});
             INSERT INTO room_members (room_id, identity_id)
                 VALUES ('{room}', '{agent}'), ('{room}', '{person}');",
            messages.len()
        );
        for (seq, (facts, id)) in messages.iter().zip(&ids).enumerate() {
            let sender = if facts.from_self { agent } else { person };
            let runtime = match facts.by_runtime {
                true => format!("'{}'", Uuid::now_v7()),
                false => "NULL".to_owned(),
            };
            sql.push_str(&format!(
                "INSERT INTO messages (id, room_id, seq, sender_id, text, ask, by_runtime, runtime_id)
                 VALUES ('{id}', '{room}', {}, '{sender}', 'message', {}, {}, {runtime});",
                seq + 1,
                facts.ask,
                facts.by_runtime,
            ));
        }
        conn.batch_execute(&sql).await.expect("the world");
        World {
            agent,
            room,
            messages: ids,
        }
    }

    /// A runtime of the agent under `policy`, the room marked changed for
    /// it (a scan reads it from its first message).
    async fn runtime(&self, conn: &mut AsyncPgConnection, name: &str, policy: &Policy) -> Uuid {
        let id = Uuid::now_v7();
        conn.batch_execute(&format!(
            "INSERT INTO runtimes (id, agent_id, name, from_mode, policy, policy_fingerprint)
                 VALUES ('{id}', '{}', '{name}', 'beginning', '{}', '{}');
             INSERT INTO runtime_dirty_rooms (runtime_id, room_id) VALUES ('{id}', '{}');",
            self.agent,
            policy.normalized(),
            policy.fingerprint(),
            self.room,
        ))
        .await
        .expect("a runtime");
        id
    }

    fn caller(&self) -> Caller {
        Caller {
            identity_id: self.agent,
            token_id: Uuid::now_v7(),
            rooms: None,
        }
    }
}

#[derive(diesel::QueryableByName)]
struct JobMessage {
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    message_id: Uuid,
}

/// The scan's trigger rule is `Policy::triggers_on`, evaluated in SQL on
/// the stored policy: for every trigger set and every kind of message, a
/// claim's scan makes a job of exactly the messages the core triggers on.
#[tokio::test(flavor = "multi_thread")]
async fn the_scan_triggers_on_what_policy_triggers_on_says() {
    let db = TestDatabase::create().await;
    let store = db.store().await;
    let mut conn = connect(&db).await;
    let kinds: Vec<MessageFacts> = (0..8)
        .map(|bits| MessageFacts {
            from_self: bits & 1 != 0,
            ask: bits & 2 != 0,
            by_runtime: bits & 4 != 0,
        })
        .collect();
    let world = World::new(&mut conn, &kinds).await;
    let trigger_sets = [
        r#"["questions"]"#,
        r#"["messages"]"#,
        r#"["questions", "messages"]"#,
    ];
    for (n, triggers) in trigger_sets.iter().enumerate() {
        let policy = Policy::parse(&format!(
            r#"{{"triggers": {triggers}, "concurrency": 64, "maxCallsPerHour": 1000}}"#
        ))
        .expect("policy");
        let runtime = world
            .runtime(&mut conn, &format!("triggers{n}"), &policy)
            .await;
        store
            .claim(&world.caller(), runtime, 64, None, 30_000, false)
            .await
            .expect("claim");
        let jobs: Vec<JobMessage> =
            diesel::sql_query("SELECT message_id FROM jobs WHERE runtime_id = $1")
                .bind::<diesel::sql_types::Uuid, _>(runtime)
                .load(&mut conn)
                .await
                .expect("jobs");
        let jobs: HashSet<Uuid> = jobs.into_iter().map(|job| job.message_id).collect();
        for (facts, id) in kinds.iter().zip(&world.messages) {
            assert_eq!(
                jobs.contains(id),
                policy.triggers_on(facts),
                "triggers {triggers}, {facts:?}"
            );
        }
    }
}

/// The first candidate round, sent before the claim has read the policy,
/// applies `claim_plan::first_round_limit` to the stored concurrency and
/// the claimed jobs itself: for every case it locks exactly as many
/// pending jobs as the core's rule says; a later round takes its size.
#[tokio::test(flavor = "multi_thread")]
async fn the_first_candidate_round_takes_what_claim_plan_says() {
    const PENDING: usize = 80;
    const MOST_ACTIVE: usize = 6;
    let db = TestDatabase::create().await;
    let mut conn = connect(&db).await;
    let world = World::new(&mut conn, &[QUESTION; PENDING + MOST_ACTIVE]).await;
    // (concurrency, active leases, maxJobs): a first round of
    // `first_round_size(maxJobs)`.
    let cases: [(u32, usize, u32); 10] = [
        (4, 0, 1),
        (4, 0, 4),
        (1, 0, 64),
        (10, 3, 64),
        (64, 0, 64),
        (64, 6, 64),
        (20, 0, 1000),
        // At the cap, and past it (a lowered concurrency).
        (4, 4, 64),
        (2, 5, 1),
        (1, 1, 1),
    ];
    let candidates = statement("claim/candidates.sql");
    for (n, (concurrency, active, max_jobs)) in cases.into_iter().enumerate() {
        let policy = Policy::parse(&format!(
            r#"{{"concurrency": {concurrency}, "maxCallsPerHour": 1000}}"#
        ))
        .expect("policy");
        let runtime = world
            .runtime(&mut conn, &format!("first{n}"), &policy)
            .await;
        // `active` claimed jobs, and at least `PENDING` pending ones.
        let mut jobs = String::new();
        for (i, message) in world.messages.iter().enumerate() {
            let claimed = i < active;
            let (state, owner, version, expires) = match claimed {
                true => (
                    "claimed",
                    format!("'{}'", "a".repeat(32)),
                    "nextval('lease_version_seq')",
                    "now() + interval '1 minute'",
                ),
                false => ("pending", "NULL".to_owned(), "NULL", "NULL"),
            };
            jobs.push_str(&format!(
                "INSERT INTO jobs (id, runtime_id, room_id, message_id, state,
                                   lease_owner, lease_version, lease_expires_at)
                 VALUES ('{}', '{runtime}', '{}', '{message}', '{state}',
                         {owner}, {version}, {expires});",
                Uuid::now_v7(),
                world.room,
            ));
        }
        conn.batch_execute(&jobs).await.expect("jobs");
        let free = i64::from(concurrency) - i64::try_from(active).expect("few");
        let size = first_round_size(max_jobs);
        for (first, expected) in [(true, first_round_limit(size, free)), (false, size)] {
            let margin = first.then_some(i64::from(ROUND_MARGIN));
            let taken = conn
                .transaction(async |conn| {
                    diesel::sql_query(candidates)
                        .bind::<diesel::sql_types::Uuid, _>(runtime)
                        .bind::<diesel::sql_types::Uuid, _>(world.agent)
                        .bind::<Nullable<Array<diesel::sql_types::Uuid>>, _>(None::<Vec<Uuid>>)
                        .bind::<Nullable<Timestamptz>, _>(None::<OffsetDateTime>)
                        .bind::<Nullable<diesel::sql_types::Uuid>, _>(None::<Uuid>)
                        .bind::<BigInt, _>(i64::from(size))
                        .bind::<Nullable<BigInt>, _>(margin)
                        .execute(conn)
                        .await
                })
                .await
                .expect("a round");
            assert_eq!(
                taken,
                usize::try_from(expected).expect("few"),
                "concurrency {concurrency}, {active} active, maxJobs {max_jobs}, first {first}"
            );
        }
    }
}

#[derive(diesel::QueryableByName)]
struct Scanned {
    #[diesel(sql_type = diesel::sql_types::Bool)]
    more_to_scan: bool,
}

#[derive(diesel::QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

/// The scan's second statement takes the oldest marks again; a room among
/// them that the first statement did not lock (its mark came in between)
/// and that a sender holds is passed over, never read from a snapshot
/// older than the sender's commit: no job, no checkpoint, the mark kept and
/// more to scan. Once the sender is done, the next scan takes it.
#[tokio::test(flavor = "multi_thread")]
async fn a_room_a_sender_holds_is_left_marked_by_a_scan_that_did_not_lock_it_first() {
    let db = TestDatabase::create().await;
    let mut conn = connect(&db).await;
    let mut sender = connect(&db).await;
    let world = World::new(&mut conn, &[QUESTION]).await;
    let policy = Policy::parse(r#"{"concurrency": 4}"#).expect("policy");
    let runtime = world.runtime(&mut conn, "passed_over", &policy).await;
    // A scan that waits on the sender would fail here instead of hanging.
    conn.batch_execute("SET lock_timeout = '10s'")
        .await
        .expect("lock timeout");
    let write_scan = statement("scan/write_scan.sql");
    let scan = async |conn: &mut AsyncPgConnection| {
        let scanned: Scanned = diesel::sql_query(write_scan)
            .bind::<diesel::sql_types::Uuid, _>(runtime)
            .bind::<diesel::sql_types::Uuid, _>(world.agent)
            .bind::<BigInt, _>(200_i64)
            .bind::<BigInt, _>(128_i64)
            .get_result(conn)
            .await
            .expect("the scan");
        let count = async |conn: &mut AsyncPgConnection, table: &str| {
            diesel::sql_query(format!(
                "SELECT count(*) AS n FROM {table} WHERE runtime_id = $1"
            ))
            .bind::<diesel::sql_types::Uuid, _>(runtime)
            .get_result::<Count>(conn)
            .await
            .expect("count")
            .n
        };
        (
            scanned.more_to_scan,
            count(conn, "jobs").await,
            count(conn, "runtime_checkpoints").await,
            count(conn, "runtime_dirty_rooms").await,
        )
    };

    // A sender holds the room's lock, as it does from its insert to its
    // commit.
    sender
        .batch_execute(&format!(
            "BEGIN; SELECT 1 FROM rooms WHERE id = '{}' FOR NO KEY UPDATE;",
            world.room
        ))
        .await
        .expect("the sender's lock");
    assert_eq!(scan(&mut conn).await, (true, 0, 0, 1), "passed over");

    sender.batch_execute("COMMIT").await.expect("commit");
    assert_eq!(scan(&mut conn).await, (false, 1, 1, 0), "scanned");
}
