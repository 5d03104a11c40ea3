//! What the shipped binaries are built with: no test hooks.
//!
//! relayger-store's pause points (a test holds a transaction at one to force
//! an interleaving) compile only into that crate's own test build, whatever
//! else the same cargo invocation builds; its unit test
//! `a_build_with_pause_points_shows_it` checks that such a build is seen
//! for what it is by the check made here.

use relayger_testdb::has_pause_points;
use relayger_tests::binary;

#[test]
fn the_shipped_binaries_hold_no_pause_points() {
    for name in ["relayger-server", "relayger"] {
        let path = binary(name).expect("the binary is built");
        assert!(
            !has_pause_points(&path).expect("read the binary"),
            "{} holds relayger-store's pause points",
            path.display()
        );
    }
}
