//! The scan costs in proportion to the rooms that changed, not to all the
//! rooms an agent is in.

use diesel_async::RunQueryDsl;
use relayger_core::wire::StartFrom;
use serde_json::json;

use crate::support::{Agent, execute, query_n};

#[tokio::test(flavor = "multi_thread")]
async fn the_scan_touches_only_changed_rooms_among_ten_thousand() {
    let s = Agent::start().await;
    let (asker, room) = s.contact("asker").await;
    // 10,000 more rooms the agent is in, made directly in the database.
    let mut conn = s.connection().await;
    execute(
        &mut conn,
        &format!(
            "WITH r AS (
                 INSERT INTO rooms (id, kind, name, created_by, last_seq)
                 SELECT gen_random_uuid(), 'group', 'room ' || g, '{agent}', 0 FROM generate_series(1, 10000) g
                 RETURNING id)
             INSERT INTO room_members (room_id, identity_id) SELECT id, '{agent}' FROM r",
            agent = s.agent.id()
        ),
    )
    .await;
    let runtime = s.runtime("wide", StartFrom::Now, json!({})).await;
    let question = s.ask(&asker, room, "needle").await;

    let dirty =
        format!("SELECT count(*) AS n FROM runtime_dirty_rooms WHERE runtime_id = '{runtime}'");
    assert_eq!(
        query_n(&mut conn, &dirty).await,
        1,
        "only the room that changed is marked for the scan"
    );
    let job = s.claim_one(runtime).await;
    assert_eq!(job.message.message_id, question.message_id);
    assert_eq!(query_n(&mut conn, &dirty).await, 0);
    // The scan's plan reads the runtime's marks by index, not every checkpoint.
    #[derive(diesel::QueryableByName)]
    struct Plan {
        #[diesel(sql_type = diesel::sql_types::Text, column_name = "QUERY PLAN")]
        line: String,
    }
    let plan: Vec<Plan> = diesel::sql_query(format!(
        "EXPLAIN SELECT room_id FROM runtime_dirty_rooms WHERE runtime_id = '{runtime}' ORDER BY marked_at LIMIT 33"
    ))
    .load(&mut conn)
    .await
    .expect("explain");
    let plan: String = plan
        .into_iter()
        .map(|p| p.line)
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        !plan.contains("runtime_checkpoints") && !plan.contains("room_members"),
        "{plan}"
    );
}

/// A room's jobs are written by the statement that moves its checkpoint
/// past them, so a scan never meets a message that already has the
/// runtime's job; when it does all the same (a checkpoint moved back by
/// hand), the message gets no second job and the claim goes on to the
/// messages after it.
#[tokio::test(flavor = "multi_thread")]
async fn a_checkpoint_moved_back_makes_no_second_job_and_the_claim_goes_on() {
    let s = Agent::start().await;
    let (asker, room) = s.contact("asker").await;
    let runtime = s.runtime("rewound", StartFrom::Now, json!({})).await;
    let first = s.ask(&asker, room, "answered once").await;
    let job = s.claim_one(runtime).await;
    assert_eq!(job.message.message_id, first.message_id);
    s.reply(runtime, &job).await;
    // The checkpoint back to the start, the room marked for the next scan.
    let mut conn = s.connection().await;
    execute(
        &mut conn,
        &format!(
        "UPDATE runtime_checkpoints SET seq = 0 WHERE runtime_id = '{runtime}' AND room_id = '{room}';
         INSERT INTO runtime_dirty_rooms (runtime_id, room_id) VALUES ('{runtime}', '{room}')
         ON CONFLICT DO NOTHING"
        ),
    )
    .await;
    let second = s.ask(&asker, room, "asked after the rewind").await;
    let next = s.claim_one(runtime).await;
    assert_eq!(next.message.message_id, second.message_id);
    assert_eq!(
        query_n(
            &mut conn,
            &format!(
                "SELECT count(*) AS n FROM jobs WHERE runtime_id = '{runtime}' AND message_id = '{}'",
                first.message_id
            )
        )
        .await,
        1
    );
}
