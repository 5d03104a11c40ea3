//! The questions one identity asked in a room, newest first and paged (an
//! A2A client's task list), and the direct room of two contacts found by
//! number for the token's caller.

use relayger_core::ErrorCode;
use relayger_core::wire::IdentityKind;
use uuid::Uuid;

use crate::support::{Agent, refusal, register, send};

#[tokio::test(flavor = "multi_thread")]
async fn only_the_callers_questions_newest_first_in_pages() {
    let agent = Agent::start().await;
    let store = &agent.store;
    let (asker, room) = agent.contact("asker").await;
    let first = send(store, &asker, room, "one?", true).await;
    send(store, &asker, room, "just saying", false).await;
    let second = send(store, &asker, room, "two?", true).await;
    // The agent's own question in the same room is not the asker's.
    send(store, &agent.agent, room, "and you?", true).await;
    let third = send(store, &asker, room, "three?", true).await;

    let page = store
        .questions(&asker.caller(), room, None, 2)
        .await
        .expect("a page");
    let ids: Vec<Uuid> = page.questions.iter().map(|q| q.message_id).collect();
    assert_eq!(ids, [third.message_id, second.message_id]);
    assert_eq!(page.total, 3);
    assert_eq!(page.next_before, Some(second.seq));
    let rest = store
        .questions(&asker.caller(), room, page.next_before, 2)
        .await
        .expect("the rest");
    let ids: Vec<Uuid> = rest.questions.iter().map(|q| q.message_id).collect();
    assert_eq!(ids, [first.message_id]);
    assert_eq!(rest.next_before, None, "the last page");

    // A stranger to the room reads nothing of it.
    let stranger = register(store, "stranger", IdentityKind::Person).await;
    let refused = store.questions(&stranger.caller(), room, None, 10).await;
    assert_eq!(refusal(&refused).map(|r| r.1), Some(ErrorCode::NotFound));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_direct_room_of_a_contact_and_nobody_else() {
    let agent = Agent::start().await;
    let store = &agent.store;
    let (asker, room) = agent.contact("asker").await;
    let found = store
        .direct_room_with(&asker.caller(), &agent.agent.number())
        .await
        .expect("the direct room");
    assert_eq!(found, room);
    let stranger = register(store, "stranger", IdentityKind::Person).await;
    let refused = store
        .direct_room_with(&stranger.caller(), &agent.agent.number())
        .await;
    assert_eq!(refusal(&refused).map(|r| r.1), Some(ErrorCode::NotFound));
    // A token restricted to other rooms does not reach it either.
    let mut restricted = asker.caller();
    restricted.rooms = Some(vec![Uuid::now_v7()]);
    let refused = store
        .direct_room_with(&restricted, &agent.agent.number())
        .await;
    assert_eq!(refusal(&refused).map(|r| r.1), Some(ErrorCode::NotFound));
}
