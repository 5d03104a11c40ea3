//! A runtime's policy: which messages wake it, from whom, how often, when.
//!
//! Policies are written by hand (`--policy ./policy.json`) and a mistake
//! there costs money or silently drops questions, so parsing is strict: an
//! unknown or misspelled field, a wrong type, an out-of-range number, a
//! duplicate key or a duplicate list entry is an error that names the field.
//! Fields that are not given take the defaults of the product page.
//!
//! The server stores the [`Policy::normalized`] form and compares
//! [`Policy::fingerprint`]s to decide whether a later registration presents
//! "the same policy", so list order never causes a configuration conflict.

use std::collections::HashSet;
use std::fmt;
use std::hash::Hash;
use std::str::FromStr;

use ring::digest::{SHA256, digest};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Value, json};
use time::{Duration, OffsetDateTime, Time, UtcOffset};
use uuid::Uuid;

use crate::canonical::{StrictFailure, StrictJsonError, canonical_json, deserialize_strict_object};
use crate::ids::IdentityNumber;
use crate::lease::hex_lower;

mod judge;
pub use judge::{JobFacts, SkipReason};

const TRIGGERS: &str = "triggers";
const ALLOWED_SENDERS: &str = "allowedSenders";
const ALLOWED_ROOMS: &str = "allowedRooms";
const MAX_ATTEMPTS: &str = "maxAttempts";
const MAX_CALLS_PER_HOUR: &str = "maxCallsPerHour";
const CONCURRENCY: &str = "concurrency";
const ACTIVE_HOURS_UTC: &str = "activeHoursUTC";
const FIELDS: [&str; 7] = [
    TRIGGERS,
    ALLOWED_SENDERS,
    ALLOWED_ROOMS,
    MAX_ATTEMPTS,
    MAX_CALLS_PER_HOUR,
    CONCURRENCY,
    ACTIVE_HOURS_UTC,
];

/// Allowed ranges, inclusive.
const MAX_ATTEMPTS_RANGE: (u32, u32) = (1, 20);
const MAX_CALLS_PER_HOUR_RANGE: (u32, u32) = (1, 100_000);
const CONCURRENCY_RANGE: (u32, u32) = (1, 64);

/// Why a policy was refused. Messages are meant for the operator who wrote
/// the file, so each names the field and what would be accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// The text is not JSON; `message` carries the line and column.
    #[error("the policy is not valid JSON: {message}")]
    InvalidJson { message: String },
    /// Valid JSON, but not an object.
    #[error("the policy must be a JSON object, found {found}")]
    NotAnObject { found: &'static str },
    /// One top-level field is wrong (or unknown, or repeated).
    #[error("policy field `{field}`: {problem}")]
    Field { field: String, problem: String },
}

impl PolicyError {
    /// The top-level policy field at fault, or `""` when the document as a
    /// whole is unusable (not JSON, not an object).
    pub fn field(&self) -> &str {
        match self {
            PolicyError::Field { field, .. } => field,
            PolicyError::InvalidJson { .. } | PolicyError::NotAnObject { .. } => "",
        }
    }

    fn field_problem(field: &str, problem: impl Into<String>) -> Self {
        PolicyError::Field {
            field: field.to_owned(),
            problem: problem.into(),
        }
    }

    fn duplicate_key(path: &[String], key: String) -> Self {
        match path.split_first() {
            None => PolicyError::field_problem(&key, "is given more than once"),
            Some((field, _)) => PolicyError::field_problem(
                field,
                format!("key `{key}` appears more than once in `{}`", path.join(".")),
            ),
        }
    }
}

impl From<StrictJsonError> for PolicyError {
    fn from(error: StrictJsonError) -> Self {
        match error {
            StrictJsonError::Syntax { message } => PolicyError::InvalidJson { message },
            StrictJsonError::NotAnObject { found } => PolicyError::NotAnObject { found },
            StrictJsonError::DuplicateKey { path, key } => PolicyError::duplicate_key(&path, key),
        }
    }
}

/// What kind of message wakes the runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum Trigger {
    /// An ask (`send --ask`) from anyone but the agent itself.
    Questions,
    /// Any message from anyone but the agent, except replies written by a
    /// runtime, so two bots never answer each other forever.
    Messages,
}

impl Trigger {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Questions => "questions",
            Trigger::Messages => "messages",
        }
    }

    fn parse(name: &str) -> Option<Self> {
        match name {
            "questions" => Some(Trigger::Questions),
            "messages" => Some(Trigger::Messages),
            _ => None,
        }
    }

    fn matches(self, facts: &MessageFacts) -> bool {
        match self {
            Trigger::Questions => facts.ask,
            Trigger::Messages => !facts.by_runtime,
        }
    }
}

impl fmt::Display for Trigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A daily UTC window `"HH:MM-HH:MM"`: the start minute is inside, the end
/// minute is not, and a start after the end wraps past midnight
/// (`"22:00-06:00"`). Minutes, not seconds, because that is how people write
/// office hours.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ActiveHours {
    start_minute: u16,
    end_minute: u16,
}

impl ActiveHours {
    /// Reads `"HH:MM-HH:MM"` with two-digit hours 00-23 and minutes 00-59.
    pub fn parse(text: &str) -> Result<Self, PolicyError> {
        ActiveHours::parse_window(text)
            .map_err(|problem| PolicyError::field_problem(ACTIVE_HOURS_UTC, problem))
    }

    fn parse_window(text: &str) -> Result<Self, String> {
        let malformed =
            || format!("{text:?} is not a window like \"09:00-17:30\" (HH:MM-HH:MM in UTC)");
        let (start, end) = text.split_once('-').ok_or_else(malformed)?;
        let start_minute = parse_clock(start).ok_or_else(malformed)?;
        let end_minute = parse_clock(end).ok_or_else(malformed)?;
        if start_minute == end_minute {
            return Err(format!(
                "{text:?} starts and ends at the same minute; \
                 leave activeHoursUTC empty to be active all day"
            ));
        }
        Ok(ActiveHours {
            start_minute,
            end_minute,
        })
    }

    /// Whether the minute of the UTC day (0 = 00:00) lies in the window.
    fn contains(self, minute_of_day: u16) -> bool {
        if self.start_minute < self.end_minute {
            (self.start_minute..self.end_minute).contains(&minute_of_day)
        } else {
            minute_of_day >= self.start_minute || minute_of_day < self.end_minute
        }
    }
}

/// `"HH:MM"` to the minute of the day; exactly two digits each.
fn parse_clock(text: &str) -> Option<u16> {
    let bytes = text.as_bytes();
    let [h1, h2, b':', m1, m2] = *bytes else {
        return None;
    };
    let digit = |byte: u8| byte.is_ascii_digit().then(|| u16::from(byte - b'0'));
    let hours = digit(h1)? * 10 + digit(h2)?;
    let minutes = digit(m1)? * 10 + digit(m2)?;
    (hours < 24 && minutes < 60).then_some(hours * 60 + minutes)
}

impl fmt::Display for ActiveHours {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:02}:{:02}-{:02}:{:02}",
            self.start_minute / 60,
            self.start_minute % 60,
            self.end_minute / 60,
            self.end_minute % 60
        )
    }
}

impl FromStr for ActiveHours {
    type Err = PolicyError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        ActiveHours::parse(text)
    }
}

impl Serialize for ActiveHours {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ActiveHours {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        ActiveHours::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// The facts about one message that decide whether a policy triggers on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MessageFacts {
    /// Sent by the runtime's own agent identity.
    pub from_self: bool,
    /// Sent as a question (`--ask`).
    pub ask: bool,
    /// Written by a runtime (a bot's reply).
    pub by_runtime: bool,
}

/// A runtime's policy. Fields are public so callers can build one in code;
/// [`Policy::validate`] checks such a value, and [`Policy::parse`] and the
/// `Deserialize` impl never produce an invalid one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Policy {
    /// Never empty; any one matching trigger makes a job.
    pub triggers: Vec<Trigger>,
    /// Empty: anyone who can reach the agent.
    pub allowed_senders: Vec<IdentityNumber>,
    /// Empty: every room the token can see.
    pub allowed_rooms: Vec<Uuid>,
    /// Attempts before a job becomes a dead letter.
    pub max_attempts: u32,
    /// Granted leases per rolling hour; the cost cap.
    pub max_calls_per_hour: u32,
    /// Active leases at once, across all processes of the runtime.
    pub concurrency: u32,
    /// Empty: active around the clock.
    #[serde(rename = "activeHoursUTC")]
    pub active_hours_utc: Vec<ActiveHours>,
}

impl Default for Policy {
    /// The product page's defaults: answer questions from anyone, anywhere,
    /// any time, one at a time, at most 60 calls an hour, 3 attempts.
    fn default() -> Self {
        Policy {
            triggers: vec![Trigger::Questions],
            allowed_senders: Vec::new(),
            allowed_rooms: Vec::new(),
            max_attempts: 3,
            max_calls_per_hour: 60,
            concurrency: 1,
            active_hours_utc: Vec::new(),
        }
    }
}

impl Policy {
    /// Parses a policy file strictly; missing fields take the defaults.
    pub fn parse(text: &str) -> Result<Policy, PolicyError> {
        let members = crate::canonical::parse_strict_object(text)?;
        Policy::from_members(members)
    }

    fn from_members(members: Vec<(String, Value)>) -> Result<Policy, PolicyError> {
        let mut policy = Policy::default();
        // The strict reader already refused repeated keys, so each arm runs
        // at most once.
        for (name, value) in members {
            match name.as_str() {
                TRIGGERS => policy.triggers = read_list(TRIGGERS, &value, read_trigger)?,
                ALLOWED_SENDERS => {
                    policy.allowed_senders = read_list(ALLOWED_SENDERS, &value, read_sender)?;
                }
                ALLOWED_ROOMS => {
                    policy.allowed_rooms = read_list(ALLOWED_ROOMS, &value, read_room)?
                }
                ACTIVE_HOURS_UTC => {
                    policy.active_hours_utc =
                        read_list(ACTIVE_HOURS_UTC, &value, ActiveHours::parse_window)?;
                }
                MAX_ATTEMPTS => {
                    policy.max_attempts = read_integer(MAX_ATTEMPTS, &value, MAX_ATTEMPTS_RANGE)?;
                }
                MAX_CALLS_PER_HOUR => {
                    policy.max_calls_per_hour =
                        read_integer(MAX_CALLS_PER_HOUR, &value, MAX_CALLS_PER_HOUR_RANGE)?;
                }
                CONCURRENCY => {
                    policy.concurrency = read_integer(CONCURRENCY, &value, CONCURRENCY_RANGE)?;
                }
                unknown => return Err(unknown_field(unknown)),
            }
        }
        policy.validate()?;
        Ok(policy)
    }

    /// Checks the rules that a value built in code could break: ranges,
    /// at least one trigger, no entry listed twice.
    pub fn validate(&self) -> Result<(), PolicyError> {
        if self.triggers.is_empty() {
            return Err(PolicyError::field_problem(
                TRIGGERS,
                "must list at least one of \"questions\" and \"messages\"",
            ));
        }
        reject_repeats(TRIGGERS, &self.triggers)?;
        reject_repeats(ALLOWED_SENDERS, &self.allowed_senders)?;
        reject_repeats(ALLOWED_ROOMS, &self.allowed_rooms)?;
        reject_repeats(ACTIVE_HOURS_UTC, &self.active_hours_utc)?;
        check_range(MAX_ATTEMPTS, self.max_attempts, MAX_ATTEMPTS_RANGE)?;
        check_range(
            MAX_CALLS_PER_HOUR,
            self.max_calls_per_hour,
            MAX_CALLS_PER_HOUR_RANGE,
        )?;
        check_range(CONCURRENCY, self.concurrency, CONCURRENCY_RANGE)?;
        Ok(())
    }

    /// The policy with every field written out and every list sorted, so
    /// two policies that mean the same are equal JSON values. This is the
    /// form the server stores and shows.
    pub fn normalized(&self) -> Value {
        let triggers = sorted_unique(self.triggers.iter().map(|trigger| trigger.as_str()));
        let senders = sorted_unique(self.allowed_senders.iter().cloned());
        let rooms = sorted_unique(self.allowed_rooms.iter().copied());
        let windows = sorted_unique(self.active_hours_utc.iter().copied());
        json!({
            TRIGGERS: triggers,
            ALLOWED_SENDERS: senders.iter().map(IdentityNumber::as_str).collect::<Vec<_>>(),
            ALLOWED_ROOMS: rooms.iter().map(|room| room.hyphenated().to_string()).collect::<Vec<_>>(),
            MAX_ATTEMPTS: self.max_attempts,
            MAX_CALLS_PER_HOUR: self.max_calls_per_hour,
            CONCURRENCY: self.concurrency,
            ACTIVE_HOURS_UTC: windows.iter().map(ActiveHours::to_string).collect::<Vec<_>>(),
        })
    }

    /// Lowercase hex SHA-256 of the canonical normalized form: equal for
    /// policies that mean the same, whatever order their lists were in.
    pub fn fingerprint(&self) -> String {
        hex_lower(digest(&SHA256, &canonical_json(&self.normalized())).as_ref())
    }

    /// Whether a message from `sender` may be handled (empty list: anyone).
    pub fn sender_allowed(&self, sender: &IdentityNumber) -> bool {
        self.allowed_senders.is_empty() || self.allowed_senders.contains(sender)
    }

    /// Whether a message in `room` may be handled (empty list: any room).
    pub fn room_allowed(&self, room: &Uuid) -> bool {
        self.allowed_rooms.is_empty() || self.allowed_rooms.contains(room)
    }

    /// Whether the message should become a job at all. The agent's own
    /// messages never do, whatever the triggers.
    pub fn triggers_on(&self, facts: &MessageFacts) -> bool {
        !facts.from_self && self.triggers.iter().any(|trigger| trigger.matches(facts))
    }

    /// Whether `t` falls in one of the active windows (no windows: always).
    pub fn is_active_at(&self, t: OffsetDateTime) -> bool {
        if self.active_hours_utc.is_empty() {
            return true;
        }
        let t = t.to_offset(UtcOffset::UTC);
        let minute_of_day = u16::from(t.hour()) * 60 + u16::from(t.minute());
        self.active_hours_utc
            .iter()
            .any(|window| window.contains(minute_of_day))
    }

    /// When the runtime next becomes active, in UTC, for a claim response's
    /// `retryAt`; `None` when it is active at `t` (or always).
    pub fn next_active_start(&self, t: OffsetDateTime) -> Option<OffsetDateTime> {
        if self.is_active_at(t) {
            return None;
        }
        let t = t.to_offset(UtcOffset::UTC);
        let midnight = t.replace_time(Time::MIDNIGHT);
        self.active_hours_utc
            .iter()
            .filter_map(|window| {
                let today =
                    midnight.checked_add(Duration::minutes(i64::from(window.start_minute)))?;
                // Not active now, so no window starts within the current minute.
                if today > t {
                    Some(today)
                } else {
                    today.checked_add(Duration::DAY)
                }
            })
            .min()
    }
}

impl<'de> Deserialize<'de> for Policy {
    /// Goes through the same strict rules as [`Policy::parse`], including
    /// duplicate keys when the policy arrives inside a request body.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let members = deserialize_strict_object(deserializer).map_err(|failure| match failure {
            StrictFailure::Duplicate { path, key } => {
                D::Error::custom(PolicyError::duplicate_key(&path, key))
            }
            StrictFailure::NotAnObject { found } => {
                D::Error::custom(PolicyError::NotAnObject { found })
            }
            StrictFailure::Other(error) => error,
        })?;
        Policy::from_members(members).map_err(D::Error::custom)
    }
}

fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(flag) => flag.to_string(),
        Value::Number(number) => number.to_string(),
        Value::String(text) if text.chars().count() > 40 => "a long string".to_owned(),
        Value::String(text) => format!("the string {text:?}"),
        Value::Array(_) => "an array".to_owned(),
        Value::Object(_) => "an object".to_owned(),
    }
}

/// Reads an array of strings, each converted by `parse`; the problem text it
/// returns is prefixed with the entry's position.
fn read_list<T>(
    field: &str,
    value: &Value,
    parse: impl Fn(&str) -> Result<T, String>,
) -> Result<Vec<T>, PolicyError> {
    let problem = |text: String| PolicyError::field_problem(field, text);
    let Value::Array(entries) = value else {
        return Err(problem(format!(
            "must be an array of strings, found {}",
            describe(value)
        )));
    };
    let read_entry = |(index, entry): (usize, &Value)| match entry {
        Value::String(text) => parse(text).map_err(|why| problem(format!("entry {index}: {why}"))),
        other => Err(problem(format!(
            "entry {index} must be a string, found {}",
            describe(other)
        ))),
    };
    entries.iter().enumerate().map(read_entry).collect()
}

fn read_trigger(text: &str) -> Result<Trigger, String> {
    Trigger::parse(text)
        .ok_or_else(|| format!("{text:?} is not a trigger; use \"questions\" or \"messages\""))
}

/// Senders are strings even though they are all digits: the product's
/// numbers are text everywhere, and a JSON number would invite rounding.
fn read_sender(text: &str) -> Result<IdentityNumber, String> {
    IdentityNumber::parse(text).map_err(|error| format!("{text:?}: {error}"))
}

/// Rooms are written as hyphenated UUIDs (any case); the other spellings
/// `uuid` accepts (braced, URN, bare hex) are refused so one room has one
/// form in every policy file.
fn read_room(text: &str) -> Result<Uuid, String> {
    match Uuid::try_parse(text) {
        Ok(room) if text.len() == 36 => Ok(room),
        _ => Err(format!(
            "{text:?} is not a room UUID like \"0195f3b2-7c1e-7d2a-9c4b-3e2f1a0b9c8d\""
        )),
    }
}

/// Reads a whole JSON number in range. `3.0` is refused like `3.5`: a
/// policy file that writes a count as a float was not written with care.
fn read_integer(field: &str, value: &Value, range: (u32, u32)) -> Result<u32, PolicyError> {
    // `as_u64` is `None` for every number written with a fraction or an
    // exponent, and for negatives.
    value
        .as_u64()
        .and_then(|whole| u32::try_from(whole).ok())
        .filter(|whole| (range.0..=range.1).contains(whole))
        .ok_or_else(|| out_of_range(field, range, &describe(value)))
}

fn check_range(field: &str, value: u32, range: (u32, u32)) -> Result<(), PolicyError> {
    if (range.0..=range.1).contains(&value) {
        Ok(())
    } else {
        Err(out_of_range(field, range, &value.to_string()))
    }
}

fn out_of_range(field: &str, (low, high): (u32, u32), found: &str) -> PolicyError {
    PolicyError::field_problem(
        field,
        format!("must be an integer from {low} to {high}, found {found}"),
    )
}

fn reject_repeats<T: Eq + Hash + fmt::Display>(
    field: &str,
    entries: &[T],
) -> Result<(), PolicyError> {
    let mut seen = HashSet::with_capacity(entries.len());
    match entries.iter().find(|entry| !seen.insert(*entry)) {
        Some(repeated) => Err(PolicyError::field_problem(
            field,
            format!("\"{repeated}\" is listed more than once"),
        )),
        None => Ok(()),
    }
}

fn sorted_unique<T: Ord>(entries: impl Iterator<Item = T>) -> Vec<T> {
    let mut entries: Vec<T> = entries.collect();
    entries.sort();
    entries.dedup();
    entries
}

fn unknown_field(name: &str) -> PolicyError {
    let suggestion = FIELDS
        .iter()
        .find(|known| edit_distance(&known.to_lowercase(), &name.to_lowercase()) <= 2);
    let problem = match suggestion {
        Some(known) => format!("is not a policy field; did you mean `{known}`?"),
        None => format!(
            "is not a policy field; the fields are `{}`",
            FIELDS.join("`, `")
        ),
    };
    PolicyError::field_problem(name, problem)
}

/// Levenshtein distance, for "did you mean" on misspelled field names.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, a_char) in a.chars().enumerate() {
        let mut current = Vec::with_capacity(b.len() + 1);
        current.push(i + 1);
        for (j, b_char) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(a_char != *b_char);
            current.push(substitution.min(previous[j + 1] + 1).min(current[j] + 1));
        }
        previous = current;
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests;
