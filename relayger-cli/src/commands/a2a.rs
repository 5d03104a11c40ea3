//! `a2a card NUMBER`: an agent's A2A card as outside agents read it.

use relayger_worker::a2a::AgentCard;
use serde::Serialize;

use super::{Context, parse_number};
use crate::cli::A2aCommand;
use crate::error::CliError;
use crate::output::Outcome;

/// The card and where it is.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct CardOutput {
    url: String,
    card: AgentCard,
}

pub(super) async fn run(context: &Context, command: A2aCommand) -> Result<Outcome, CliError> {
    match command {
        A2aCommand::Card { number } => {
            let number = parse_number(&number, "NUMBER")?;
            let client = context.client().await?;
            let card = client.a2a_card(&number).await?;
            let url = client.a2a_card_url(&number);
            // The card is JSON in both modes; a person gets the URL first.
            let pretty = serde_json::to_string_pretty(&card).unwrap_or_default();
            let human = format!("{url}\n{pretty}");
            Ok(Outcome::new(&CardOutput { url, card }, human))
        }
    }
}
