//! One function per command: check the arguments locally (no request is
//! made for a bad one), call the client, shape the output.

mod a2a;
mod contacts;
mod context;
pub(crate) mod delivery;
mod messages;
mod rooms;
mod runtimes;
mod tokens;
pub(crate) mod wait;
mod worker;

use relayger_core::ErrorCode;
use relayger_core::ids::IdentityNumber;
use relayger_core::sealed::KeyPair;
use relayger_core::wire::{
    CreateAgentRequest, Identity, IdentityKind, RegisterRequest, RegisterResponse, Scope, Timestamp,
};
use relayger_worker::{Client, Profile};
use serde::Serialize;
use uuid::Uuid;

use crate::cli::{AgentsCommand, Command, PageArgs, ProfilesCommand, RegisterArgs, WorkerCommand};
use crate::error::CliError;
use crate::human;
use crate::output::Outcome;

pub(crate) use self::context::{Context, EnvCredentials};

/// What `profiles use` and `profiles delete` did.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ProfileChange {
    profile: String,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    current: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    deleted: bool,
}

impl ProfileChange {
    fn current(profile: String) -> ProfileChange {
        ProfileChange {
            profile,
            current: true,
            deleted: false,
        }
    }

    fn deleted(profile: String) -> ProfileChange {
        ProfileChange {
            profile,
            current: false,
            deleted: true,
        }
    }
}

pub(crate) async fn run(context: &Context, command: Command) -> Result<Outcome, CliError> {
    match command {
        Command::Register(args) => register(context, args).await,
        Command::Agents(AgentsCommand::Create { name, save_as }) => {
            create_agent(context, name, &save_as).await
        }
        Command::Whoami => {
            let me = context.client().await?.me().await?;
            let source = match context.env {
                Some(_) => "no profile: RELAYGER_TOKEN".to_owned(),
                None => format!("profile {}", context.profile),
            };
            let line = format!("{} ({source}, id {})", human::identity(&me), me.id);
            Ok(Outcome::new(&me, line))
        }
        Command::Profiles(ProfilesCommand::List) => list_profiles(context),
        Command::Profiles(ProfilesCommand::Use { name }) => {
            context.dir.set_current(&name)?;
            let line = format!("using profile {name} when none is named");
            Ok(Outcome::new(&ProfileChange::current(name), line))
        }
        Command::Profiles(ProfilesCommand::Delete { name, yes }) => {
            if !yes {
                return Err(CliError::invalid(format!(
                    "deleting profile `{name}` deletes its private key for good; pass --yes to confirm"
                )));
            }
            context.dir.delete(&name)?;
            let line = format!("deleted profile {name} (its token is not revoked on the server)");
            Ok(Outcome::new(&ProfileChange::deleted(name), line))
        }
        Command::Contacts(command) => contacts::contacts(context, command).await,
        Command::Rooms(command) => rooms::rooms(context, command).await,
        Command::Send(args) => messages::send(context, args).await,
        Command::Delivery(args) => delivery::delivery(context, args).await,
        Command::Cancel(args) => delivery::cancel(context, args).await,
        Command::Message(args) => {
            let room = RoomRef::parse(&args.room, "ROOM")?;
            let message = parse_uuid(&args.message, "MSG")?;
            let client = context.client().await?;
            let room = room.resolve(&client).await?;
            let envelope = client.message(room, message).await?;
            let opened = client.open_message(envelope).await;
            Ok(Outcome::new(&opened, human::message(&opened)))
        }
        Command::Thread(args) => messages::thread(context, args).await,
        Command::Inbox(args) => messages::inbox(context, args).await,
        Command::History(args) => messages::history(context, args).await,
        Command::Ack(args) => {
            let room = RoomRef::parse(&args.room, "ROOM")?;
            let client = context.client().await?;
            let room = room.resolve(&client).await?;
            let acked = client.ack(room, args.seq).await?;
            let line = format!("acked {} up to #{}", acked.room_id, acked.acked_seq);
            Ok(Outcome::new(&acked, line))
        }
        Command::Tokens(command) => tokens::run(context, command).await,
        Command::Worker(WorkerCommand::Run(args)) => worker::run(context, args).await,
        Command::Runtimes(command) => runtimes::run(context, command).await,
        Command::A2a(command) => a2a::run(context, command).await,
        Command::Completions { .. } => Err(CliError::with_code(
            "internal",
            "completions are printed before any profile is read",
        )),
        // Boxed: the MCP server's tools run commands through this function.
        Command::Mcp(args) => Box::pin(crate::mcp::run(context, args)).await,
    }
}

async fn register(context: &Context, args: RegisterArgs) -> Result<Outcome, CliError> {
    if !(args.server.starts_with("http://") || args.server.starts_with("https://")) {
        return Err(CliError::invalid(format!(
            "--server `{}` is not an http:// or https:// URL",
            args.server
        )));
    }
    context.dir.check_available(&context.profile)?;
    let key_pair = new_key_pair()?;
    let kind = if args.agent {
        IdentityKind::Agent
    } else {
        IdentityKind::Person
    };
    let client = context.allowing(Client::anonymous(&args.server));
    let response = client
        .register(&RegisterRequest {
            name: args.name,
            kind,
            public_key: key_pair.public_base64(),
            invite: args.invite,
        })
        .await?;
    let profile = Profile::from_registration(client.base_url(), &response, &key_pair);
    save_new_identity(context, &context.profile, &profile, &response)?;
    Ok(Outcome::new(
        &registered(&response, &context.profile),
        human::registered("registered", &response, &context.profile),
    ))
}

async fn create_agent(context: &Context, name: String, save_as: &str) -> Result<Outcome, CliError> {
    let owner = context.load().await?;
    context.dir.check_available(save_as)?;
    let key_pair = new_key_pair()?;
    let response = context
        .client_for(&owner)?
        .create_agent(&CreateAgentRequest {
            name,
            public_key: key_pair.public_base64(),
        })
        .await?;
    let profile = Profile::from_registration(&owner.server, &response, &key_pair);
    save_new_identity(context, save_as, &profile, &response)?;
    Ok(Outcome::new(
        &registered(&response, save_as),
        human::registered("created agent", &response, save_as),
    ))
}

fn new_key_pair() -> Result<KeyPair, CliError> {
    KeyPair::generate().map_err(|err| {
        CliError::new(
            ErrorCode::Internal,
            format!("cannot generate a key pair: {err}"),
        )
    })
}

/// Saves the profile of an identity the server has just created; if that
/// fails the identity exists but its key is lost, which the error says.
fn save_new_identity(
    context: &Context,
    name: &str,
    profile: &Profile,
    response: &RegisterResponse,
) -> Result<(), CliError> {
    context.dir.create(name, profile).map(drop).map_err(|err| {
        CliError::new(
            ErrorCode::Internal,
            format!(
                "identity {} was created but its profile could not be saved, so its key is lost: {err}",
                response.identity.number
            ),
        )
    })
}

/// The registration response without the token secret (it is in the
/// profile file, and stdout may end up in a log), plus the profile name.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Registered<'a> {
    profile: &'a str,
    identity: &'a Identity,
    token: SavedToken<'a>,
}

/// A token whose secret went into a profile file.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SavedToken<'a> {
    id: Uuid,
    scopes: &'a [Scope],
    #[serde(skip_serializing_if = "Option::is_none")]
    room_ids: Option<&'a [Uuid]>,
    created_at: Timestamp,
}

fn registered<'a>(response: &'a RegisterResponse, profile: &'a str) -> Registered<'a> {
    let token = &response.token;
    Registered {
        profile,
        identity: &response.identity,
        token: SavedToken {
            id: token.id,
            scopes: &token.scopes,
            room_ids: token.room_ids.as_deref(),
            created_at: token.created_at,
        },
    }
}

/// One line of `profiles list`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ListedProfile {
    name: String,
    current: bool,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    profile: Option<ProfileSummary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// A profile without its token and keys.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ProfileSummary {
    server: String,
    identity_id: Uuid,
    number: IdentityNumber,
    kind: IdentityKind,
    display_name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    owner_number: Option<IdentityNumber>,
}

#[derive(Serialize)]
struct ProfileListing<'a> {
    directory: &'a std::path::Path,
    profiles: Vec<ListedProfile>,
}

fn list_profiles(context: &Context) -> Result<Outcome, CliError> {
    let entries = context.dir.list()?;
    let mut lines = Vec::new();
    let mut profiles = Vec::new();
    for entry in entries {
        let current = entry.name == context.profile;
        let marker = if current { "*" } else { " " };
        match entry.profile {
            Ok(profile) => {
                lines.push(format!(
                    "{marker} {} {} {} \"{}\" {}",
                    entry.name,
                    profile.number,
                    profile.kind.as_str(),
                    human::clean(&profile.display_name),
                    profile.server
                ));
                profiles.push(ListedProfile {
                    name: entry.name,
                    current,
                    profile: Some(ProfileSummary {
                        server: profile.server,
                        identity_id: profile.identity_id,
                        number: profile.number,
                        kind: profile.kind,
                        display_name: profile.display_name,
                        owner_number: profile.owner_number,
                    }),
                    error: None,
                });
            }
            Err(err) => {
                lines.push(format!("{marker} {} (unreadable: {err})", entry.name));
                profiles.push(ListedProfile {
                    name: entry.name,
                    current,
                    profile: None,
                    error: Some(err.to_string()),
                });
            }
        }
    }
    if lines.is_empty() {
        lines.push(format!("no profiles in {}", context.dir.path().display()));
    }
    let listing = ProfileListing {
        directory: context.dir.path(),
        profiles,
    };
    Ok(Outcome::new(&listing, lines.join("\n")))
}

pub(crate) fn parse_number(text: &str, what: &str) -> Result<IdentityNumber, CliError> {
    IdentityNumber::parse(text).map_err(|err| {
        CliError::invalid(format!("{what} `{text}` is not an identity number: {err}"))
    })
}

/// The `--as` agent an owner answers for, when given.
pub(crate) fn parse_agent(as_agent: Option<&str>) -> Result<Option<IdentityNumber>, CliError> {
    as_agent.map(|n| parse_number(n, "AGENT")).transpose()
}

pub(crate) fn parse_uuid(text: &str, what: &str) -> Result<Uuid, CliError> {
    Uuid::parse_str(text).map_err(|_| CliError::invalid(format!("{what} `{text}` is not a UUID")))
}

/// A room as a person types it: its id, or a contact's number for the
/// direct room with them. Parsed before any request; a number costs one
/// `contacts` call to resolve.
#[derive(Debug, Clone)]
pub(crate) enum RoomRef {
    Id(Uuid),
    Contact(IdentityNumber, &'static str),
}

impl RoomRef {
    pub(crate) fn parse(text: &str, what: &'static str) -> Result<RoomRef, CliError> {
        let text = text.trim();
        if let Ok(id) = Uuid::parse_str(text) {
            return Ok(RoomRef::Id(id));
        }
        IdentityNumber::parse(text)
            .map(|number| RoomRef::Contact(number, what))
            .map_err(|_| {
                CliError::invalid(format!(
                    "{what} `{text}` is not a UUID nor a contact's number (a room is named by its id, or by a contact's number for your direct room)"
                ))
            })
    }

    /// The room's id.
    pub(crate) async fn resolve(self, client: &Client) -> Result<Uuid, CliError> {
        let (number, what) = match self {
            RoomRef::Id(id) => return Ok(id),
            RoomRef::Contact(number, what) => (number, what),
        };
        let contacts = client.contacts().await?;
        contacts
            .contacts
            .iter()
            .find(|contact| contact.number == number)
            .map(|contact| contact.room_id)
            .ok_or_else(|| {
                CliError::new(
                    ErrorCode::NotFound,
                    format!(
                        "{what} {number}: not one of your contacts, so there is no direct room with them (`relayger contacts list` shows yours)"
                    ),
                )
            })
    }
}

/// `--after` of a one-page listing.
pub(crate) fn page_after(page: &PageArgs) -> Result<Option<Uuid>, CliError> {
    page.after
        .as_deref()
        .map(|id| parse_uuid(id, "--after"))
        .transpose()
}

/// A listing's text with the command that shows the next page, if any.
pub(crate) fn with_next(lines: String, next: Option<Uuid>, command: &str) -> String {
    match next {
        Some(next) => format!("{lines}\nmore: relayger {command} --after {next}"),
        None => lines,
    }
}

pub(crate) fn lines_or(lines: impl Iterator<Item = String>, empty: &str) -> String {
    let lines: Vec<String> = lines.collect();
    if lines.is_empty() {
        empty.to_owned()
    } else {
        lines.join("\n")
    }
}
