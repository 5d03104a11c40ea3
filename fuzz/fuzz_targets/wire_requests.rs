//! Arbitrary bytes into every request body of `relayger_core::wire` and the
//! strict object reader: no panic, accepted bodies round-trip through
//! serialization, policies inside bodies keep the policy rules, and the
//! strict reader agrees with `serde_json` apart from repeated keys.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../relayger-core/tests/invariants/mod.rs"]
#[allow(dead_code)]
mod invariants;

fuzz_target!(|data: &[u8]| {
    invariants::check_wire_bytes(data);
});
