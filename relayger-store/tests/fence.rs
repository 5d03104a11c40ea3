//! The one lease fence, `relayger_lease_fence`, agrees with relayger-core's
//! `LeaseFence::admits` on every case of the rule.

use diesel::sql_types::{BigInt, Bool, Nullable, Text, Timestamptz, Uuid as SqlUuid};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl, SimpleAsyncConnection};
use relayger_core::job::JobState;
use relayger_core::lease::{HeldLease, LeaseFence, LeaseOwner, LeaseVersion};
use relayger_testdb::TestDatabase;
use time::OffsetDateTime;
use uuid::Uuid;

const OWNER: &str = "0123456789abcdef0123456789abcdef";
const OTHER_OWNER: &str = "fedcba9876543210fedcba9876543210";

#[derive(diesel::QueryableByName)]
struct Judged {
    #[diesel(sql_type = Bool)]
    admitted: bool,
    #[diesel(sql_type = Timestamptz)]
    judged_at: OffsetDateTime,
    #[diesel(sql_type = Text)]
    state: String,
    #[diesel(sql_type = Nullable<Text>)]
    lease_owner: Option<String>,
    #[diesel(sql_type = Nullable<BigInt>)]
    lease_version: Option<i64>,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    lease_expires_at: Option<OffsetDateTime>,
}

/// One agent, its room, a message in it, a runtime and that message's job.
async fn one_job(conn: &mut AsyncPgConnection) -> (Uuid, Uuid) {
    let (agent, room, message, runtime, job) = (
        Uuid::now_v7(),
        Uuid::now_v7(),
        Uuid::now_v7(),
        Uuid::now_v7(),
        Uuid::now_v7(),
    );
    let setup = format!(
        "INSERT INTO identities (id, number, kind, display_name) VALUES ('{agent}', '100000001', 'agent', 'fenced');
         INSERT INTO rooms (id, kind, name, created_by) VALUES ('{room}', 'group', 'fence', '{agent}');
         INSERT INTO room_members (room_id, identity_id) VALUES ('{room}', '{agent}');
         INSERT INTO messages (id, room_id, seq, sender_id, text, ask) VALUES ('{message}', '{room}', 1, '{agent}', 'q', true);
         INSERT INTO runtimes (id, agent_id, name, from_mode, policy, policy_fingerprint)
             VALUES ('{runtime}', '{agent}', 'fence', 'now', '{{}}', repeat('0', 64));
         INSERT INTO jobs (id, runtime_id, room_id, message_id, state)
             VALUES ('{job}', '{runtime}', '{room}', '{message}', 'pending');"
    );
    conn.batch_execute(&setup).await.expect("fixture");
    (job, runtime)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_sql_fence_and_the_core_rule_agree() {
    let db = TestDatabase::create().await;
    let mut conn = AsyncPgConnection::establish(db.url())
        .await
        .expect("connect");
    let (job, runtime) = one_job(&mut conn).await;

    // (case, state, held owner, held version, expiry from now, presented
    // owner, presented version, presented runtime is the job's)
    let hour = "1 hour";
    type Case<'a> = (
        &'a str,
        &'a str,
        Option<&'a str>,
        Option<i64>,
        Option<&'a str>,
        &'a str,
        i64,
        bool,
    );
    let table: [Case; 9] = [
        (
            "held, unexpired",
            "claimed",
            Some(OWNER),
            Some(7),
            Some(hour),
            OWNER,
            7,
            true,
        ),
        (
            "held, expired",
            "claimed",
            Some(OWNER),
            Some(7),
            Some("-1 hour"),
            OWNER,
            7,
            true,
        ),
        (
            "another owner",
            "claimed",
            Some(OTHER_OWNER),
            Some(7),
            Some(hour),
            OWNER,
            7,
            true,
        ),
        (
            "a newer version",
            "claimed",
            Some(OWNER),
            Some(8),
            Some(hour),
            OWNER,
            7,
            true,
        ),
        (
            "an older version",
            "claimed",
            Some(OWNER),
            Some(6),
            Some(hour),
            OWNER,
            7,
            true,
        ),
        ("pending", "pending", None, None, None, OWNER, 7, true),
        ("handled", "handled", None, None, None, OWNER, 7, true),
        ("dead", "dead", None, None, None, OWNER, 7, true),
        (
            "another runtime",
            "claimed",
            Some(OWNER),
            Some(7),
            Some(hour),
            OWNER,
            7,
            false,
        ),
    ];
    for (
        case,
        state,
        owner,
        version,
        expires_in,
        presented_owner,
        presented_version,
        same_runtime,
    ) in table
    {
        let reason = if matches!(state, "dead") {
            "'gave up'"
        } else {
            "NULL"
        };
        let set = format!(
            "UPDATE jobs SET state = '{state}', reason = {reason}, lease_owner = {}, lease_version = {}, \
             lease_expires_at = {} WHERE id = '{job}'",
            owner.map_or("NULL".to_owned(), |o| format!("'{o}'")),
            version.map_or("NULL".to_owned(), |v| v.to_string()),
            expires_in.map_or("NULL".to_owned(), |d| format!(
                "clock_timestamp() + interval '{d}'"
            )),
        );
        conn.batch_execute(&set).await.expect(case);
        let presented_runtime = if same_runtime {
            runtime
        } else {
            Uuid::now_v7()
        };
        let judged: Judged = diesel::sql_query(
            "SELECT relayger_lease_fence($1, $2, $3, $4) IS NOT NULL AS admitted,
                    clock_timestamp() AS judged_at, state, lease_owner, lease_version, lease_expires_at
             FROM jobs WHERE id = $1",
        )
        .bind::<SqlUuid, _>(job)
        .bind::<SqlUuid, _>(presented_runtime)
        .bind::<Text, _>(presented_owner)
        .bind::<BigInt, _>(presented_version)
        .get_result(&mut conn)
        .await
        .expect(case);
        let fence = LeaseFence {
            owner: LeaseOwner::parse(presented_owner).expect("owner"),
            version: LeaseVersion(u64::try_from(presented_version).expect("version")),
        };
        let held = HeldLease {
            state: JobState::parse(&judged.state).expect("state"),
            owner: judged.lease_owner.as_deref(),
            version: judged
                .lease_version
                .map(|v| u64::try_from(v).expect("version")),
            expires_at: judged.lease_expires_at,
        };
        let core = same_runtime && fence.admits(&held, judged.judged_at);
        assert_eq!(judged.admitted, core, "{case}: SQL and core disagree");
        assert_eq!(judged.admitted, case == "held, unexpired", "{case}");
    }
}

/// The fence finds its job by primary key, whatever plan the session has
/// cached for it: with 64 other claimed jobs of the runtime (and 5,000
/// other jobs, for the planner's statistics only, their foreign keys not
/// checked) and generic plans forced, a fence reads no entry of the
/// claimed jobs' index (it walked them all to find its one) and scans no
/// table.
#[tokio::test(flavor = "multi_thread")]
async fn the_fence_finds_its_job_by_primary_key_among_many_claimed() {
    let db = TestDatabase::create().await;
    let mut conn = AsyncPgConnection::establish(db.url())
        .await
        .expect("connect");
    let (job, runtime) = one_job(&mut conn).await;
    conn.batch_execute(&format!(
        "WITH m AS (
             INSERT INTO messages (id, room_id, seq, sender_id, text, ask)
             SELECT gen_random_uuid(), j.room_id, 1 + n, (SELECT created_by FROM rooms WHERE id = j.room_id), 'q', true
             FROM jobs j, generate_series(1, 64) AS n WHERE j.id = '{job}'
             RETURNING id, room_id)
         INSERT INTO jobs (id, runtime_id, room_id, message_id, state, lease_owner, lease_version, lease_expires_at)
         SELECT gen_random_uuid(), '{runtime}', m.room_id, m.id, 'claimed', '{OTHER_OWNER}',
                1000 + row_number() OVER (), now() + interval '1 hour'
         FROM m;
         UPDATE jobs SET state = 'claimed', lease_owner = '{OWNER}', lease_version = 7,
                lease_expires_at = now() + interval '1 hour' WHERE id = '{job}';
         SET session_replication_role = replica;
         INSERT INTO jobs (id, runtime_id, room_id, message_id, state)
         SELECT gen_random_uuid(), gen_random_uuid(), gen_random_uuid(), gen_random_uuid(), 'handled'
         FROM generate_series(1, 5000);
         SET session_replication_role = DEFAULT;
         ANALYZE jobs;"
    ))
    .await
    .expect("claimed jobs");
    #[derive(diesel::QueryableByName)]
    struct Read {
        #[diesel(sql_type = BigInt)]
        claimed_index: i64,
        #[diesel(sql_type = BigInt)]
        primary_key: i64,
        #[diesel(sql_type = BigInt)]
        table_scans: i64,
    }
    let read: Read = conn
        .transaction(async |conn| {
            conn.batch_execute("SET LOCAL plan_cache_mode = force_generic_plan")
                .await?;
            for _ in 0..6 {
                let fenced: Option<Uuid> = diesel::select(diesel::dsl::sql::<Nullable<SqlUuid>>(
                    &format!("relayger_lease_fence('{job}', '{runtime}', '{OWNER}', 7)"),
                ))
                .get_result(conn)
                .await?;
                assert_eq!(fenced, Some(job));
            }
            diesel::sql_query(
                "SELECT pg_stat_get_xact_tuples_returned('jobs_claimed_idx'::regclass)
                          AS claimed_index,
                        pg_stat_get_xact_numscans('jobs_pkey'::regclass) AS primary_key,
                        pg_stat_get_xact_numscans('jobs'::regclass) AS table_scans",
            )
            .get_result(conn)
            .await
        })
        .await
        .expect("fences");
    assert_eq!(
        read.claimed_index, 0,
        "the fence read the claimed jobs' index"
    );
    assert_eq!(read.table_scans, 0, "the fence scanned the jobs table");
    assert!(
        read.primary_key >= 6,
        "the fence did not use the primary key: {} scans",
        read.primary_key
    );
}
