//! `relayger contacts`: requests, answers, blocks and removals.
use crate::cli::ContactsCommand;
use crate::error::CliError;
use crate::human;
use crate::output::Outcome;
use crate::table::table;

use super::{Context, lines_or, page_after, parse_agent, parse_number, with_next};

pub(super) async fn contacts(
    context: &Context,
    command: ContactsCommand,
) -> Result<Outcome, CliError> {
    match command {
        ContactsCommand::List => {
            let list = context.client().await?.contacts().await?;
            let lines = table(
                &human::CONTACT_HEADERS,
                list.contacts.iter().map(human::contact_row).collect(),
                "no contacts",
            );
            Ok(Outcome::new(&list, lines))
        }
        ContactsCommand::Requests { as_agent, page } => {
            let as_agent = parse_agent(as_agent.as_deref())?;
            let client = context.client().await?;
            let requests = if page.one_page() {
                client
                    .contact_requests_page(as_agent.as_ref(), page_after(&page)?, page.limit)
                    .await?
            } else {
                client.contact_requests(as_agent.as_ref()).await?
            };
            let lines = lines_or(
                requests
                    .incoming
                    .iter()
                    .chain(&requests.outgoing)
                    .map(human::request),
                "no pending contact requests",
            );
            let lines = with_next(lines, requests.next, "contacts requests");
            Ok(Outcome::new(&requests, lines))
        }
        ContactsCommand::Request { number } => {
            let number = parse_number(&number, "NUMBER")?;
            let request = context.client().await?.request_contact(&number).await?;
            let line = format!("requested {} ({})", number, request.state.as_str());
            Ok(Outcome::new(&request, line))
        }
        ContactsCommand::Accept { number, as_agent } => {
            let number = parse_number(&number, "NUMBER")?;
            let as_agent = parse_agent(as_agent.as_deref())?;
            let contact = context
                .client()
                .await?
                .accept_contact(&number, as_agent.as_ref())
                .await?;
            let line = format!("accepted {}", human::contact(&contact));
            Ok(Outcome::new(&contact, line))
        }
        ContactsCommand::Decline { number, as_agent } => {
            let number = parse_number(&number, "NUMBER")?;
            let as_agent = parse_agent(as_agent.as_deref())?;
            let request = context
                .client()
                .await?
                .decline_contact(&number, as_agent.as_ref())
                .await?;
            Ok(Outcome::new(&request, format!("declined {number}")))
        }
        ContactsCommand::Withdraw { number } => {
            let number = parse_number(&number, "NUMBER")?;
            let request = context
                .client()
                .await?
                .withdraw_contact_request(&number)
                .await?;
            let line = format!("withdrew the request to {number}");
            Ok(Outcome::new(&request, line))
        }
        ContactsCommand::Block { number } => {
            let number = parse_number(&number, "NUMBER")?;
            let done = context.client().await?.block(&number).await?;
            Ok(Outcome::new(&done, format!("blocked {number}")))
        }
        ContactsCommand::Unblock { number } => {
            let number = parse_number(&number, "NUMBER")?;
            let done = context.client().await?.unblock(&number).await?;
            Ok(Outcome::new(&done, format!("unblocked {number}")))
        }
        ContactsCommand::Remove { number } => {
            let number = parse_number(&number, "NUMBER")?;
            let done = context.client().await?.remove_contact(&number).await?;
            Ok(Outcome::new(&done, format!("removed {number}")))
        }
    }
}
