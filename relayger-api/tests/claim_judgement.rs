//! Random policies × random messages: what a claim grants and what it
//! records as a skip (with which reason) is exactly what the core's
//! `Policy::judge` says about the facts the claim's SQL gathers (sender,
//! room, question or not, written by a runtime, the deadline, a block
//! between the agent and the sender). The scan's trigger check is the
//! core's too: a message it did not trigger on has no job at all.

use crate::common;

use std::collections::{HashMap, HashSet};

use common::User;
use common::bot::Bot;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, TestRunner};
use relayger_core::ids::IdentityNumber;
use relayger_core::policy::{JobFacts, MessageFacts, Policy, SkipReason};
use serde_json::{Value, json};
use time::OffsetDateTime;
use uuid::Uuid;

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
    bot: Bot,
    alice: User,
    bob: User,
    carol: User,
    rooms: HashMap<Place, String>,
    runtime: String,
}

impl World {
    async fn new() -> World {
        let bot = Bot::start().await;
        let (alice, alice_room) = bot.contact("alice").await;
        let (bob, bob_room) = bot.contact("bob").await;
        let (carol, _) = bot.contact("carol").await;
        bot.server.befriend(&carol, &alice).await;
        bot.server.befriend(&carol, &bob).await;
        let group = bot
            .server
            .create_room(
                &carol,
                "all",
                json!([bot.agent.number, alice.number, bob.number]),
            )
            .await
            .ok()["id"]
            .as_str()
            .expect("room id")
            .to_owned();
        bot.server.block(&bot.agent, &carol).await.ok();
        let runtime = bot.runtime("judged", "now", json!({})).await;
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
        Uuid::parse_str(&self.rooms[&place]).expect("room uuid")
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
        let senders: Vec<&str> = case
            .senders
            .iter()
            .map(|who| self.user(*who).number.as_str())
            .collect();
        let rooms: Vec<&str> = case
            .rooms
            .iter()
            .map(|place| self.rooms[place].as_str())
            .collect();
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
    async fn send(&self, case: &Case) -> Vec<String> {
        let mut ids = Vec::new();
        for (i, message) in case.messages.iter().enumerate() {
            let mut body = json!({
                "roomId": self.rooms[&message.place],
                "text": format!("message {i}"),
                "ask": message.ask,
            });
            if message.ask {
                body["deadline"] = json!("2099-01-01T00:00:00Z");
            }
            let sent = self.bot.server.send(self.user(message.who), body).await;
            let id = sent["messageId"].as_str().expect("id").to_owned();
            if message.by_runtime {
                self.bot
                    .server
                    .execute(&format!(
                        "UPDATE messages SET by_runtime = true, runtime_id = '{}' WHERE id = '{id}'",
                        self.runtime
                    ))
                    .await;
            }
            if message.deadline_passed {
                self.bot
                    .server
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
            member: true,
            sender_blocked: message.who == Who::Carol,
            room_id: self.room_id(message.place),
            sender: Some(IdentityNumber::parse(&self.user(message.who).number).expect("number")),
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
        bot.configure(&self.runtime, scan_policy).await;
        let ids = self.send(case).await;
        let idle = bot.claim(&self.runtime, 64).await.ok();
        assert!(idle["jobs"].as_array().expect("jobs").is_empty(), "{idle}");

        // Phase two: the case's policy judges the jobs.
        let (wire, policy) = self.policy(case);
        bot.configure(&self.runtime, wire.clone()).await;
        let mut granted: Vec<Value> = Vec::new();
        loop {
            let claim = bot.claim(&self.runtime, 64).await.ok();
            let jobs = claim["jobs"].as_array().expect("jobs").clone();
            let more = claim["morePending"] == true;
            let empty = jobs.is_empty();
            granted.extend(jobs);
            if empty && !more {
                break;
            }
        }
        let granted_ids: HashSet<String> = granted
            .iter()
            .map(|job| job["message"]["messageId"].as_str().expect("id").to_owned())
            .collect();
        let log = bot.log(&self.runtime, Some(100)).await;
        let skips: HashMap<String, String> = log
            .iter()
            .filter(|record| record["kind"] == "skipped")
            .filter_map(|record| {
                Some((
                    record["messageId"].as_str()?.to_owned(),
                    record["detail"]["reason"].as_str()?.to_owned(),
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
            bot.server
                .finish_job(
                    &bot.agent.token,
                    &self.runtime,
                    job,
                    json!({"skip": "done"}),
                )
                .await
                .ok();
        }
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
