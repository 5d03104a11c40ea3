//! `delivery ROOM MSG` and `cancel ROOM MSG`: what became of a question for
//! each other member of its room, and its sender taking it back.

use relayger_core::wire::{Delivery, DeliveryState};

use super::{Context, RoomRef, parse_uuid};
use crate::cli::QuestionArgs;
use crate::error::CliError;
use crate::output::Outcome;
use crate::table::table;

pub(super) async fn delivery(context: &Context, args: QuestionArgs) -> Result<Outcome, CliError> {
    let (room, message) = parse(&args)?;
    let client = context.client().await?;
    let room = room.resolve(&client).await?;
    let delivery = client.delivery(room, message).await?;
    let lines = human(&delivery);
    Ok(Outcome::new(&delivery, lines))
}

pub(super) async fn cancel(context: &Context, args: QuestionArgs) -> Result<Outcome, CliError> {
    let (room, message) = parse(&args)?;
    let client = context.client().await?;
    let room = room.resolve(&client).await?;
    let delivery = client.cancel_question(room, message).await?;
    Ok(Outcome::new(&delivery, human(&delivery)))
}

fn parse(args: &QuestionArgs) -> Result<(RoomRef, uuid::Uuid), CliError> {
    Ok((
        RoomRef::parse(&args.room, "ROOM")?,
        parse_uuid(&args.message, "MSG")?,
    ))
}

/// The columns of a delivery's recipients.
const RECIPIENT_HEADERS: [&str; 6] = [
    "NUMBER",
    "STATE",
    "REASON",
    "ATTEMPTS",
    "LISTENERS",
    "REPLY",
];

/// `question MSG: STATE (updated …)` and a row per recipient: its number,
/// state, reason, attempts, listeners and reply. Codes and numbers only:
/// nothing in it was written by another identity.
pub(crate) fn human(delivery: &Delivery) -> String {
    let state = match (delivery.canceled, delivery.state) {
        (true, DeliveryState::Canceled) => "canceled by its sender".to_owned(),
        // Answered (or ended) before the cancel came.
        (true, state) => format!("{}, then canceled by its sender", state.as_str()),
        (false, state) => state.as_str().to_owned(),
    };
    let head = format!(
        "question {}: {state} (updated {})",
        delivery.message_id, delivery.updated_at
    );
    let rows = delivery
        .recipients
        .iter()
        .map(|recipient| {
            vec![
                recipient.number.to_string(),
                recipient.state.as_str().to_owned(),
                recipient.reason.clone().unwrap_or_default(),
                recipient.attempts.to_string(),
                recipient.listeners.to_string(),
                recipient
                    .reply_message_id
                    .map(|id| id.to_string())
                    .unwrap_or_default(),
            ]
        })
        .collect();
    let recipients = table(&RECIPIENT_HEADERS, rows, "no other members in the room");
    format!("{head}\n{recipients}")
}

#[cfg(test)]
mod tests {
    use relayger_core::ids::IdentityNumber;
    use relayger_core::wire::{RecipientDelivery, Timestamp};
    use uuid::Uuid;

    use super::*;

    #[test]
    fn a_delivery_shows_each_recipients_state_and_reason() {
        let recipient = |number: &str, state, reason: Option<&str>| RecipientDelivery {
            identity_id: Uuid::nil(),
            number: IdentityNumber::parse(number).expect("number"),
            state,
            reason: reason.map(str::to_owned),
            attempts: 1,
            reply_message_id: None,
            listeners: 2,
        };
        let delivery = Delivery {
            conversation_id: Uuid::nil(),
            message_id: Uuid::nil(),
            state: DeliveryState::Failed,
            canceled: true,
            recipients: vec![
                recipient(
                    "100000002",
                    DeliveryState::Failed,
                    Some("attempts_exhausted"),
                ),
                recipient(
                    "100000003",
                    DeliveryState::Rejected,
                    Some("deadline_passed"),
                ),
            ],
            updated_at: Timestamp::parse("2030-01-01T00:00:00Z").expect("time"),
        };
        let text = human(&delivery);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(
            lines[0]
                .contains(": failed, then canceled by its sender (updated 2030-01-01T00:00:00Z)"),
            "{text}"
        );
        let words = |line: &str| {
            line.split_whitespace()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            words(lines[2]),
            ["100000002", "failed", "attempts_exhausted", "1", "2"]
        );
        assert_eq!(
            words(lines[3]),
            ["100000003", "rejected", "deadline_passed", "1", "2"]
        );
        let taken_back = Delivery {
            state: DeliveryState::Canceled,
            ..delivery.clone()
        };
        assert!(human(&taken_back).contains(": canceled by its sender (updated"));
        let alone = Delivery {
            recipients: Vec::new(),
            canceled: false,
            ..delivery
        };
        let text = human(&alone);
        assert!(text.contains(": failed (updated"), "{text}");
        assert!(text.ends_with("\nno other members in the room"), "{text}");
    }
}
