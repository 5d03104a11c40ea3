//! The contact list is paged in one statement a page: the direct rooms'
//! order from `after`, both sides of every pair, only the rooms a
//! restricted token may see.

use std::collections::HashSet;

use relayger_core::wire::IdentityKind;
use relayger_store::Caller;
use relayger_testdb::TestDatabase;
use uuid::Uuid;

use crate::support::{befriend, register};

const CONTACTS: usize = 30;
const PAGE: u32 = 7;

#[tokio::test(flavor = "multi_thread")]
async fn contacts_come_in_pages_of_one_statement_each() {
    let db = TestDatabase::create().await;
    let store = db.store().await;
    let me = register(&store, "me", IdentityKind::Person).await;
    // Both sides of the pair: half ask me, I ask the other half.
    let mut rooms = Vec::with_capacity(CONTACTS);
    for n in 0..CONTACTS {
        let other = register(&store, &format!("contact {n}"), IdentityKind::Person).await;
        let room = if n % 2 == 0 {
            befriend(&store, &other, &me).await
        } else {
            befriend(&store, &me, &other).await
        };
        rooms.push((room, other.id()));
    }
    rooms.sort();

    let mut seen: Vec<(Uuid, Uuid)> = Vec::new();
    let mut after = None;
    let mut pages = 0;
    loop {
        let before = store.statement_counts().statements;
        let (page, next) = store
            .list_contacts(&me.caller(), after, PAGE)
            .await
            .expect("a page");
        assert_eq!(
            store.statement_counts().statements - before,
            1,
            "one statement for a page of {} contacts",
            page.len()
        );
        pages += 1;
        assert!(page.len() <= PAGE as usize);
        seen.extend(page.iter().map(|c| (c.room_id, c.id)));
        match next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    assert_eq!(seen, rooms, "every contact once, in direct-room order");
    assert_eq!(pages, CONTACTS.div_ceil(PAGE as usize));

    // A token restricted to three of the rooms lists those three only.
    let allowed: Vec<Uuid> = rooms.iter().step_by(10).map(|(room, _)| *room).collect();
    let restricted = Caller {
        rooms: Some(allowed.clone()),
        ..me.caller()
    };
    let (page, next) = store
        .list_contacts(&restricted, None, PAGE)
        .await
        .expect("a page");
    assert_eq!(
        page.iter().map(|c| c.room_id).collect::<HashSet<_>>(),
        allowed.into_iter().collect::<HashSet<_>>()
    );
    assert_eq!(next, None);
}
