//! The messaging commands: `send` (also `--ask --wait`), `thread`, `inbox`.

use relayger_core::history::HistoryWindow;
use relayger_core::ids::IdentityNumber;
use relayger_core::policy::SkipReason;
use relayger_core::sealed::SealedContent;
use relayger_core::wire::{InboxResponse, SendRequest, Timestamp};
use relayger_worker::{HistoryQuery, OpenedMessage, ThreadQuery};
use serde::Serialize;
use uuid::Uuid;

use super::{Context, RoomRef, parse_number, parse_uuid, wait};
use crate::cli::{HistoryArgs, InboxArgs, SendArgs, ThreadArgs};
use crate::error::CliError;
use crate::human;
use crate::output::{self, Mode, Outcome};
use crate::table::table;

/// Where `send` delivers.
#[derive(Debug)]
enum Target {
    Contact(IdentityNumber),
    Room(Uuid),
}

/// `send`'s positional arguments, already checked for shape by
/// [`crate::cli::check_usage`].
fn send_target(args: &SendArgs) -> Result<(Target, String), CliError> {
    match (&args.room, &args.second) {
        // `--room NUMBER` is the direct room with that contact: the
        // server finds it, as for `send NUMBER TEXT`.
        (Some(room), None) => match IdentityNumber::parse(room.trim()) {
            Ok(number) => Ok((Target::Contact(number), args.first.clone())),
            Err(_) => Ok((
                Target::Room(parse_uuid(room, "--room")?),
                args.first.clone(),
            )),
        },
        (None, Some(text)) => Ok((
            Target::Contact(parse_number(&args.first, "NUMBER")?),
            text.clone(),
        )),
        (Some(_), Some(_)) => Err(CliError::invalid("with --room give only TEXT")),
        (None, None) => Err(CliError::invalid(
            "give NUMBER and TEXT, or --room ROOM and TEXT",
        )),
    }
}

pub(super) async fn send(context: &Context, args: SendArgs) -> Result<Outcome, CliError> {
    if args.deadline.is_some() && !args.ask {
        return Err(CliError::invalid(
            "--deadline needs --ask: only a question has a deadline",
        ));
    }
    let deadline = args
        .deadline
        .as_deref()
        .map(|text| {
            Timestamp::parse(text).map_err(|err| CliError::invalid(format!("--deadline: {err}")))
        })
        .transpose()?;
    let reply_to = args
        .reply_to
        .as_deref()
        .map(|id| parse_uuid(id, "--reply-to"))
        .transpose()?;
    let (target, text) = send_target(&args)?;
    let client = context.client().await?;
    // Listen before sending, so a reply that comes at once is not missed.
    let waiter = match args.wait {
        Some(seconds) => Some(wait::ReplyWaiter::open(&client, seconds).await),
        None => None,
    };
    let mut request = SendRequest {
        ask: args.ask,
        deadline,
        reply_to,
        ..SendRequest::default()
    };
    match target {
        Target::Contact(number) => request.to = Some(number),
        Target::Room(room) => request.room_id = Some(room),
    }
    let sent = if args.sealed {
        client
            .send_sealed(&request, &SealedContent::Text { text })
            .await?
    } else {
        request.text = Some(text);
        client.send(&request).await?
    };
    if let Some(deadline) = deadline {
        warn_if_passed(context.mode, deadline);
    }
    if let Some(waiter) = waiter {
        // Someone at a terminal sees why nothing happens yet; `--json`,
        // `--compact` and redirected output stay clean.
        if context.mode == Mode::Human && std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            eprintln!(
                "sent #{} ({}); waiting up to {} s for a reply… (Ctrl-C stops waiting; the question stays)",
                sent.seq,
                sent.message_id,
                args.wait.unwrap_or_default()
            );
        }
        return waiter.wait_for_reply(&client, &sent).await;
    }
    let line = format!(
        "sent #{} to {} ({})",
        sent.seq, sent.conversation_id, sent.message_id
    );
    Ok(Outcome::new(&sent, line))
}

/// A question whose deadline had passed is still sent (the sender may mean
/// it as a record), but no runtime will answer it: say so.
fn warn_if_passed(mode: Mode, deadline: Timestamp) {
    if deadline > Timestamp::now() {
        return;
    }
    let code = SkipReason::DeadlinePassed.as_str();
    let message = format!(
        "the deadline {deadline} has passed: the recipients' runtimes will reject the question (`{code}`), which was sent all the same"
    );
    eprintln!("{}", output::warning(mode, code, &message));
}

/// A thread page with sealed messages opened.
#[derive(Serialize)]
struct OpenedThread {
    messages: Vec<OpenedMessage>,
    next: Option<i64>,
}

pub(super) async fn thread(context: &Context, args: ThreadArgs) -> Result<Outcome, CliError> {
    let room = RoomRef::parse(&args.room, "ROOM")?;
    let message = parse_uuid(&args.message, "MSG")?;
    let client = context.client().await?;
    let room = room.resolve(&client).await?;
    let query = ThreadQuery {
        after: args.after,
        limit: args.limit,
        max_bytes: args.max_bytes,
    };
    let page = client.thread(room, message, query).await?;
    let mut messages = Vec::with_capacity(page.messages.len());
    for envelope in page.messages {
        messages.push(client.open_message(envelope).await);
    }
    let mut lines: Vec<String> = messages.iter().map(human::message).collect();
    match page.next {
        Some(next) => lines.push(format!("more after #{next}: --after {next}")),
        None if lines.is_empty() => lines.push("no messages".into()),
        None => {}
    }
    let opened = OpenedThread {
        messages,
        next: page.next,
    };
    Ok(Outcome::new(&opened, lines.join("\n")))
}

/// The inbox with sealed messages opened.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct OpenedInbox {
    rooms: Vec<OpenedInboxRoom>,
    #[serde(skip_serializing_if = "Option::is_none")]
    next: Option<Uuid>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct OpenedInboxRoom {
    room_id: Uuid,
    acked_seq: i64,
    last_seq: i64,
    messages: Vec<OpenedMessage>,
}

pub(super) async fn inbox(context: &Context, args: InboxArgs) -> Result<Outcome, CliError> {
    let after = args
        .after
        .as_deref()
        .map(|room| parse_uuid(room, "--after"))
        .transpose()?;
    let client = context.client().await?;
    let InboxResponse { rooms, next } = client.inbox_page(after, args.limit).await?;
    let mut lines = Vec::new();
    let mut opened_rooms = Vec::with_capacity(rooms.len());
    for room in rooms {
        lines.push(format!(
            "room {} acked #{} last #{}",
            room.room_id, room.acked_seq, room.last_seq
        ));
        let mut messages = Vec::with_capacity(room.messages.len());
        for envelope in room.messages {
            messages.push(client.open_message(envelope).await);
        }
        let rows = messages.iter().map(human::message_row).collect();
        lines.push(table(&human::MESSAGE_HEADERS, rows, "(no messages)"));
        // The page holds at most so many a room: say what is left and how
        // to read it (the rest may include this identity's own messages,
        // which the inbox leaves out).
        let shown = messages.last().map_or(room.acked_seq, |m| m.envelope.seq);
        if shown < room.last_seq {
            lines.push(format!(
                "more up to #{}: relayger history {} --after {shown} (or ack {shown}, then inbox again)",
                room.last_seq, room.room_id
            ));
        }
        opened_rooms.push(OpenedInboxRoom {
            room_id: room.room_id,
            acked_seq: room.acked_seq,
            last_seq: room.last_seq,
            messages,
        });
    }
    if lines.is_empty() {
        lines.push("no unacknowledged messages".into());
    }
    if let Some(next) = next {
        lines.push(format!("more rooms: relayger inbox --after {next}"));
    }
    let opened = OpenedInbox {
        rooms: opened_rooms,
        next,
    };
    Ok(Outcome::new(&opened, lines.join("\n")))
}

/// A history page with sealed messages opened.
#[derive(Serialize)]
struct OpenedHistory {
    messages: Vec<OpenedMessage>,
    next: Option<i64>,
    prev: Option<i64>,
}

pub(super) async fn history(context: &Context, args: HistoryArgs) -> Result<Outcome, CliError> {
    let room = RoomRef::parse(&args.room, "ROOM")?;
    // The server refuses these too; checked here so no request is made.
    HistoryWindow::new(args.after, args.before, args.limit.map(i64::from)).map_err(|problem| {
        CliError::invalid(
            problem
                .replace("after", "--after")
                .replace("before", "--before")
                .replace("limit", "--limit"),
        )
    })?;
    let client = context.client().await?;
    let room = room.resolve(&client).await?;
    let query = HistoryQuery {
        after: args.after,
        before: args.before,
        limit: args.limit,
    };
    let page = client.history(room, query).await?;
    let mut messages = Vec::with_capacity(page.messages.len());
    for envelope in page.messages {
        messages.push(client.open_message(envelope).await);
    }
    let rows = messages.iter().map(human::message_row).collect();
    let mut lines = vec![table(&human::MESSAGE_HEADERS, rows, "no messages")];
    if let Some(prev) = page.prev {
        lines.push(format!("older: relayger history {room} --before {prev}"));
    }
    if let Some(next) = page.next {
        lines.push(format!("newer: relayger history {room} --after {next}"));
    }
    let opened = OpenedHistory {
        messages,
        next: page.next,
        prev: page.prev,
    };
    Ok(Outcome::new(&opened, lines.join("\n")))
}
