//! Random policies × random messages: what a claim grants and what it
//! records as a skip (with which reason) is exactly what the core's
//! `Policy::judge` says about the facts the claim's SQL gathers (sender,
//! room, question or not, written by a runtime, the deadline, a block
//! between the agent and the sender). The scan's trigger check is the
//! core's too: a message it did not trigger on has no job at all.

use std::collections::{HashMap, HashSet};

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, TestRunner};
use relayger_core::ids::IdentityNumber;
use relayger_core::policy::{JobFacts, MessageFacts, Policy, SkipReason};
use relayger_core::wire::{ClaimedJob, JobResult, StartFrom};
use relayger_store::{MessageBody, NewMessage};
use serde_json::{Value, json};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::support::{Agent, User, befriend};

const CASES: u32 = 24;

/// Who writes a message: the three contacts or the agent itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Who {
    Alice,
    Bob,
    /// Blocked by the agent; shares only the group with it.
    Carol,
    Agent,
}

/// Where: alice's direct room, bob's, or the group of all four.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Place {
    AliceRoom,
    BobRoom,
    Group,
}

#[derive(Debug, Clone)]
struct Message {
    who: Who,
    place: Place,
    ask: bool,
    /// A question whose deadline has passed by the claim.
    deadline_passed: bool,
    /// Written by a runtime (a bot's reply).
    by_runtime: bool,
}

#[derive(Debug, Clone)]
struct Case {
    questions_trigger: bool,
    messages_trigger: bool,
    senders: Vec<Who>,
    rooms: Vec<Place>,
    messages: Vec<Message>,
}

fn message() -> impl Strategy<Value = Message> {
    (
        prop_oneof![
            Just(Who::Alice),
            Just(Who::Bob),
            Just(Who::Carol),
            Just(Who::Agent)
        ],
        prop_oneof![
            Just(Place::AliceRoom),
            Just(Place::BobRoom),
            Just(Place::Group)
        ],
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(who, place, ask, deadline_passed, by_runtime)| {
            // Each sender writes only where it is a member.
            let place = match (who, place) {
                (Who::Alice, Place::BobRoom) | (Who::Bob, Place::AliceRoom) | (Who::Carol, _) => {
                    Place::Group
                }
                (_, place) => place,
            };
            Message {
                who,
                place,
                ask,
                deadline_passed: ask && deadline_passed,
                by_runtime,
            }
        })
}

fn case() -> impl Strategy<Value = Case> {
    (
        any::<(bool, bool)>(),
        proptest::sample::subsequence(vec![Who::Alice, Who::Bob, Who::Carol], 0..=3),
        proptest::sample::subsequence(vec![Place::AliceRoom, Place::BobRoom, Place::Group], 0..=3),
        proptest::collection::vec(message(), 1..=8),
    )
        .prop_map(
            |((questions, messages_trigger), senders, rooms, messages)| Case {
                // At least one trigger.
                questions_trigger: questions || !messages_trigger,
                messages_trigger,
                senders,
                rooms,
                messages,
            },
        )
}

struct World {
    bot: Agent,
    alice: User,
    bob: User,
    carol: User,
    rooms: HashMap<Place, Uuid>,
    runtime: Uuid,
}

impl World {
    async fn new() -> World {
        let bot = Agent::start().await;
        let (alice, alice_room) = bot.contact("alice").await;
        let (bob, bob_room) = bot.contact("bob").await;
        let (carol, _) = bot.contact("carol").await;
        befriend(&bot.store, &carol, &alice).await;
        befriend(&bot.store, &carol, &bob).await;
        let group = bot
            .store
            .create_room(
                &carol.caller(),
                "all".to_owned(),
                vec![bot.agent.number(), alice.number(), bob.number()],
            )
            .await
            .expect("the group")
            .id;
        bot.store
            .block_contact(bot.agent.id(), carol.number())
            .await
            .expect("block");
        let runtime = bot.runtime("judged", StartFrom::Now, json!({})).await;
        let rooms = HashMap::from([
            (Place::AliceRoom, alice_room),
            (Place::BobRoom, bob_room),
            (Place::Group, group),
        ]);
        World {
            bot,
            alice,
            bob,
            carol,
            rooms,
            runtime,
        }
    }

    fn user(&self, who: Who) -> &User {
        match who {
            Who::Alice => &self.alice,
            Who::Bob => &self.bob,
            Who::Carol => &self.carol,
            Who::Agent => &self.bot.agent,
        }
    }

    fn room_id(&self, place: Place) -> Uuid {
        self.rooms[&place]
    }

    /// The policy of a case, as the API takes it and as the core reads it.
    fn policy(&self, case: &Case) -> (Value, Policy) {
        let mut triggers = Vec::new();
        if case.questions_trigger {
            triggers.push("questions");
        }
        if case.messages_trigger {
            triggers.push("messages");
        }
        let senders: Vec<IdentityNumber> = case
            .senders
            .iter()
            .map(|who| self.user(*who).number())
            .collect();
        let rooms: Vec<Uuid> = case.rooms.iter().map(|place| self.rooms[place]).collect();
        let wire = json!({
            "triggers": triggers,
            "allowedSenders": senders,
            "allowedRooms": rooms,
            "concurrency": 64,
            "maxCallsPerHour": 100000,
        });
        let policy = Policy::parse(&wire.to_string()).expect("a valid policy");
        (wire, policy)
    }

    /// Sends the case's messages; returns their ids.
    async fn send(&self, case: &Case) -> Vec<Uuid> {
        let mut ids = Vec::new();
        for (i, message) in case.messages.iter().enumerate() {
            let new = NewMessage {
                to: None,
                room_id: Some(self.rooms[&message.place]),
                message_id: None,
                body: MessageBody::Text(format!("message {i}")),
                ask: message.ask,
                deadline: message
                    .ask
                    .then_some(time::macros::datetime!(2099-01-01 00:00 UTC)),
                reply_to: None,
            };
            let id = self
                .bot
                .store
                .send_message(&self.user(message.who).caller(), new, |_, _| Ok(()))
                .await
                .expect("send")
                .0
                .message_id;
            if message.by_runtime {
                self.bot
                    .execute(&format!(
                        "UPDATE messages SET by_runtime = true, runtime_id = '{}' WHERE id = '{id}'",
                        self.runtime
                    ))
                    .await;
            }
            if message.deadline_passed {
                self.bot
                    .execute(&format!(
                        "UPDATE messages SET deadline = now() - interval '1 minute' WHERE id = '{id}'"
                    ))
                    .await;
            }
            ids.push(id);
        }
        ids
    }

    /// What the core says about one message under `policy`: no job (the
    /// scan's trigger under `scanned_with`), granted, or skipped and why.
    fn expected(
        &self,
        scanned_with: &Policy,
        policy: &Policy,
        message: &Message,
    ) -> Option<Result<(), SkipReason>> {
        let facts = MessageFacts {
            from_self: message.who == Who::Agent,
            ask: message.ask,
            by_runtime: message.by_runtime,
        };
        if !scanned_with.triggers_on(&facts) {
            return None;
        }
        let now = OffsetDateTime::now_utc();
        let deadline = message.ask.then(|| {
            if message.deadline_passed {
                now - time::Duration::minutes(1)
            } else {
                now + time::Duration::days(3650)
            }
        });
        let job = JobFacts {
            canceled: false,
            member: true,
            sender_blocked: message.who == Who::Carol,
            room_id: self.room_id(message.place),
            sender: Some(self.user(message.who).number()),
            message: facts,
            deadline,
        };
        Some(policy.judge(&job, now))
    }

    async fn run(&self, case: &Case) {
        let bot = &self.bot;
        // Phase one: scan with both triggers outside the active hours, so
        // jobs are made but none is judged yet.
        let now = OffsetDateTime::now_utc();
        let start = (u16::from(now.hour()) + 2) % 24;
        let window = format!("{start:02}:00-{:02}:00", (start + 1) % 24);
        let scan_policy = json!({
            "triggers": ["questions", "messages"],
            "concurrency": 64,
            "maxCallsPerHour": 100000,
            "activeHoursUTC": [window],
        });
        let scanned_with = Policy::parse(&scan_policy.to_string()).expect("policy");
        self.configure(scanned_with.clone()).await;
        let ids = self.send(case).await;
        let idle = bot.claim(self.runtime, 64).await;
        assert!(idle.jobs.is_empty(), "{idle:?}");

        // Phase two: the case's policy judges the jobs.
        let (wire, policy) = self.policy(case);
        self.configure(policy.clone()).await;
        let mut granted: Vec<ClaimedJob> = Vec::new();
        loop {
            let claim = bot.claim(self.runtime, 64).await;
            let more = claim.more_pending;
            let empty = claim.jobs.is_empty();
            granted.extend(claim.jobs);
            if empty && !more {
                break;
            }
        }
        let granted_ids: HashSet<Uuid> = granted.iter().map(|job| job.message.message_id).collect();
        let log = bot
            .store
            .runtime_log(&bot.agent.caller(), self.runtime, Some(100))
            .await
            .expect("the log");
        let skips: HashMap<Uuid, String> = log
            .iter()
            .filter(|record| record.kind == "skipped")
            .filter_map(|record| {
                Some((
                    record.message_id?,
                    record.detail["reason"].as_str()?.to_owned(),
                ))
            })
            .collect();
        for (message, id) in case.messages.iter().zip(&ids) {
            let expected = self.expected(&scanned_with, &policy, message);
            let context = format!("{message:?} under {wire}");
            match expected {
                None => {
                    assert!(!granted_ids.contains(id), "granted untriggered {context}");
                    assert!(!skips.contains_key(id), "skipped untriggered {context}");
                }
                Some(Ok(())) => {
                    assert!(granted_ids.contains(id), "not granted: {context}");
                    assert!(!skips.contains_key(id), "granted and skipped: {context}");
                }
                Some(Err(reason)) => {
                    assert!(
                        !granted_ids.contains(id),
                        "granted, core says {reason}: {context}"
                    );
                    assert_eq!(
                        skips.get(id).map(String::as_str),
                        Some(reason.as_str()),
                        "{context}"
                    );
                }
            }
        }
        // Done with the granted jobs, so the next case may configure.
        for job in &granted {
            let skip = JobResult {
                skip: Some("done".to_owned()),
                ..JobResult::default()
            };
            bot.finish(self.runtime, job, skip).await.expect("finished");
        }
    }

    /// Replaces the policy at the current configuration version.
    async fn configure(&self, policy: Policy) {
        let version = self.bot.inspect(self.runtime).await.version;
        self.bot
            .store
            .configure_runtime(self.bot.agent.id(), self.runtime, version, policy)
            .await
            .expect("configure");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_claim_grants_and_skips_what_policy_judge_says_for_random_policies_and_messages() {
    let world = World::new().await;
    let mut runner = TestRunner::new(Config::with_cases(CASES));
    let strategy = case();
    for _ in 0..CASES {
        let case = strategy
            .new_tree(&mut runner)
            .expect("a generated case")
            .current();
        world.run(&case).await;
    }
}
