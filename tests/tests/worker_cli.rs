//! `worker run` and `runtimes …` without a server: help texts with
//! examples, and the local checks that refuse bad input before any request
//! (no profile exists, so nothing could have been sent).

use crate::cli_support::{WORKER_RUN_USAGE_ERRORS, assert_help_examples, local_cli};
use serde_json::Value;

#[test]
fn every_listener_command_shows_an_example_in_its_help() {
    let (cli, dir) = local_cli("worker-help");
    let commands: &[&[&str]] = &[
        &["worker"],
        &["worker", "run"],
        &["runtimes"],
        &["runtimes", "list"],
        &["runtimes", "inspect"],
        &["runtimes", "log"],
        &["runtimes", "stats"],
        &["runtimes", "configure"],
        &["runtimes", "note"],
        &["runtimes", "notes"],
        &["runtimes", "dead-letters"],
        &["runtimes", "retry"],
        &["runtimes", "delete"],
    ];
    assert_help_examples(&cli, commands, |command, words| {
        let start = words.iter().position(|word| *word == "relayger");
        start.is_some_and(|start| {
            words[start..]
                .windows(command.len())
                .any(|window| window == command)
        })
    });
    let send = cli.run(&["send", "--help"]).expect("run");
    assert!(send.stdout.contains("--ask --wait"), "{}", send.stdout);
    let run = cli.run(&["worker", "run", "--help"]).expect("run");
    for documented in ["RELAYGER_WORKER_FALLBACK_MS", "RELAYGER_WORKER_NO_SOCKET"] {
        assert!(run.stdout.contains(documented), "{}", run.stdout);
    }
    assert!(!cli.home().exists(), "help writes nothing");
    std::fs::remove_dir_all(dir).expect("cleanup");
}

#[test]
fn bad_worker_and_runtime_arguments_are_refused_before_any_request() {
    let (cli, dir) = local_cli("worker-local-errors");
    std::fs::write(dir.join("typo.json"), r#"{"maxCallsPerHours": 5}"#).expect("policy");
    std::fs::write(dir.join("range.json"), r#"{"concurrency": 0}"#).expect("policy");
    let typo = dir.join("typo.json");
    let range = dir.join("range.json");
    let missing = dir.join("missing.json");
    const UUID: &str = "0190a8c4-8a3e-7b6e-9f1c-3d2b1a0f9e8d";
    fn run<'a>(extra: &[&'a str]) -> Vec<&'a str> {
        let mut args = vec!["worker", "run", "reply-worker", "--builtin", "uppercase"];
        args.extend_from_slice(extra);
        args
    }
    fn note<'a>(extra: &[&'a str]) -> Vec<&'a str> {
        let mut args = vec!["runtimes", "note", UUID, UUID, "decision", "--version", "0"];
        args.extend_from_slice(extra);
        args
    }
    let cases: Vec<(Vec<&str>, &str, &str)> = vec![
        (
            run(&["--policy", typo.to_str().expect("path")]),
            "invalid_policy",
            "maxCallsPerHours",
        ),
        (
            run(&["--policy", range.to_str().expect("path")]),
            "invalid_policy",
            "concurrency",
        ),
        (
            run(&["--policy", missing.to_str().expect("path")]),
            "invalid_argument",
            "cannot read --policy",
        ),
        (
            run(&["--handler-timeout", "120001"]),
            "invalid_argument",
            "--handler-timeout",
        ),
        (
            run(&["--handler-timeout", "0"]),
            "invalid_argument",
            "--handler-timeout",
        ),
        (
            // A runtime is named by its id or its name (a name is looked
            // up): text that can be neither is refused before any request.
            vec!["runtimes", "inspect", "not a name!"],
            "invalid_argument",
            "ID `not a name!` is neither a runtime id nor a runtime name",
        ),
        (
            vec!["runtimes", "log", UUID, "--limit", "0"],
            "invalid_argument",
            "--limit",
        ),
        (
            vec![
                "runtimes",
                "configure",
                UUID,
                "--version",
                "1",
                "--policy",
                typo.to_str().expect("path"),
            ],
            "invalid_policy",
            "maxCallsPerHours",
        ),
        (
            vec![
                "runtimes",
                "note",
                UUID,
                UUID,
                "bad key",
                "--version",
                "0",
                "--text",
                "x",
            ],
            "invalid_argument",
            "bad key",
        ),
        (
            note(&["--sources", "first", "--text", "x"]),
            "invalid_argument",
            "--sources `first` is not a UUID",
        ),
        (
            vec!["runtimes", "retry", UUID, "job"],
            "invalid_argument",
            "JOB `job`: a job is named by its jobId, its message id",
        ),
    ];
    for (args, code, needle) in cases {
        let mut json_args = vec!["--json"];
        json_args.extend_from_slice(&args);
        let output = cli.run(&json_args).expect("run");
        assert_eq!(output.code, Some(1), "{args:?}: {output:?}");
        assert!(output.stdout.is_empty(), "{args:?}: {output:?}");
        let envelope: Value = serde_json::from_str(output.stderr.trim())
            .unwrap_or_else(|err| panic!("{args:?}: {err}: {}", output.stderr));
        assert_eq!(envelope["error"]["code"], code, "{args:?}: {envelope}");
        let message = envelope["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(needle), "{args:?}: {message}");
    }

    // Usage errors (clap, exit code 2): two handlers at once, a builtin
    // that does not exist, `--wait` without `--ask`, a note without text.
    let mut usage: Vec<Vec<&str>> = vec![
        vec![
            "worker",
            "run",
            "w",
            "--builtin",
            "echo",
            "--handler",
            "./handler.mjs",
        ],
        vec![
            "worker",
            "run",
            "w",
            "--handler",
            "./handler.mjs",
            "--process",
            "./worker.json",
        ],
        vec!["send", "100000002", "hi", "--wait", "5"],
        note(&[]),
        note(&["--stdin", "--text", "x"]),
    ];
    usage.extend(WORKER_RUN_USAGE_ERRORS.iter().map(|args| args.to_vec()));
    for args in &usage {
        let output = cli.run(args).expect("run");
        assert_eq!(output.code, Some(2), "{args:?}: {output:?}");
    }
    assert!(!cli.home().exists(), "nothing was written");
    std::fs::remove_dir_all(dir).expect("cleanup");
}
