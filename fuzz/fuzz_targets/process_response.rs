//! Arbitrary handler stdout into the process-ABI response parser. The first
//! byte picks the `maxResponseBytes` cap, the rest is stdout. An accepted
//! result obeys the ABI's limits (reply ≤ 64 KiB, no empty texts, not reply
//! and skip, error only with usage, a valid note), prints back into the same
//! result, and reads the same through the Node-module path.
#![no_main]

use libfuzzer_sys::fuzz_target;
use relayger_core::process_abi::{
    DEFAULT_MAX_RESPONSE_BYTES, MAX_RESPONSE_BYTES_RANGE, parse_response_output,
};

#[path = "../../relayger-core/tests/invariants/mod.rs"]
#[allow(dead_code)]
mod invariants;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, stdout)) = data.split_first() else {
        let _ = parse_response_output(data, DEFAULT_MAX_RESPONSE_BYTES);
        return;
    };
    let max_bytes = match selector % 4 {
        0 => DEFAULT_MAX_RESPONSE_BYTES,
        1 => MAX_RESPONSE_BYTES_RANGE.0,
        2 => MAX_RESPONSE_BYTES_RANGE.1,
        // Right at the edge: exactly the length, or one byte short.
        _ => stdout.len().saturating_sub(usize::from(selector >> 7)),
    };
    invariants::check_process_response(stdout, max_bytes);
});
