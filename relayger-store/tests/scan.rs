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
