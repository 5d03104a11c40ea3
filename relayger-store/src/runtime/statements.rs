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
/// What an idle claim needs for `retryAt`.
pub(crate) const IDLE_FACTS: &str = include_str!("claim/idle_facts.sql");
/// The scan's room locks.
pub(crate) const LOCK_ROOMS: &str = include_str!("scan/lock_rooms.sql");
/// The scan's reads and writes.
pub(crate) const WRITE_SCAN: &str = include_str!("scan/write_scan.sql");

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
];
