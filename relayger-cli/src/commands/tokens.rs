//! `tokens create | list | revoke`.

use relayger_core::wire::{CreateTokenRequest, CreatedToken, Scope};
use relayger_worker::Profile;
use serde::Serialize;

use super::{Context, RoomRef, page_after, parse_uuid, with_next};
use crate::cli::TokensCommand;
use crate::error::CliError;
use crate::human;
use crate::output::Outcome;
use crate::table::table;

pub(super) async fn run(context: &Context, command: TokensCommand) -> Result<Outcome, CliError> {
    match command {
        TokensCommand::Create {
            scopes,
            rooms,
            save_as,
        } => {
            let scopes = scopes
                .iter()
                .map(|text| {
                    Scope::parse(text.trim()).ok_or_else(|| {
                        CliError::invalid(format!(
                            "--scopes: `{text}` is not a scope (read, write, contacts)"
                        ))
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            let rooms = rooms
                .iter()
                .map(|room| RoomRef::parse(room, "--room"))
                .collect::<Result<Vec<_>, _>>()?;
            let profile = context.load().await?;
            if let Some(name) = &save_as {
                context.dir.check_available(name)?;
            }
            let client = context.client_for(&profile)?;
            let mut room_ids = Vec::with_capacity(rooms.len());
            for room in rooms {
                room_ids.push(room.resolve(&client).await?);
            }
            let created = client
                .create_token(&CreateTokenRequest {
                    scopes,
                    room_ids: (!room_ids.is_empty()).then_some(room_ids),
                    label: None,
                })
                .await?;
            let mut line = format!(
                "created token {} ({}); secret, shown only now: {}",
                created.id,
                human::scopes(&created.scopes),
                created.secret
            );
            let mut saved_as = None;
            if let Some(name) = save_as {
                let copy = Profile {
                    token_id: created.id,
                    token: created.secret.clone(),
                    ..profile
                };
                context.dir.create(&name, &copy)?;
                line.push_str(&format!("\nsaved as profile {name}"));
                saved_as = Some(name);
            }
            let output = CreatedTokenOutput {
                token: &created,
                profile: saved_as,
            };
            Ok(Outcome::new(&output, line))
        }
        TokensCommand::List(page) => {
            let client = context.client().await?;
            let list = if page.one_page() {
                client.tokens_page(page_after(&page)?, page.limit).await?
            } else {
                client.tokens().await?
            };
            let lines = table(
                &human::TOKEN_HEADERS,
                list.tokens.iter().map(human::token_row).collect(),
                "no tokens",
            );
            let lines = with_next(lines, list.next, "tokens list");
            Ok(Outcome::new(&list, lines))
        }
        TokensCommand::Revoke { id } => {
            let id = parse_uuid(&id, "ID")?;
            let token = context.client().await?.revoke_token(id).await?;
            Ok(Outcome::new(&token, format!("revoked token {id}")))
        }
    }
}

/// `tokens create`: the new token (with its secret, shown only now) and the
/// profile it was saved as.
#[derive(Serialize)]
struct CreatedTokenOutput<'a> {
    #[serde(flatten)]
    token: &'a CreatedToken,
    #[serde(skip_serializing_if = "Option::is_none")]
    profile: Option<String>,
}
