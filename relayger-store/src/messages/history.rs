//! A room's history, one bounded page at a time in either direction
//! (`relayger_core::history` decides the window and the cursors).

use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use relayger_core::history::{HistoryEnd, HistoryWindow, history_cursors};
use relayger_core::wire::HistoryPage;
use uuid::Uuid;

use super::{MessageRow, MessageWithSender};
use crate::rooms::require_member;
use crate::schema::{identities, messages};
use crate::{Caller, Store, StoreError};

impl Store {
    /// One page of a room the caller is in (and its token may see), oldest
    /// first, with the cursors to the older and newer pages.
    pub async fn history(
        &self,
        caller: &Caller,
        room_id: Uuid,
        window: HistoryWindow,
    ) -> Result<HistoryPage, StoreError> {
        let mut conn = self.conn().await?;
        let room = require_member(&mut conn, caller, room_id).await?;
        let mut query = messages::table
            .inner_join(identities::table)
            .filter(messages::room_id.eq(room_id))
            .select((
                MessageRow::as_select(),
                identities::number,
                identities::kind,
            ))
            .limit(i64::from(window.limit))
            .into_boxed();
        if let Some(after) = window.after {
            query = query.filter(messages::seq.gt(after));
        }
        if let Some(before) = window.before {
            query = query.filter(messages::seq.lt(before));
        }
        query = match window.end() {
            HistoryEnd::Oldest => query.order(messages::seq.asc()),
            HistoryEnd::Newest => query.order(messages::seq.desc()),
        };
        let mut rows: Vec<MessageWithSender> = query.load(&mut conn).await?;
        if window.end() == HistoryEnd::Newest {
            rows.reverse();
        }
        let messages: Vec<_> = rows.into_iter().map(MessageWithSender::envelope).collect();
        let seqs = <[_]>::first(&messages)
            .zip(<[_]>::last(&messages))
            .map(|(first, last)| (first.seq, last.seq));
        let cursors = history_cursors(seqs, room.last_seq);
        Ok(HistoryPage {
            messages,
            next: cursors.next,
            prev: cursors.prev,
        })
    }
}
