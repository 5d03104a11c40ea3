//! Arbitrary bytes into the runtime-policy parser. On success the policy
//! validates, its normalized form re-parses to the same normalized form and
//! fingerprint, the fingerprint ignores list order, and the active-hours
//! answers are consistent (`next_active_start` is the next window start).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../relayger-core/tests/invariants/mod.rs"]
#[allow(dead_code)]
mod invariants;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Some(policy) = invariants::check_policy_text(text) {
        invariants::check_policy_times(&policy);
    }
});
