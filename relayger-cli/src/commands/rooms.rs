//! `relayger rooms`: list, show, create, add a member, leave.

use relayger_core::wire::CreateRoomRequest;

use crate::cli::RoomsCommand;
use crate::error::CliError;
use crate::human;
use crate::output::Outcome;
use crate::table::table;

use super::{Context, RoomRef, page_after, parse_number, with_next};

pub(super) async fn rooms(context: &Context, command: RoomsCommand) -> Result<Outcome, CliError> {
    match command {
        RoomsCommand::List(page) => {
            let client = context.client().await?;
            let list = if page.one_page() {
                client.rooms_page(page_after(&page)?, page.limit).await?
            } else {
                client.rooms().await?
            };
            let lines = table(
                &human::ROOM_HEADERS,
                list.rooms.iter().map(human::room_row).collect(),
                "no rooms",
            );
            let lines = with_next(lines, list.next, "rooms list");
            Ok(Outcome::new(&list, lines))
        }
        RoomsCommand::Create { name, members } => {
            let members = members
                .iter()
                .map(|n| parse_number(n, "--member"))
                .collect::<Result<Vec<_>, _>>()?;
            let room = context
                .client()
                .await?
                .create_room(&CreateRoomRequest { name, members })
                .await?;
            let line = format!("created {}", human::room(&room));
            Ok(Outcome::new(&room, line))
        }
        RoomsCommand::Add { room, number } => {
            let room = RoomRef::parse(&room, "ROOM")?;
            let number = parse_number(&number, "NUMBER")?;
            let client = context.client().await?;
            let room = room.resolve(&client).await?;
            let room = client.add_member(room, &number).await?;
            let line = format!("added {number} to {}", human::room(&room));
            Ok(Outcome::new(&room, line))
        }
        RoomsCommand::Leave { room } => {
            let room = RoomRef::parse(&room, "ROOM")?;
            let client = context.client().await?;
            let room = room.resolve(&client).await?;
            let done = client.leave_room(room).await?;
            Ok(Outcome::new(&done, format!("left {room}")))
        }
    }
}
