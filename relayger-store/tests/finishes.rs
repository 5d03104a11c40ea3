//! What rolls a finish back where no reader over HTTP can look: the room
//! the reply was for is closed to both sides.

use relayger_core::ErrorCode;
use relayger_core::wire::StartFrom;
use serde_json::json;

use crate::support::{Agent, refusal, reply};

#[tokio::test(flavor = "multi_thread")]
async fn lost_access_rolls_back_a_finish_and_skips_the_rest() {
    let s = Agent::start().await;
    let (asker, room) = s.contact("asker").await;
    let runtime = s
        .runtime("revoked", StartFrom::Now, json!({"concurrency": 2}))
        .await;
    s.ask(&asker, room, "first").await;
    s.ask(&asker, room, "second").await;
    let job = s.claim_one(runtime).await;
    // The contact ends while the handler runs.
    s.store
        .remove_contact(asker.id(), s.agent.number())
        .await
        .expect("remove the contact");
    let finished = s.finish(runtime, &job, reply("too late")).await;
    assert_eq!(
        refusal(&finished),
        Some((403, ErrorCode::Forbidden)),
        "{finished:?}"
    );
    let messages = s.query_n("SELECT count(*) AS n FROM messages").await;
    assert_eq!(messages, 2, "no reply was written");
    // The other pending job is skipped for lost access, never replayed.
    assert_eq!(s.inspect(runtime).await.jobs.claimed, 1);
    let idle = s.claim(runtime, 1).await;
    assert!(idle.jobs.is_empty(), "{idle:?}");
    assert_eq!(s.inspect(runtime).await.jobs.skipped, 1);
}
