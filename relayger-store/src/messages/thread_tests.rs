//! A thread page reads what it returns, however long the thread: the rows
//! its statement reads from `messages` (by `EXPLAIN ANALYZE`, under the
//! custom and the generic plan) are a bound of the page size, for a thread
//! of 20,000 replies and for a thread of two messages in the same room.

use diesel::QueryableByName;
use diesel::sql_types::Text;
use diesel_async::{AsyncPgConnection, RunQueryDsl, SimpleAsyncConnection};
use relayger_core::wire::IdentityKind;
use uuid::Uuid;

use super::sql::THREAD;
use crate::test_support::{self, TestDatabase};

const LONG: i64 = 20_000;
const LIMIT: i64 = 5;

#[derive(QueryableByName)]
struct PlanJson {
    #[diesel(sql_type = Text, column_name = "QUERY PLAN")]
    plan: String,
}

#[derive(QueryableByName)]
struct IdRow {
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    id: Uuid,
}

/// The rows the plan's nodes over `messages` read: returned, and removed by
/// a filter or an index recheck, over all their loops.
fn rows_read_from_messages(node: &serde_json::Value) -> i64 {
    let count = |key: &str| {
        node.get(key)
            .and_then(serde_json::Value::as_i64)
            .unwrap_or(0)
    };
    let own = if node.get("Relation Name").and_then(|v| v.as_str()) == Some("messages") {
        (count("Actual Rows")
            + count("Rows Removed by Filter")
            + count("Rows Removed by Join Filter")
            + count("Rows Removed by Index Recheck"))
            * count("Actual Loops").max(1)
    } else {
        0
    };
    own + node
        .get("Plans")
        .and_then(serde_json::Value::as_array)
        .map_or(0, |plans| plans.iter().map(rows_read_from_messages).sum())
}

/// The rows a `LIMIT`-message page of `message`'s thread reads from
/// `messages`, under the plan `mode` (`plan_cache_mode`).
async fn rows_read(conn: &mut AsyncPgConnection, mode: &str, args: &str) -> i64 {
    conn.batch_execute(&format!(
        "DEALLOCATE ALL; SET plan_cache_mode = {mode};
         PREPARE page(uuid, uuid, bigint, bigint, uuid, bigint) AS {THREAD}"
    ))
    .await
    .expect("prepare");
    let plans: Vec<PlanJson> = diesel::sql_query(format!(
        "EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE page({args})"
    ))
    .load(conn)
    .await
    .expect("explain");
    let plan: serde_json::Value = serde_json::from_str(&plans[0].plan).expect("json");
    rows_read_from_messages(&plan[0]["Plan"])
}

#[tokio::test]
async fn a_thread_page_reads_its_page_whatever_the_size_of_the_thread_or_room() {
    let db = TestDatabase::create().await;
    let store = db.store().await;
    let (reader, token) = test_support::register(&store, "reader", IdentityKind::Person).await;
    let room = store
        .create_room(&token.caller(), "room".to_owned(), vec![])
        .await
        .expect("the room")
        .id;
    let (short, long, other) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
    let mut conn = store.conn().await.expect("connection");
    // seq 1 the short thread's root, 2 the long thread's root, 3 another
    // topic, 4 the short thread's one reply, then LONG replies to the long
    // thread's root, each followed by a reply on the other topic.
    conn.batch_execute(&format!(
        "INSERT INTO messages (id, room_id, seq, sender_id, text) VALUES
             ('{short}', '{room}', 1, '{me}', 'short'),
             ('{long}', '{room}', 2, '{me}', 'long'),
             ('{other}', '{room}', 3, '{me}', 'other');
         INSERT INTO messages (id, room_id, seq, sender_id, text, reply_to)
             VALUES (gen_random_uuid(), '{room}', 4, '{me}', 'short reply', '{short}');
         INSERT INTO messages (id, room_id, seq, sender_id, text, reply_to)
             SELECT gen_random_uuid(), '{room}', 4 + g, '{me}', 'reply ' || g,
                    CASE WHEN g % 2 = 1 THEN '{long}'::uuid ELSE '{other}'::uuid END
             FROM generate_series(1, {total}) g;
         UPDATE rooms SET last_seq = 4 + {total} WHERE id = '{room}';
         ANALYZE messages;",
        me = reader.id,
        total = 2 * LONG,
    ))
    .await
    .expect("the threads");

    // The semantics hold: the long thread's root and its replies only.
    let page = store
        .thread(&token.caller(), room, long, 0, LIMIT as usize, 65_536)
        .await
        .expect("a page");
    let seqs: Vec<i64> = page.iter().map(|m| m.seq).collect();
    assert_eq!(seqs, [2, 5, 7, 9, 11, 13], "the root, then every other seq");
    let page = store
        .thread(&token.caller(), room, short, 0, LIMIT as usize, 65_536)
        .await
        .expect("a page");
    assert_eq!(page.iter().map(|m| m.seq).collect::<Vec<_>>(), [1, 4]);

    let me = reader.id;
    // A page in the middle of the long thread, from one of its replies.
    let middle = 4 + LONG;
    let reply: IdRow = diesel::sql_query(format!(
        "SELECT id FROM messages WHERE room_id = '{room}' AND seq = {}",
        middle + 1
    ))
    .get_result(&mut conn)
    .await
    .expect("a reply");
    let reply = reply.id;
    for mode in ["force_custom_plan", "force_generic_plan"] {
        let of_short = rows_read(
            &mut conn,
            mode,
            &format!("'{room}', '{short}', 0, {}, '{me}', 65536", LIMIT + 1),
        )
        .await;
        let of_long = rows_read(
            &mut conn,
            mode,
            &format!(
                "'{room}', '{reply}', {middle}, {}, '{me}', 65536",
                LIMIT + 1
            ),
        )
        .await;
        // The checks and the root (a row each), then the page (and one
        // more) found, sized and loaded: three reads a row.
        let bound = 2 + 3 * (LIMIT + 1);
        assert!(
            of_short <= bound && of_long <= bound,
            "{mode}: a page of a two-message thread read {of_short} rows of messages, \
             one of a {LONG}-reply thread {of_long} (both beside {} other messages); \
             a page reads at most {bound}",
            2 * LONG
        );
    }
}
