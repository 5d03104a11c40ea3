//! Leases and fencing: who may heartbeat or finish a claimed job, and when.
//!
//! A claim hands out a random owner and a version from one global database
//! sequence. Every later lease write presents both, and the store checks them
//! against the row in the same statement that writes it, so an owner that
//! lost its lease (crash, network partition, expiry) can never write again.
//!
//! **The fence** ([`LeaseFence::admits`]) is one rule with one clock: a
//! lease write is admitted when the job is claimed by the presented owner
//! under the presented version and its expiry is later than the database
//! clock *at the moment the job row is locked* for the write. A heartbeat,
//! a release and a finish are judged alike, so one that waited for the row
//! lock past the lease's end is refused whatever it writes. The store runs
//! the rule as one SQL function (`relayger_lease_fence`, added by a
//! migration) inside each writing statement; a store test checks the
//! function against this rule.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use time::OffsetDateTime;

use crate::job::JobState;

/// The lease a claim gets unless the server is started with `--lease-ms`.
pub const DEFAULT_LEASE_MS: u64 = 30_000;
/// Shorter leases would expire between two heartbeats on an ordinary network.
pub const MIN_LEASE_MS: u64 = 1_000;
/// An hour: long leases only delay recovery after a crash, and the cap keeps
/// every expiry computation far away from overflow.
pub const MAX_LEASE_MS: u64 = 3_600_000;

/// The heartbeat period for a lease: a third of it, so two heartbeats can be
/// lost before the lease ends (10 s for the default 30 s).
pub fn heartbeat_interval_ms(lease_ms: u64) -> u64 {
    lease_ms / 3
}

/// How long a claim waits for its runtime's row lock before it answers
/// "busy, retry" (`lock_timeout` in its transaction): a third of the lease
/// it grants. The worker counts a lease from the claim's send, so a grant
/// made after a longer wait (the row held by another claim, or by a server
/// cut from the database until PostgreSQL ends its session) would leave
/// the worker too little of it, or none.
pub fn claim_lock_wait_ms(lease_ms: u64) -> u64 {
    lease_ms / 3
}

/// How often a worker whose handler gets `stop_ms` to stop heartbeats: a
/// third of the lease, and at most a third of its local run limit
/// ([`local_run_limit_ms`]), the window in which a renewal must come back.
/// A heartbeat may then take up to two periods to answer (or one be lost)
/// before the handler must stop. For a short lease the run limit is the
/// narrower window: with 3 s and a second to stop, a third of the lease
/// left one period (1 s) for a round trip under load, so a slow link lost
/// leases; every 666 ms leaves 1.3 s.
pub fn worker_heartbeat_ms(lease_ms: u64, stop_ms: u64) -> u64 {
    heartbeat_interval_ms(lease_ms).min(local_run_limit_ms(lease_ms, stop_ms) / 3)
}

/// How long after sending the request that started or renewed a lease the
/// worker may let its handler run: the lease's length minus the time the
/// handler gets to stop (`stop_ms`), that time capped at a third of the
/// lease so that a heartbeat may still be lost before it. The server's
/// expiry is measured from when it handled the request, which is later
/// than the send, so a handler cancelled at this point has stopped before
/// another owner can take the job.
pub fn local_run_limit_ms(lease_ms: u64, stop_ms: u64) -> u64 {
    lease_ms.saturating_sub(stop_ms.min(lease_ms / 3))
}

/// Checks a configured lease length.
pub fn validate_lease_ms(lease_ms: u64) -> Result<u64, LeaseError> {
    if (MIN_LEASE_MS..=MAX_LEASE_MS).contains(&lease_ms) {
        Ok(lease_ms)
    } else {
        Err(LeaseError::LeaseMsOutOfRange { lease_ms })
    }
}

/// Problems with lease settings and lease tokens.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LeaseError {
    /// `--lease-ms` outside [`MIN_LEASE_MS`]..=[`MAX_LEASE_MS`].
    #[error("the lease must be from {MIN_LEASE_MS} to {MAX_LEASE_MS} milliseconds, got {lease_ms}")]
    LeaseMsOutOfRange { lease_ms: u64 },
    /// The operating system's random source failed; no owner can be minted.
    #[error("the system random source is unavailable")]
    RandomUnavailable,
    /// A presented owner that [`LeaseOwner::generate`] could not have made.
    #[error("a lease owner is exactly 32 lowercase hexadecimal characters")]
    InvalidOwner,
    /// A presented version that is not the 20-digit form (or is negative).
    #[error("a lease version is exactly 20 decimal digits")]
    InvalidVersion,
}

/// The random owner of one claim: 128 bits, so guessing another process's
/// owner is hopeless and two claims never collide.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LeaseOwner(String);

impl LeaseOwner {
    /// Mints a fresh owner from the operating system's random source.
    pub fn generate() -> Result<Self, LeaseError> {
        let mut bytes = [0_u8; 16];
        crate::random::fill(&mut bytes).map_err(|_| LeaseError::RandomUnavailable)?;
        Ok(LeaseOwner(hex_lower(&bytes)))
    }

    /// Accepts exactly 32 lowercase hex characters, the only form
    /// [`generate`](Self::generate) writes, so one owner has one spelling.
    pub fn parse(text: &str) -> Result<Self, LeaseError> {
        let well_formed = text.len() == 32
            && text
                .bytes()
                .all(|byte| matches!(byte, b'0'..=b'9' | b'a'..=b'f'));
        if well_formed {
            Ok(LeaseOwner(text.to_owned()))
        } else {
            Err(LeaseError::InvalidOwner)
        }
    }

    /// The hex text, as stored and sent.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

pub(crate) fn hex_lower(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        text.push(char::from(HEX[usize::from(byte >> 4)]));
        text.push(char::from(HEX[usize::from(byte & 0x0F)]));
    }
    text
}

impl fmt::Display for LeaseOwner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for LeaseOwner {
    type Err = LeaseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        LeaseOwner::parse(text)
    }
}

impl Serialize for LeaseOwner {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for LeaseOwner {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        LeaseOwner::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// The fencing token of one claim, taken from one global, increasing
/// database sequence. On the wire it is a zero-padded 20-digit string (room
/// for every `u64`), so it sorts correctly as text in any client language and
/// never loses precision in a JavaScript number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LeaseVersion(pub u64);

impl LeaseVersion {
    /// Accepts exactly 20 ASCII digits whose value fits in a `u64`.
    pub fn parse(text: &str) -> Result<Self, LeaseError> {
        if text.len() != 20 || !text.bytes().all(|byte| byte.is_ascii_digit()) {
            return Err(LeaseError::InvalidVersion);
        }
        text.parse::<u64>()
            .map(LeaseVersion)
            .map_err(|_| LeaseError::InvalidVersion)
    }
}

impl TryFrom<i64> for LeaseVersion {
    type Error = LeaseError;

    /// PostgreSQL sequences are `bigint`; a negative value is corrupt data.
    fn try_from(value: i64) -> Result<Self, Self::Error> {
        u64::try_from(value)
            .map(LeaseVersion)
            .map_err(|_| LeaseError::InvalidVersion)
    }
}

impl fmt::Display for LeaseVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:020}", self.0)
    }
}

impl FromStr for LeaseVersion {
    type Err = LeaseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        LeaseVersion::parse(text)
    }
}

impl Serialize for LeaseVersion {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for LeaseVersion {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        LeaseVersion::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// What a claimant presents with every heartbeat and finish.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LeaseFence {
    /// The random owner handed out with the claim.
    pub owner: LeaseOwner,
    /// The version handed out with the claim.
    pub version: LeaseVersion,
}

/// A job's lease as the store holds it, read under the job row's lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeldLease<'a> {
    pub state: JobState,
    pub owner: Option<&'a str>,
    pub version: Option<u64>,
    pub expires_at: Option<OffsetDateTime>,
}

impl LeaseFence {
    /// Whether this owner and version may write the job's lease now:
    /// `locked_at` is the database clock when the job row was locked for
    /// the write (never the start of the statement or transaction).
    pub fn admits(&self, held: &HeldLease<'_>, locked_at: OffsetDateTime) -> bool {
        held.state == JobState::Claimed
            && held.owner == Some(self.owner.as_str())
            && held.version == Some(self.version.0)
            && held
                .expires_at
                .is_some_and(|expires_at| expires_at > locked_at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_waits_for_its_runtime_a_third_of_the_lease_it_grants() {
        for (lease_ms, wait_ms) in [
            (30_000, 10_000),
            (3_000, 1_000),
            (1_000, 333),
            (MIN_LEASE_MS, 333),
        ] {
            assert_eq!(claim_lock_wait_ms(lease_ms), wait_ms, "{lease_ms}");
            // What a worker has left of the lease, counted from its send,
            // after the longest wait: two thirds of it at least.
            assert!(lease_ms - claim_lock_wait_ms(lease_ms) >= lease_ms * 2 / 3);
        }
    }

    const OWNER_A: &str = "0123456789abcdef0123456789abcdef";

    fn owner(text: &str) -> LeaseOwner {
        LeaseOwner::parse(text).expect("valid owner")
    }

    #[test]
    fn the_fence_admits_only_the_current_owner_before_expiry_at_lock_time() {
        let locked_at = time::macros::datetime!(2026-12-07 12:00:00 UTC);
        let fence = LeaseFence {
            owner: owner(OWNER_A),
            version: LeaseVersion(7),
        };
        let other = "fedcba9876543210fedcba9876543210";
        let ms = time::Duration::milliseconds;
        /// (case, state, owner, version, expiry after the lock, admitted)
        type Case<'a> = (
            &'a str,
            JobState,
            Option<&'a str>,
            Option<u64>,
            Option<time::Duration>,
            bool,
        );
        let table: [Case; 9] = [
            (
                "held and unexpired",
                JobState::Claimed,
                Some(OWNER_A),
                Some(7),
                Some(ms(1)),
                true,
            ),
            (
                "expired exactly at the lock",
                JobState::Claimed,
                Some(OWNER_A),
                Some(7),
                Some(ms(0)),
                false,
            ),
            (
                "expired while waiting for the lock",
                JobState::Claimed,
                Some(OWNER_A),
                Some(7),
                Some(ms(-1)),
                false,
            ),
            (
                "another owner",
                JobState::Claimed,
                Some(other),
                Some(7),
                Some(ms(1)),
                false,
            ),
            (
                "re-claimed under a newer version",
                JobState::Claimed,
                Some(OWNER_A),
                Some(8),
                Some(ms(1)),
                false,
            ),
            (
                "an older version",
                JobState::Claimed,
                Some(OWNER_A),
                Some(6),
                Some(ms(1)),
                false,
            ),
            (
                "back to pending",
                JobState::Pending,
                None,
                None,
                None,
                false,
            ),
            (
                "already handled",
                JobState::Handled,
                None,
                None,
                None,
                false,
            ),
            (
                "a claimed row without expiry",
                JobState::Claimed,
                Some(OWNER_A),
                Some(7),
                None,
                false,
            ),
        ];
        for (case, state, held_owner, version, expires_in, admitted) in table {
            let held = HeldLease {
                state,
                owner: held_owner,
                version,
                expires_at: expires_in.map(|d| locked_at + d),
            };
            assert_eq!(fence.admits(&held, locked_at), admitted, "{case}");
        }
    }

    #[test]
    fn local_run_limit_keeps_time_to_stop_before_the_lease_ends() {
        let table = [
            // (lease, time to stop, run limit)
            (30_000, 1_000, 29_000),
            (30_000, 10_000, 20_000),
            // The time to stop is capped at a third of the lease.
            (3_000, 10_000, 2_000),
            (2_000, 1_000, 1_334),
            (1_000, 1_000, 667),
            (30_000, 0, 30_000),
            (0, 1_000, 0),
        ];
        for (lease_ms, stop_ms, limit) in table {
            assert_eq!(
                local_run_limit_ms(lease_ms, stop_ms),
                limit,
                "lease {lease_ms}, stop {stop_ms}"
            );
            assert!(limit > heartbeat_interval_ms(lease_ms) || lease_ms == 0);
        }
    }

    #[test]
    fn a_worker_heartbeats_three_times_within_its_run_limit() {
        let table = [
            // (lease, time to stop, heartbeat period)
            (30_000, 1_000, 9_666),
            (30_000, 10_000, 6_666),
            (30_000, 0, 10_000),
            (3_000, 1_000, 666),
            (3_000, 10_000, 666),
            (1_000, 1_000, 222),
            (0, 1_000, 0),
        ];
        for (lease_ms, stop_ms, every) in table {
            assert_eq!(
                worker_heartbeat_ms(lease_ms, stop_ms),
                every,
                "lease {lease_ms}, stop {stop_ms}"
            );
            assert!(every <= heartbeat_interval_ms(lease_ms));
            // A renewal may take two periods and still come back before
            // the handler must stop.
            assert!(every * 3 <= local_run_limit_ms(lease_ms, stop_ms));
        }
    }

    #[test]
    fn lease_length_rules() {
        assert_eq!(heartbeat_interval_ms(DEFAULT_LEASE_MS), 10_000);
        assert_eq!(heartbeat_interval_ms(MIN_LEASE_MS), 333);
        let table = [
            (0, false),
            (999, false),
            (1_000, true),
            (30_000, true),
            (3_600_000, true),
            (3_600_001, false),
            (u64::MAX, false),
        ];
        for (lease_ms, ok) in table {
            let result = validate_lease_ms(lease_ms);
            assert_eq!(result.is_ok(), ok, "{lease_ms}");
            if ok {
                assert_eq!(result, Ok(lease_ms));
            }
        }
    }

    #[test]
    fn generated_owners_are_well_formed_and_distinct() {
        let a = LeaseOwner::generate().expect("random");
        let b = LeaseOwner::generate().expect("random");
        assert_ne!(a, b);
        for generated in [&a, &b] {
            assert_eq!(
                LeaseOwner::parse(generated.as_str()).as_ref(),
                Ok(generated)
            );
        }
    }

    #[test]
    fn owner_parse_table() {
        let table = [
            (OWNER_A, true),
            ("00000000000000000000000000000000", true),
            ("0123456789ABCDEF0123456789abcdef", false),
            ("0123456789abcdef0123456789abcde", false),
            ("0123456789abcdef0123456789abcdef0", false),
            ("0123456789abcdef0123456789abcdeg", false),
            ("", false),
            (" 123456789abcdef0123456789abcdef", false),
        ];
        for (text, ok) in table {
            assert_eq!(LeaseOwner::parse(text).is_ok(), ok, "{text:?}");
        }
    }

    #[test]
    fn version_text_table() {
        let table: [(&str, Result<u64, LeaseError>); 9] = [
            ("00000000000000000001", Ok(1)),
            ("00000000000000000000", Ok(0)),
            ("18446744073709551615", Ok(u64::MAX)),
            ("18446744073709551616", Err(LeaseError::InvalidVersion)),
            ("99999999999999999999", Err(LeaseError::InvalidVersion)),
            ("1", Err(LeaseError::InvalidVersion)),
            ("0000000000000000001", Err(LeaseError::InvalidVersion)),
            ("+0000000000000000001", Err(LeaseError::InvalidVersion)),
            ("0000000000000000000x", Err(LeaseError::InvalidVersion)),
        ];
        for (text, expected) in table {
            assert_eq!(
                LeaseVersion::parse(text),
                expected.map(LeaseVersion),
                "{text}"
            );
        }
        assert_eq!(LeaseVersion(42).to_string(), "00000000000000000042");
        assert_eq!(LeaseVersion::try_from(7_i64), Ok(LeaseVersion(7)));
        assert_eq!(
            LeaseVersion::try_from(-1_i64),
            Err(LeaseError::InvalidVersion)
        );
    }

    #[test]
    fn versions_sort_the_same_as_text_and_as_numbers() {
        let mut values = vec![u64::MAX];
        let mut power = 1_u64;
        while power <= 1_000_000_000_000 {
            values.extend([power, power.saturating_mul(10) - 1]);
            power *= 10;
        }
        values.extend([9, 99, 999]);
        let mut by_number: Vec<LeaseVersion> = values.iter().copied().map(LeaseVersion).collect();
        by_number.sort();
        let mut by_text: Vec<String> = by_number.iter().map(LeaseVersion::to_string).collect();
        let numeric_order = by_text.clone();
        by_text.sort();
        assert_eq!(by_text, numeric_order);
        for text in &by_text {
            assert_eq!(text.len(), 20);
            assert_eq!(
                LeaseVersion::parse(text).map(|v| v.to_string()).as_ref(),
                Ok(text)
            );
        }
    }

    #[test]
    fn version_and_fence_serde() {
        let fence = LeaseFence {
            owner: owner(OWNER_A),
            version: LeaseVersion(12),
        };
        let json = serde_json::to_value(&fence).expect("serialize");
        assert_eq!(
            json,
            serde_json::json!({"owner": OWNER_A, "version": "00000000000000000012"})
        );
        let back: LeaseFence = serde_json::from_value(json).expect("deserialize");
        assert_eq!(back, fence);
        for bad in [
            serde_json::json!({"owner": OWNER_A, "version": 12}),
            serde_json::json!({"owner": OWNER_A, "version": "12"}),
            serde_json::json!({"owner": "A", "version": "00000000000000000012"}),
        ] {
            assert!(
                serde_json::from_value::<LeaseFence>(bad.clone()).is_err(),
                "{bad}"
            );
        }
    }
}
