//! The test's `relayger-server`: its settings, a restart on the same
//! address, and the requests it logged.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use relayger_tests::ServerProcess;

use super::{CliTest, EVENT_TIMEOUT};

/// How a test's server runs.
#[derive(Debug, Clone, Default)]
pub(crate) struct ServerSettings {
    /// `--lease-ms`: a short lease so that tests need not wait 30 s.
    pub(crate) lease_ms: Option<u64>,
    /// Log every HTTP request to `server.log` in the test's directory
    /// (`RELAYGER_LOG=tower_http=debug`), to count requests on the server.
    pub(crate) log_requests: bool,
}

impl ServerSettings {
    /// Leases of `lease_ms`; every request logged when `log_requests`.
    pub(crate) fn lease(lease_ms: u64, log_requests: bool) -> ServerSettings {
        ServerSettings {
            lease_ms: Some(lease_ms),
            log_requests,
        }
    }
}

/// Starts `relayger-server` on `listen` against `database_url`, run as
/// `settings` say, in `cwd`.
pub(super) fn launch(
    cwd: &Path,
    database_url: &str,
    settings: &ServerSettings,
    listen: &str,
) -> ServerProcess {
    let lease;
    let mut args = vec!["--listen", listen, "--database-url", database_url];
    if let Some(ms) = settings.lease_ms {
        lease = ms.to_string();
        args.extend(["--lease-ms", lease.as_str()]);
    }
    let (env, stderr): (&[(&str, &str)], Stdio) = if settings.log_requests {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(cwd.join("server.log"))
            .expect("server log");
        (
            &[("RELAYGER_LOG", "info,tower_http=debug"), ("NO_COLOR", "1")],
            Stdio::from(log),
        )
    } else {
        (&[], Stdio::inherit())
    };
    ServerProcess::start_with(cwd, &args, env, stderr).expect("start relayger-server")
}

impl CliTest {
    /// Stops the server (SIGINT) and starts it again on the same address
    /// and database: a server restart as clients see it.
    pub(crate) fn restart_server(&mut self) {
        let stopped = self.server.take().expect("a running server");
        stopped.stop_with("INT").expect("stop relayger-server");
        let listen = self.base_url.trim_start_matches("http://").to_owned();
        let server = launch(&self.cwd, self.db.url(), &self.settings, &listen);
        assert_eq!(server.base_url(), self.base_url);
        self.server = Some(server);
    }

    /// How many `POST …/claim` requests the server received (needs
    /// `log_requests`).
    pub(crate) fn claim_requests(&self) -> usize {
        self.requests_to("/claim")
    }

    /// How many requests whose path contains `fragment` the server
    /// received (needs `log_requests`).
    pub(crate) fn requests_to(&self, fragment: &str) -> usize {
        assert!(
            self.settings.log_requests,
            "start the server with log_requests"
        );
        let log = std::fs::read_to_string(self.cwd.join("server.log")).unwrap_or_default();
        log.lines()
            .filter(|line| line.contains(fragment) && line.contains("started processing request"))
            .count()
    }

    /// Waits until the server has received `count` claims in total (needs
    /// `log_requests`).
    pub(crate) fn await_claims(&self, count: usize) {
        let until = Instant::now() + EVENT_TIMEOUT;
        while self.claim_requests() < count {
            assert!(
                Instant::now() < until,
                "the server saw {} claims, not {count}",
                self.claim_requests()
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }
}
