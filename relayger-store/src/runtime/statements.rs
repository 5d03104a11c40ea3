//! The runtime's statements, each a whole `.sql` file next to the code
//! that runs it, its parameters named in its header comment, and all of
//! them listed in [`STATEMENTS`]: the store's tests prepare every one
//! against the migrated schema, and check that every `.sql` file below
//! `runtime/` is listed under its own path.

/// `SET LOCAL plan_cache_mode = force_generic_plan`, preparable.
pub(crate) const GENERIC_PLANS: &str = include_str!("claim/generic_plans.sql");
/// The runtime a claim is for, locked.
pub(crate) const LOCK_RUNTIME: &str = include_str!("claim/lock_runtime.sql");
/// The runtime's expired leases, locked.
pub(crate) const EXPIRED_LEASES: &str = include_str!("claim/expired_leases.sql");
/// Ends expired leases.
pub(crate) const END_EXPIRED: &str = include_str!("claim/end_expired.sql");
/// The clock, active leases and budget window a claim plans with.
pub(crate) const CLAIM_STATE: &str = include_str!("claim/claim_state.sql");
/// One round of a claim's candidates.
pub(crate) const CANDIDATES: &str = include_str!("claim/candidates.sql");
/// A claim's grants and skips.
pub(crate) const GRANT_AND_SKIP: &str = include_str!("claim/grant_and_skip.sql");
/// What a claim needs for `retryAt`.
pub(crate) const IDLE_FACTS: &str = include_str!("claim/idle_facts.sql");
/// The scan's room locks.
pub(crate) const LOCK_ROOMS: &str = include_str!("scan/lock_rooms.sql");
/// The scan's reads and writes.
pub(crate) const WRITE_SCAN: &str = include_str!("scan/write_scan.sql");

/// A heartbeat through the fence.
pub(crate) const HEARTBEAT: &str = include_str!("lease/heartbeat.sql");
/// A release through the fence.
pub(crate) const RELEASE: &str = include_str!("lease/release.sql");
/// The fenced end of a completed job, the long way.
pub(crate) const FENCE_COMPLETE: &str = include_str!("finish/fence_complete.sql");
/// The fence for a failed attempt (its retry or dead letter follows).
pub(crate) const FENCE_FAIL: &str = include_str!("finish/fence_fail.sql");
/// Whole finishes of completed jobs whose places this instance granted.
pub(crate) const FINISH_BATCH: &str = include_str!("finish/finish_batch.sql");
/// An attempt's end and its log record, the long way.
pub(crate) const RECORD_END: &str = include_str!("finish/record_end.sql");
/// A finish's reply under the room lock, the long way.
pub(crate) const INSERT_REPLY: &str = include_str!("finish/insert_reply.sql");
/// A reply's room, locked before the reply on a second try.
pub(crate) const LOCK_ROOM: &str = include_str!("finish/lock_room.sql");
/// Why a finish's fence matched nothing.
pub(crate) const DIAGNOSE: &str = include_str!("finish/diagnose.sql");

/// A page of the runtime's log (runtime_log rows and attempts' records).
pub(crate) const LOG_PAGE: &str = include_str!("report/log.sql");
/// The runtime's last hour, minute by minute.
pub(crate) const ACTIVITY: &str = include_str!("report/activity.sql");
/// A filtered page of the runtime's jobs with their questions.
pub(crate) const JOB_SEARCH: &str = include_str!("report/job_search.sql");

/// Every statement above as (its file below `runtime/`, its text).
pub(crate) const STATEMENTS: &[(&str, &str)] = &[
    ("claim/generic_plans.sql", GENERIC_PLANS),
    ("claim/lock_runtime.sql", LOCK_RUNTIME),
    ("claim/expired_leases.sql", EXPIRED_LEASES),
    ("claim/end_expired.sql", END_EXPIRED),
    ("claim/claim_state.sql", CLAIM_STATE),
    ("claim/candidates.sql", CANDIDATES),
    ("claim/grant_and_skip.sql", GRANT_AND_SKIP),
    ("claim/idle_facts.sql", IDLE_FACTS),
    ("scan/lock_rooms.sql", LOCK_ROOMS),
    ("scan/write_scan.sql", WRITE_SCAN),
    ("lease/heartbeat.sql", HEARTBEAT),
    ("lease/release.sql", RELEASE),
    ("finish/fence_complete.sql", FENCE_COMPLETE),
    ("finish/fence_fail.sql", FENCE_FAIL),
    ("finish/finish_batch.sql", FINISH_BATCH),
    ("finish/record_end.sql", RECORD_END),
    ("finish/insert_reply.sql", INSERT_REPLY),
    ("finish/lock_room.sql", LOCK_ROOM),
    ("finish/diagnose.sql", DIAGNOSE),
    ("report/log.sql", LOG_PAGE),
    ("report/activity.sql", ACTIVITY),
    ("report/job_search.sql", JOB_SEARCH),
];
