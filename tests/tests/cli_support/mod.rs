//! Shared by the end-to-end tests: a real server on its own database, the
//! real `relayger` binary with its own profile directory, and JSON helpers.
//!
//! - [`server`]: how the test's server runs, restarts and what it logged;
//! - [`cli`]: running `relayger` and reading its JSON, errors and exits;
//! - [`pairs`]: identities and the contacts between them;
//! - [`process`]: a long-running `relayger` whose NDJSON lines are awaited;
//! - [`workers`]: `worker run` arguments, stopping, outcomes, leases.

// Each test file uses a different part of this module.
#![allow(dead_code)]

mod cli;
mod pairs;
mod process;
mod server;
mod workers;

use std::path::PathBuf;

use relayger_testdb::TestDatabase;
use relayger_tests::{RelaygerCli, ServerProcess, temp_dir};

pub(crate) use cli::{
    WORKER_RUN_USAGE_ERRORS, assert_help_examples, exit_status, local_cli, text, with_flag,
};
pub(crate) use pairs::{Befriended, Party};
pub(crate) use process::{EVENT_TIMEOUT, WorkerExit, WorkerProcess};
pub(crate) use server::ServerSettings;
pub(crate) use workers::{
    assert_replied, builtin_worker_args, builtin_worker_args_no_from, heartbeat_then_reply,
    lease_of, outcome_of, stop_worker, stop_worker_cleanly, stop_worker_without, wait_replied,
    worker_args, write_failing_process_handler,
};

/// One server, one database and one profile directory.
pub(crate) struct CliTest {
    pub(crate) cli: RelaygerCli,
    // Dropped in this order: the server stops before its database goes.
    server: Option<ServerProcess>,
    db: TestDatabase,
    cwd: PathBuf,
    base_url: String,
    settings: ServerSettings,
}

impl CliTest {
    pub(crate) async fn start(label: &str) -> CliTest {
        CliTest::start_with(label, ServerSettings::default()).await
    }

    pub(crate) async fn start_with(label: &str, settings: ServerSettings) -> CliTest {
        let db = TestDatabase::create().await;
        let cwd = temp_dir(label).expect("temp dir");
        let server = server::launch(&cwd, db.url(), &settings, "127.0.0.1:0");
        CliTest {
            cli: RelaygerCli::new(cwd.join("home")),
            base_url: server.base_url().to_owned(),
            server: Some(server),
            db,
            cwd,
            settings,
        }
    }

    /// A server run with `settings` and the contacts of
    /// [`CliTest::befriended_pair`].
    pub(crate) async fn with_pair(
        label: &str,
        settings: ServerSettings,
        sender_is_agent: bool,
    ) -> (CliTest, Befriended) {
        let t = CliTest::start_with(label, settings).await;
        let pair = t.befriended_pair(sender_is_agent);
        (t, pair)
    }

    pub(crate) fn url(&self) -> &str {
        &self.base_url
    }

    pub(crate) fn database_url(&self) -> &str {
        self.db.url()
    }

    /// The test's database.
    pub(crate) fn database(&self) -> &TestDatabase {
        &self.db
    }

    /// The test's directory (`./policy.json` and the like go here).
    pub(crate) fn cwd(&self) -> &std::path::Path {
        &self.cwd
    }
}

impl Drop for CliTest {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.cwd);
    }
}
