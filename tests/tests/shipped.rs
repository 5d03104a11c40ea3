//! What the shipped binaries are built with: no test hooks, and the same
//! dependency features whether relayger-server is built alone or with the
//! whole workspace.
//!
//! relayger-store's pause points (a test holds a transaction at one to force
//! an interleaving) compile only into that crate's own test build, whatever
//! else the same cargo invocation builds; its unit test
//! `a_build_with_pause_points_shows_it` checks that such a build is seen
//! for what it is by the check made here.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

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

/// Every package `cargo tree ARGS` resolves, with its features: one
/// `name version (path) features` line per package and feature set.
fn resolved(args: &[&str]) -> BTreeSet<String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let output = Command::new(cargo)
        .args(["tree", "--frozen", "--prefix", "none", "--no-dedupe"])
        .args(["--format", "{p} {f}"])
        .args(args)
        .current_dir(workspace)
        .output()
        .expect("run cargo tree");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "cargo tree {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
        .lines()
        .map(|line| line.trim_end_matches(" (*)").to_owned())
        .filter(|line| !line.is_empty())
        .collect()
}

/// `cargo run -p relayger-server` after a build of the whole workspace (as
/// scripts/test makes) compiles nothing again: cargo turns a dependency's
/// features on for what one invocation builds, and relayger-workspace-hack
/// asks for those the rest of the workspace turns on.
#[test]
fn the_server_alone_resolves_the_features_of_a_workspace_build() {
    let alone = resolved(&["-p", "relayger-server", "-e", "normal,build"]);
    let workspace = resolved(&["--workspace", "-e", "normal,build,dev"]);
    let differ: Vec<&String> = alone.difference(&workspace).collect();
    let wanted = |line: &&String| {
        let name = line.split(' ').next().unwrap_or_default();
        differ
            .iter()
            .any(|other| other.split(' ').next() == Some(name))
    };
    let in_workspace: Vec<&String> = workspace.iter().filter(wanted).collect();
    assert!(
        differ.is_empty(),
        "built alone, relayger-server would compile these again (and every Relayger \
         crate above them): {differ:#?}\na workspace build has {in_workspace:#?}\nask for \
         the missing features in relayger-workspace-hack/Cargo.toml"
    );
}
