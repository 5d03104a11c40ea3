//! Human-readable output: one short line per item. Everything that came
//! from another identity (names, texts) goes through [`clean`], so a message
//! cannot move the cursor, recolour the terminal, or reverse or hide part
//! of a line.

use relayger_core::sealed::SealedContent;
use relayger_core::wire::{
    Contact, ContactRequestView, Identity, RegisterResponse, Room, TokenInfo,
};
use relayger_worker::OpenedMessage;

/// `text` on one line with control characters and invisible formatting
/// characters (Unicode category Cf: direction controls, zero-width
/// characters, a byte order mark) escaped (`\n`, `\u{1b}`, `\u{202e}`).
pub(crate) fn clean(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() || relayger_core::naming::is_format_char(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// `100000001 agent "Name"` (and its owner, for an owned agent).
pub(crate) fn identity(identity: &Identity) -> String {
    let mut line = format!(
        "{} {} \"{}\"",
        identity.number,
        identity.kind.as_str(),
        clean(&identity.display_name)
    );
    if let Some(owner) = &identity.owner_number {
        line.push_str(&format!(" owned by {owner}"));
    }
    line
}

/// What `register` and `agents create` print.
pub(crate) fn registered(verb: &str, response: &RegisterResponse, profile: &str) -> String {
    format!(
        "{verb} {} (id {}); saved as profile {profile}",
        identity(&response.identity),
        response.identity.id
    )
}

pub(crate) fn contact(contact: &Contact) -> String {
    format!(
        "{} {} \"{}\" room {} since {}",
        contact.number,
        contact.kind.as_str(),
        clean(&contact.display_name),
        contact.room_id,
        contact.since
    )
}

pub(crate) fn request(request: &ContactRequestView) -> String {
    let direction = match request.direction {
        relayger_core::wire::RequestDirection::Incoming => "from",
        relayger_core::wire::RequestDirection::Outgoing => "to",
    };
    format!(
        "{} {direction} {} {} \"{}\" since {}",
        request.state.as_str(),
        request.number,
        request.kind.as_str(),
        clean(&request.display_name),
        request.created_at
    )
}

pub(crate) fn room(room: &Room) -> String {
    let members: Vec<&str> = room.members.iter().map(|m| m.number.as_str()).collect();
    let name = room
        .name
        .as_deref()
        .map(|name| format!(" \"{}\"", clean(name)))
        .unwrap_or_default();
    format!(
        "{} {}{name} members {} last #{}",
        room.id,
        room.kind.as_str(),
        members.join(","),
        room.last_seq
    )
}

pub(crate) fn scopes(scopes: &[relayger_core::wire::Scope]) -> String {
    let names: Vec<&str> = scopes.iter().map(|s| s.as_str()).collect();
    names.join(",")
}

/// `#3 100000001 ask deadline …: text (MESSAGE_ID)`.
pub(crate) fn message(message: &OpenedMessage) -> String {
    let envelope = &message.envelope;
    let mut line = format!("#{} {}", envelope.seq, envelope.sender.number);
    if envelope.ask {
        line.push_str(" ask");
    }
    if let Some(deadline) = envelope.deadline {
        line.push_str(&format!(" deadline {deadline}"));
    }
    if let Some(parent) = envelope.reply_to {
        line.push_str(&format!(" reply-to {parent}"));
    }
    if envelope.by_runtime {
        line.push_str(" by-runtime");
    }
    format!("{line}: {} ({})", content(message), envelope.message_id)
}

/// A message's text, or its opened sealed content, or why there is none.
fn content(message: &OpenedMessage) -> String {
    match (&message.envelope.text, &message.opened, &message.open_error) {
        (Some(text), _, _) => clean(text),
        (None, Some(opened), _) => format!("[sealed] {}", sealed_content(opened)),
        (None, None, Some(reason)) => format!("[sealed, cannot open: {reason}]"),
        (None, None, None) => "[no content]".to_owned(),
    }
}

/// The columns of a message in a table ([`MESSAGE_HEADERS`]).
pub(crate) const MESSAGE_HEADERS: [&str; 5] = ["SEQ", "FROM", "FLAGS", "TEXT", "MESSAGE"];

/// One message as a table row.
pub(crate) fn message_row(message: &OpenedMessage) -> Vec<String> {
    let envelope = &message.envelope;
    let mut flags = Vec::new();
    if envelope.ask {
        flags.push("ask".to_owned());
    }
    if let Some(deadline) = envelope.deadline {
        flags.push(format!("deadline {deadline}"));
    }
    if let Some(parent) = envelope.reply_to {
        flags.push(format!("reply-to {parent}"));
    }
    if envelope.by_runtime {
        flags.push("by-runtime".to_owned());
    }
    vec![
        format!("#{}", envelope.seq),
        envelope.sender.number.to_string(),
        flags.join(" "),
        content(message),
        envelope.message_id.to_string(),
    ]
}

/// The columns of `contacts list`.
pub(crate) const CONTACT_HEADERS: [&str; 5] = ["NUMBER", "KIND", "NAME", "ROOM", "SINCE"];

pub(crate) fn contact_row(contact: &Contact) -> Vec<String> {
    vec![
        contact.number.to_string(),
        contact.kind.as_str().to_owned(),
        clean(&contact.display_name),
        contact.room_id.to_string(),
        contact.since.to_string(),
    ]
}

/// The columns of `rooms list`.
pub(crate) const ROOM_HEADERS: [&str; 5] = ["ROOM", "KIND", "NAME", "MEMBERS", "LAST"];

pub(crate) fn room_row(room: &Room) -> Vec<String> {
    let members: Vec<&str> = room.members.iter().map(|m| m.number.as_str()).collect();
    vec![
        room.id.to_string(),
        room.kind.as_str().to_owned(),
        room.name.as_deref().map(clean).unwrap_or_default(),
        members.join(","),
        format!("#{}", room.last_seq),
    ]
}

/// The columns of `tokens list`.
pub(crate) const TOKEN_HEADERS: [&str; 6] = ["TOKEN", "SCOPES", "ROOMS", "CREATED", "REVOKED", ""];

pub(crate) fn token_row(token: &TokenInfo) -> Vec<String> {
    let rooms: Vec<String> = token
        .room_ids
        .iter()
        .flatten()
        .map(ToString::to_string)
        .collect();
    vec![
        token.id.to_string(),
        scopes(&token.scopes),
        if rooms.is_empty() {
            "all".to_owned()
        } else {
            rooms.join(",")
        },
        token.created_at.to_string(),
        token
            .revoked_at
            .map(|at| at.to_string())
            .unwrap_or_default(),
        if token.current {
            "(this profile)".to_owned()
        } else {
            String::new()
        },
    ]
}

fn sealed_content(content: &SealedContent) -> String {
    match content {
        SealedContent::Text { text } => clean(text),
        SealedContent::Structured { schema, data, text } => {
            let mut line = format!("{{{}}} {}", clean(schema), clean(&data.to_string()));
            if let Some(text) = text {
                line.push_str(&format!(" {}", clean(text)));
            }
            line
        }
    }
}

#[cfg(test)]
mod tests {
    use super::clean;

    #[test]
    fn others_text_is_shown_with_controls_and_format_characters_escaped() {
        let table = [
            ("plain", "plain"),
            ("Zoë 🦀 שלום", "Zoë 🦀 שלום"),
            ("two\nlines", "two\\nlines"),
            ("\u{1b}[31mred", "\\u{1b}[31mred"),
            ("adm\u{202e}nimda", "adm\\u{202e}nimda"),
            ("a\u{200b}b", "a\\u{200b}b"),
            ("\u{feff}bob", "\\u{feff}bob"),
            ("\u{2066}x\u{2069}", "\\u{2066}x\\u{2069}"),
        ];
        for (text, shown) in table {
            assert_eq!(clean(text), shown, "{text:?}");
        }
    }
}
