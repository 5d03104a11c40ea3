//! Shared by the `cli_*` tests: a real server on its own database, the real
//! `relayger` binary with its own profile directory, and JSON helpers.

// Each test file uses a different part of this module.
#![allow(dead_code)]

use std::path::PathBuf;

use relayger_store::test_support::TestDatabase;
use relayger_tests::{CliOutput, RelaygerCli, ServerProcess, temp_dir};
use serde_json::Value;

/// One server, one database and one profile directory.
pub(crate) struct CliTest {
    pub(crate) cli: RelaygerCli,
    // Dropped in this order: the server stops before its database goes.
    server: ServerProcess,
    db: TestDatabase,
    cwd: PathBuf,
}

impl CliTest {
    pub(crate) async fn start(label: &str) -> CliTest {
        let db = TestDatabase::create().await;
        let cwd = temp_dir(label).expect("temp dir");
        let server = ServerProcess::start(
            &cwd,
            &["--listen", "127.0.0.1:0", "--database-url", db.url()],
        )
        .expect("start relayger-server");
        CliTest {
            cli: RelaygerCli::new(cwd.join("home")),
            server,
            db,
            cwd,
        }
    }

    pub(crate) fn url(&self) -> &str {
        self.server.base_url()
    }

    pub(crate) fn database_url(&self) -> &str {
        self.db.url()
    }

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

    /// `relayger --json ARGS`, which must fail with exit code 1; the error
    /// envelope's code, after checking the envelope's shape.
    pub(crate) fn error_code(&self, args: &[&str]) -> String {
        let output = self.run(&with_flag("--json", args));
        assert_eq!(output.code, Some(1), "relayger {args:?}: {output:?}");
        assert!(output.stdout.is_empty(), "{args:?}: {}", output.stdout);
        let envelope: Value = serde_json::from_str(output.stderr.trim()).unwrap_or_else(|err| {
            panic!("{args:?}: stderr is not JSON ({err}): {}", output.stderr)
        });
        let message = envelope["error"]["message"].as_str().unwrap_or_default();
        assert!(!message.is_empty(), "{envelope}");
        envelope["error"]["code"]
            .as_str()
            .unwrap_or_else(|| panic!("no error code: {envelope}"))
            .to_owned()
    }

    /// Registers `name` as profile `profile`; the new identity.
    pub(crate) fn register(&self, profile: &str, name: &str, agent: bool) -> Value {
        let mut args = vec![
            "--profile",
            profile,
            "register",
            "--server",
            self.url(),
            "--name",
            name,
        ];
        if agent {
            args.push("--agent");
        }
        let registered = self.json(&args);
        assert_eq!(registered["profile"], profile, "{registered}");
        assert!(
            registered["token"].get("secret").is_none(),
            "the token secret stays in the profile: {registered}"
        );
        registered["identity"].clone()
    }

    /// `requester` asks `target`, who accepts; their direct room's id.
    pub(crate) fn befriend(&self, requester: (&str, &str), target: (&str, &str)) -> String {
        let (requester_profile, requester_number) = requester;
        let (target_profile, target_number) = target;
        self.json(&[
            "--profile",
            requester_profile,
            "contacts",
            "request",
            target_number,
        ]);
        let contact = self.json(&[
            "--profile",
            target_profile,
            "contacts",
            "accept",
            requester_number,
        ]);
        text(&contact["roomId"])
    }
}

impl Drop for CliTest {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.cwd);
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
