//! Identities registered through the CLI and the contacts between them:
//! the set-up most tests start from.

use relayger_tests::CliOutput;
use serde_json::Value;

use super::{CliTest, text};

/// Who to register: a profile, a display name, agent or person.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Party<'a> {
    pub(crate) profile: &'a str,
    pub(crate) name: &'a str,
    pub(crate) agent: bool,
}

impl<'a> Party<'a> {
    pub(crate) fn person(profile: &'a str, name: &'a str) -> Party<'a> {
        Party {
            profile,
            name,
            agent: false,
        }
    }

    pub(crate) fn agent(profile: &'a str, name: &'a str) -> Party<'a> {
        Party {
            profile,
            name,
            agent: true,
        }
    }
}

/// Two contacts: the one who asked (`sender`) and the one who accepted
/// (`receiver`); in [`CliTest::befriended_pair`] also their profiles' names.
pub(crate) struct Befriended {
    pub(crate) sender_id: String,
    pub(crate) sender_number: String,
    pub(crate) receiver_id: String,
    pub(crate) receiver_number: String,
    /// Their direct room's id.
    pub(crate) room: String,
}

impl CliTest {
    /// Registers `name` as profile `profile`; the new identity.
    pub(crate) fn register(&self, profile: &str, name: &str, agent: bool) -> Value {
        let mut args = vec![
            "--profile",
            profile,
            "register",
            "--server",
            self.url(),
            "--name",
            name,
        ];
        if agent {
            args.push("--agent");
        }
        let registered = self.json(&args);
        assert_eq!(registered["profile"], profile, "{registered}");
        assert!(
            registered["token"].get("secret").is_none(),
            "the token secret stays in the profile: {registered}"
        );
        registered["identity"].clone()
    }

    /// Registers `who`; the new identity's number.
    pub(crate) fn register_number(&self, who: Party<'_>) -> String {
        text(&self.register(who.profile, who.name, who.agent)["number"])
    }

    /// Registers `sender` and `receiver`; `sender` asks `receiver`, who
    /// accepts.
    pub(crate) fn register_pair(&self, sender: Party<'_>, receiver: Party<'_>) -> Befriended {
        let sender_identity = self.register(sender.profile, sender.name, sender.agent);
        let receiver_identity = self.register(receiver.profile, receiver.name, receiver.agent);
        let sender_number = text(&sender_identity["number"]);
        let receiver_number = text(&receiver_identity["number"]);
        let room = self.befriend(
            (sender.profile, &sender_number),
            (receiver.profile, &receiver_number),
        );
        Befriended {
            sender_id: text(&sender_identity["id"]),
            sender_number,
            receiver_id: text(&receiver_identity["id"]),
            receiver_number,
            room,
        }
    }

    /// Registers the agent `receiver` and `sender` (an agent when
    /// `sender_is_agent`, else a person) as profiles of those names; `sender`
    /// asks `receiver`, who accepts.
    pub(crate) fn befriended_pair(&self, sender_is_agent: bool) -> Befriended {
        let sender = Party {
            agent: sender_is_agent,
            ..Party::person("sender", "Sender")
        };
        self.register_pair(sender, Party::agent("receiver", "Receiver"))
    }

    /// Profile `profile` asks `number` to be a contact; the request.
    pub(crate) fn request_contact(&self, profile: &str, number: &str) -> Value {
        self.json(&["--profile", profile, "contacts", "request", number])
    }

    /// Registers `who`, who asks `number` to be a contact; `who`'s number.
    pub(crate) fn new_requester(&self, who: Party<'_>, number: &str) -> String {
        let requester = self.register_number(who);
        self.request_contact(who.profile, number);
        requester
    }

    /// `profile` has exactly one contact request waiting, from `number`.
    pub(crate) fn assert_one_request_from(&self, profile: &str, number: &str) {
        let pending = self.json(&["--profile", profile, "contacts", "requests"]);
        assert_eq!(pending["count"], 1, "not accepted: {pending}");
        assert_eq!(pending["incoming"][0]["number"], number, "{pending}");
    }

    /// `requester` asks `target`, who accepts; their direct room's id.
    pub(crate) fn befriend(&self, requester: (&str, &str), target: (&str, &str)) -> String {
        let (requester_profile, requester_number) = requester;
        let (target_profile, target_number) = target;
        self.request_contact(requester_profile, target_number);
        let contact = self.json(&[
            "--profile",
            target_profile,
            "contacts",
            "accept",
            requester_number,
        ]);
        text(&contact["roomId"])
    }

    /// `sender` asks `number` `question` (with `extra` options of `send`);
    /// the question's id.
    pub(crate) fn ask(&self, number: &str, question: &str, extra: &[&str]) -> String {
        let mut args = vec!["--profile", "sender", "send", number, question, "--ask"];
        args.extend_from_slice(extra);
        text(&self.json(&args)["messageId"])
    }

    /// `sender` asks `number` `question` with `--wait` (followed by `wait`,
    /// e.g. a number of seconds), which must succeed; the reply it printed.
    pub(crate) fn ask_and_wait(&self, number: &str, question: &str, wait: &[&str]) -> Value {
        let waited = self.ask_waiting(number, question, &[], wait);
        assert!(waited.success(), "{waited:?}");
        serde_json::from_str(&waited.stdout).expect("reply JSON")
    }

    /// `relayger --profile sender --json send NUMBER QUESTION --ask EXTRA…
    /// --wait WAIT…`, whatever its exit.
    pub(crate) fn ask_waiting(
        &self,
        number: &str,
        question: &str,
        extra: &[&str],
        wait: &[&str],
    ) -> CliOutput {
        let mut args = vec![
            "--profile",
            "sender",
            "--json",
            "send",
            number,
            question,
            "--ask",
        ];
        args.extend_from_slice(extra);
        args.push("--wait");
        args.extend_from_slice(wait);
        self.run(&args)
    }

    /// The messages of `room` that reply to `message`, as `profile` reads
    /// the thread.
    pub(crate) fn replies_to(&self, profile: &str, room: &str, message: &str) -> Vec<Value> {
        let thread = self.json(&[
            "--profile",
            profile,
            "thread",
            room,
            message,
            "--limit",
            "100",
        ]);
        thread["messages"]
            .as_array()
            .expect("messages")
            .iter()
            .filter(|m| m["replyTo"] == message)
            .cloned()
            .collect()
    }
}
