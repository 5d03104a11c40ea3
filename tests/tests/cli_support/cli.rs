//! The `relayger` binary as a test runs it: its output, its JSON, its
//! error envelope and the exit status that goes with each code.

use std::path::PathBuf;

use relayger_tests::{CliOutput, RelaygerCli, temp_dir};
use serde_json::Value;

use super::CliTest;

impl CliTest {
    /// `relayger ARGS` as it is.
    pub(crate) fn run(&self, args: &[&str]) -> CliOutput {
        self.cli.run(args).expect("run relayger")
    }

    /// `relayger --json ARGS`, which must succeed; its JSON output.
    pub(crate) fn json(&self, args: &[&str]) -> Value {
        let output = self.run(&with_flag("--json", args));
        assert!(output.success(), "relayger {args:?} failed: {output:?}");
        assert!(output.stderr.is_empty(), "{args:?}: {}", output.stderr);
        serde_json::from_str(&output.stdout)
            .unwrap_or_else(|err| panic!("{args:?} printed no JSON ({err}): {}", output.stdout))
    }

    /// `relayger --json ARGS`, which must fail with the exit status the
    /// README documents for its code; the error envelope's code, after
    /// checking the envelope's shape.
    pub(crate) fn error_code(&self, args: &[&str]) -> String {
        let output = self.run(&with_flag("--json", args));
        assert!(output.stdout.is_empty(), "{args:?}: {}", output.stdout);
        let envelope: Value = serde_json::from_str(output.stderr.trim()).unwrap_or_else(|err| {
            panic!("{args:?}: stderr is not JSON ({err}): {}", output.stderr)
        });
        let message = envelope["error"]["message"].as_str().unwrap_or_default();
        assert!(!message.is_empty(), "{envelope}");
        let code = envelope["error"]["code"]
            .as_str()
            .unwrap_or_else(|| panic!("no error code: {envelope}"))
            .to_owned();
        assert_eq!(
            output.code,
            Some(exit_status(&code)),
            "relayger {args:?}: {output:?}"
        );
        code
    }

    /// `sh -c LINE` in the test's directory, `relayger` on the PATH.
    pub(crate) fn shell(&self, line: &str) -> CliOutput {
        self.cli.shell(line, &self.cwd).expect("run sh")
    }
}

/// `relayger` with a profile directory no one has written yet, for the
/// tests that need no server; the test's directory (`home` is in it).
pub(crate) fn local_cli(label: &str) -> (RelaygerCli, PathBuf) {
    let dir = temp_dir(label).expect("temp dir");
    (RelaygerCli::new(dir.join("home")), dir)
}

/// Every `commands` entry's `--help` succeeds and shows an example that
/// `is_example(command, line)` accepts on one of its lines.
pub(crate) fn assert_help_examples(
    cli: &RelaygerCli,
    commands: &[&[&str]],
    is_example: impl Fn(&[&str], &[&str]) -> bool,
) {
    for command in commands {
        let mut args = command.to_vec();
        args.push("--help");
        let output = cli.run(&args).expect("run");
        assert!(output.success(), "{args:?}: {output:?}");
        let has_example = output.stdout.lines().any(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            is_example(command, &words)
        });
        assert!(
            output.stdout.contains("Example") && has_example,
            "{args:?} --help has no example of `relayger {}`:\n{}",
            command.join(" "),
            output.stdout
        );
    }
}

/// `worker run w …` lines refused by argument parsing (exit 2), with or
/// without a server: no handler, a builtin that does not exist, a `--from`
/// it does not know.
pub(crate) const WORKER_RUN_USAGE_ERRORS: &[&[&str]] = &[
    &["worker", "run", "w"],
    &["worker", "run", "w", "--builtin", "shout"],
    &[
        "worker",
        "run",
        "w",
        "--builtin",
        "echo",
        "--from",
        "yesterday",
    ],
];

/// The exit status the README documents for an error code: 3 not found,
/// 4 not signed in or not allowed, 5 conflict, 6 unavailable, 7 timed out,
/// 8 a question ended without an answer, 1 anything else (2 is a usage error, before any code).
pub(crate) fn exit_status(code: &str) -> i32 {
    match code {
        "not_found" => 3,
        "unauthorized" | "forbidden" | "registration_closed" | "token_restricted" => 4,
        "conflict"
        | "runtime_configuration_conflict"
        | "runtime_busy"
        | "runtime_limit"
        | "version_conflict"
        | "lease_lost"
        | "fingerprint_mismatch" => 5,
        "rate_limited" | "unavailable" => 6,
        "timeout" => 7,
        "unanswered" => 8,
        _ => 1,
    }
}

/// `flag` followed by `args`.
pub(crate) fn with_flag<'a>(flag: &'a str, args: &[&'a str]) -> Vec<&'a str> {
    let mut all = vec![flag];
    all.extend_from_slice(args);
    all
}

/// A JSON string's text (panics on anything else).
pub(crate) fn text(value: &Value) -> String {
    value
        .as_str()
        .unwrap_or_else(|| panic!("not a string: {value}"))
        .to_owned()
}
