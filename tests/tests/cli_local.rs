//! The `relayger` binary without a server: help texts, usage errors, and the
//! local checks that refuse bad input before any request is made.

use crate::cli_support::{assert_help_examples, local_cli};
use serde_json::Value;

#[test]
fn every_command_shows_an_example_in_its_help() {
    let (cli, dir) = local_cli("cli-help");
    let commands: &[&[&str]] = &[
        &[],
        &["register"],
        &["agents"],
        &["agents", "create"],
        &["whoami"],
        &["profiles"],
        &["profiles", "list"],
        &["contacts"],
        &["contacts", "list"],
        &["contacts", "requests"],
        &["contacts", "request"],
        &["contacts", "accept"],
        &["contacts", "decline"],
        &["contacts", "withdraw"],
        &["contacts", "block"],
        &["contacts", "unblock"],
        &["contacts", "remove"],
        &["rooms"],
        &["rooms", "list"],
        &["rooms", "create"],
        &["rooms", "add"],
        &["rooms", "leave"],
        &["send"],
        &["delivery"],
        &["cancel"],
        &["message"],
        &["thread"],
        &["inbox"],
        &["ack"],
        &["tokens"],
        &["tokens", "create"],
        &["tokens", "list"],
        &["tokens", "revoke"],
        &["mcp"],
        &["a2a"],
        &["a2a", "card"],
    ];
    // An example line runs this very command (global options may come
    // between `relayger` and the command's words).
    assert_help_examples(&cli, commands, |command, words| {
        words.first() == Some(&"relayger")
            && (command.is_empty() || words.windows(command.len()).any(|w| w == command))
    });
    assert!(!cli.home().exists(), "help writes nothing");
    std::fs::remove_dir_all(dir).expect("cleanup");
}

#[test]
fn local_checks_refuse_bad_input_with_the_error_envelope() {
    let (cli, dir) = local_cli("cli-local-errors");
    // Each bad value is checked before the profile is even read: the error
    // names the argument, not the missing profile (nothing is requested).
    let cases: &[(&[&str], &str)] = &[
        (&["send", "12345", "hi"], "not an identity number"),
        (
            &[
                "send",
                "100000001",
                "hi",
                "--deadline",
                "2099-10-02T12:00:00Z",
            ],
            "--deadline needs --ask",
        ),
        (
            &[
                "send",
                "100000001",
                "hi",
                "--ask",
                "--deadline",
                "2099-10-02T12:00:00+02:00",
            ],
            "not a UTC time",
        ),
        (
            &[
                "send",
                "100000001",
                "hi",
                "--ask",
                "--deadline",
                "next week",
            ],
            "--deadline",
        ),
        (
            &["send", "100000001", "hi", "--reply-to", "first"],
            "--reply-to `first` is not a UUID",
        ),
        (
            &["send", "--room", "lobby", "hi"],
            "--room `lobby` is not a UUID",
        ),
        (
            &["message", "room", "0190a8c4-8a3e-7b6e-9f1c-3d2b1a0f9e8d"],
            "ROOM `room` is not a UUID",
        ),
        (
            &["thread", "0190a8c4-8a3e-7b6e-9f1c-3d2b1a0f9e8d", "x"],
            "MSG `x` is not a UUID",
        ),
        (&["ack", "nope", "3"], "not a UUID"),
        (
            &["contacts", "accept", "100000001", "--as", "bot"],
            "AGENT `bot` is not an identity number",
        ),
        (
            &["contacts", "request", "0100000001"],
            "not an identity number",
        ),
        (
            &["rooms", "create", "--name", "g", "--member", "1e6"],
            "not an identity number",
        ),
        (
            &["tokens", "create", "--scopes", "read,admin"],
            "`admin` is not a scope",
        ),
        (&["tokens", "revoke", "last"], "not a UUID"),
        (
            &[
                "register",
                "--server",
                "ftp://example.invalid",
                "--name",
                "A",
            ],
            "not an http",
        ),
        (&["whoami"], "profile `default` does not exist"),
        (
            &["--profile", "../escape", "whoami"],
            "not a valid profile name",
        ),
    ];
    for (args, expected) in cases {
        let human = cli.run(args).expect("run");
        assert_eq!(human.code, Some(1), "{args:?}: {human:?}");
        assert!(human.stdout.is_empty(), "{args:?}: {human:?}");
        let line = human.stderr.trim_end();
        assert!(
            line.starts_with("error: invalid_argument: ") && line.contains(expected),
            "{args:?}: {line}"
        );
        assert_eq!(line.lines().count(), 1, "{args:?}: {line}");

        for flag in ["--json", "--compact"] {
            let mut with_flag = vec![flag];
            with_flag.extend_from_slice(args);
            let output = cli.run(&with_flag).expect("run");
            assert_eq!(output.code, Some(1), "{with_flag:?}: {output:?}");
            assert!(output.stdout.is_empty(), "{with_flag:?}: {output:?}");
            let envelope: Value = serde_json::from_str(output.stderr.trim()).expect("envelope");
            assert_eq!(envelope["error"]["code"], "invalid_argument", "{envelope}");
            let message = envelope["error"]["message"].as_str().expect("message");
            assert!(message.contains(expected), "{with_flag:?}: {message}");
            assert_eq!(
                envelope.as_object().map(|o| o.len()),
                Some(1),
                "only the envelope: {envelope}"
            );
        }
    }
    // The missing-profile message says how to create one.
    let output = cli.run(&["--profile", "receiver", "inbox"]).expect("run");
    assert!(
        output
            .stderr
            .contains("relayger --profile receiver register --server URL --name NAME"),
        "{}",
        output.stderr
    );
    assert!(!cli.home().exists(), "nothing was written");
    std::fs::remove_dir_all(dir).expect("cleanup");
}

#[test]
fn usage_errors_exit_with_2() {
    let (cli, dir) = local_cli("cli-usage");
    let cases: &[&[&str]] = &[
        &["send", "100000001"],
        &[
            "send",
            "--room",
            "0190a8c4-8a3e-7b6e-9f1c-3d2b1a0f9e8d",
            "100000001",
            "hi",
        ],
        &["frobnicate"],
        &["--json", "--compact", "whoami"],
        &[
            "thread",
            "0190a8c4-8a3e-7b6e-9f1c-3d2b1a0f9e8d",
            "0190a8c4-8a3e-7b6e-9f1c-3d2b1a0f9e8d",
            "--limit",
            "many",
        ],
        &["tokens", "create"],
        &["rooms", "create", "--name", "g"],
        &["register", "--name", "A"],
    ];
    for args in cases {
        let output = cli.run(args).expect("run");
        assert_eq!(output.code, Some(2), "{args:?}: {output:?}");
        assert!(
            output.stderr.starts_with("error: "),
            "{args:?}: {}",
            output.stderr
        );
    }
    std::fs::remove_dir_all(dir).expect("cleanup");
}

#[test]
fn profiles_list_without_profiles_is_empty() {
    let (cli, dir) = local_cli("cli-no-profiles");
    let output = cli.run(&["--json", "profiles", "list"]).expect("run");
    assert!(output.success(), "{output:?}");
    let listed: Value = serde_json::from_str(&output.stdout).expect("json");
    assert_eq!(listed["profiles"], Value::Array(Vec::new()), "{listed}");
    let output = cli.run(&["--compact", "profiles", "list"]).expect("run");
    let compact: Value = serde_json::from_str(&output.stdout).expect("json");
    assert!(
        compact.get("profiles").is_none(),
        "empty arrays are dropped: {compact}"
    );
    std::fs::remove_dir_all(dir).expect("cleanup");
}
