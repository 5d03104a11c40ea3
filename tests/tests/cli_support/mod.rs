//! Shared by the `cli_*` tests: a real server on its own database, the real
//! `relayger` binary with its own profile directory, and JSON helpers.

// Each test file uses a different part of this module.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use relayger_store::test_support::TestDatabase;
use relayger_tests::{CliOutput, RelaygerCli, ServerProcess, signal_process, temp_dir};
use serde_json::Value;

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

impl CliTest {
    pub(crate) async fn start(label: &str) -> CliTest {
        CliTest::start_with(label, ServerSettings::default()).await
    }

    pub(crate) async fn start_with(label: &str, settings: ServerSettings) -> CliTest {
        let db = TestDatabase::create().await;
        let cwd = temp_dir(label).expect("temp dir");
        let server = launch_server(&cwd, db.url(), &settings, "127.0.0.1:0");
        CliTest {
            cli: RelaygerCli::new(cwd.join("home")),
            base_url: server.base_url().to_owned(),
            server: Some(server),
            db,
            cwd,
            settings,
        }
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

    /// Registers the agent `receiver` and `sender` (an agent when
    /// `sender_is_agent`, else a person) as profiles of those names; `sender`
    /// asks `receiver`, who accepts.
    pub(crate) fn befriended_pair(&self, sender_is_agent: bool) -> Befriended {
        let sender_number = text(&self.register("sender", "Sender", sender_is_agent)["number"]);
        let receiver_number = text(&self.register("receiver", "Receiver", true)["number"]);
        let room = self.befriend(("sender", &sender_number), ("receiver", &receiver_number));
        Befriended {
            sender_number,
            receiver_number,
            room,
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

    /// `sender` asks `number` `question` (with `extra` options of `send`);
    /// the question's id.
    pub(crate) fn ask(&self, number: &str, question: &str, extra: &[&str]) -> String {
        let mut args = vec!["--profile", "sender", "send", number, question, "--ask"];
        args.extend_from_slice(extra);
        text(&self.json(&args)["messageId"])
    }

    /// The messages of `room` that reply to `message`, as `profile` reads
    /// the thread.
    pub(crate) fn replies_to(&self, profile: &str, room: &str, message: &str) -> Vec<Value> {
        let thread = self.json(&[
            "--profile",
            profile,
            "thread",
            room,
            message,
            "--limit",
            "100",
        ]);
        thread["messages"]
            .as_array()
            .expect("messages")
            .iter()
            .filter(|m| m["replyTo"] == message)
            .cloned()
            .collect()
    }

    /// Profile `profile` asks `number` to be a contact; the request.
    pub(crate) fn request_contact(&self, profile: &str, number: &str) -> Value {
        self.json(&["--profile", profile, "contacts", "request", number])
    }

    /// `requester` asks `target`, who accepts; their direct room's id.
    pub(crate) fn befriend(&self, requester: (&str, &str), target: (&str, &str)) -> String {
        let (requester_profile, requester_number) = requester;
        let (target_profile, target_number) = target;
        self.request_contact(requester_profile, target_number);
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

/// Two contacts from [`CliTest::befriended_pair`]: profiles `sender` and
/// `receiver`.
pub(crate) struct Befriended {
    pub(crate) sender_number: String,
    pub(crate) receiver_number: String,
    /// Their direct room's id.
    pub(crate) room: String,
}

impl Drop for CliTest {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.cwd);
    }
}

fn launch_server(
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
    /// The test's directory (`./policy.json` and the like go here).
    pub(crate) fn cwd(&self) -> &Path {
        &self.cwd
    }

    /// Stops the server (SIGINT) and starts it again on the same address
    /// and database: a server restart as clients see it.
    pub(crate) fn restart_server(&mut self) {
        let stopped = self.server.take().expect("a running server");
        stopped.stop_with("INT").expect("stop relayger-server");
        let listen = self.base_url.trim_start_matches("http://").to_owned();
        let server = launch_server(&self.cwd, self.db.url(), &self.settings, &listen);
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

    /// `sh -c LINE` in the test's directory, `relayger` on the PATH.
    pub(crate) fn shell(&self, line: &str) -> CliOutput {
        self.cli.shell(line, &self.cwd).expect("run sh")
    }

    /// Starts `relayger ARGS` (e.g. `worker run …`) in the background with
    /// extra environment variables; its stdout lines arrive as events.
    pub(crate) fn spawn(&self, args: &[&str], env: &[(&str, &str)]) -> WorkerProcess {
        let mut command = self.cli.command().expect("relayger command");
        command
            .args(args)
            .envs(env.iter().copied())
            .current_dir(&self.cwd);
        WorkerProcess::spawn(command, &format!("relayger {}", args.join(" ")))
    }

    /// Starts `sh -c 'exec LINE'` in the background: a documented
    /// long-running command line, run as written.
    pub(crate) fn spawn_shell(&self, line: &str, env: &[(&str, &str)]) -> WorkerProcess {
        self.spawn_shell_in(line, env, &self.cwd)
    }

    /// [`spawn_shell`](Self::spawn_shell) in `cwd` (e.g. the repository
    /// root, for a line naming `./examples/…`).
    pub(crate) fn spawn_shell_in(
        &self,
        line: &str,
        env: &[(&str, &str)],
        cwd: &Path,
    ) -> WorkerProcess {
        let mut command = self
            .cli
            .shell_command(&format!("exec {line}"), cwd)
            .expect("sh command");
        command.envs(env.iter().copied());
        WorkerProcess::spawn(command, line)
    }
}

/// How long a worker test waits for an event before failing.
pub(crate) const EVENT_TIMEOUT: Duration = Duration::from_secs(30);

/// A running `relayger` process whose stdout is read line by line (NDJSON
/// with `--json`). Dropping it kills the process.
pub(crate) struct WorkerProcess {
    child: Option<Child>,
    label: String,
    lines: mpsc::Receiver<String>,
    seen: Vec<Value>,
    stderr: Arc<Mutex<String>>,
}

/// How a [`WorkerProcess`] ended.
#[derive(Debug)]
pub(crate) struct WorkerExit {
    /// `None` when killed by a signal.
    pub(crate) code: Option<i32>,
    /// Every line it printed, as JSON where it was JSON.
    pub(crate) events: Vec<Value>,
    pub(crate) stderr: String,
}

impl WorkerProcess {
    fn spawn(mut command: std::process::Command, label: &str) -> WorkerProcess {
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("spawn relayger");
        let stdout = child.stdout.take().expect("stdout");
        let mut stderr_pipe = child.stderr.take().expect("stderr");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let collected = Arc::clone(&stderr);
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr_pipe.read_to_string(&mut text);
            if let Ok(mut all) = collected.lock() {
                all.push_str(&text);
            }
        });
        WorkerProcess {
            child: Some(child),
            label: label.to_owned(),
            lines,
            seen: Vec::new(),
            stderr,
        }
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Every line seen so far.
    pub(crate) fn seen(&self) -> &[Value] {
        &self.seen
    }

    /// The names of the events seen so far.
    pub(crate) fn event_names(&self) -> Vec<String> {
        self.seen
            .iter()
            .map(|event| event["event"].as_str().unwrap_or("?").to_owned())
            .collect()
    }

    /// Waits for the first line from now on that satisfies `matches`.
    pub(crate) fn wait_for(
        &mut self,
        what: &str,
        timeout: Duration,
        matches: impl Fn(&Value) -> bool,
    ) -> Value {
        let until = Instant::now() + timeout;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let value = serde_json::from_str(&line).unwrap_or(Value::String(line));
                    self.seen.push(value.clone());
                    if matches(&value) {
                        return value;
                    }
                }
                Err(err) => panic!(
                    "{}: no {what} within {timeout:?} ({err}); seen: {:#?}; stderr: {}",
                    self.label,
                    self.seen,
                    self.stderr_text()
                ),
            }
        }
    }

    /// The next line within `timeout`, or `None`.
    pub(crate) fn poll_line(&mut self, timeout: Duration) -> Option<Value> {
        let line = self.lines.recv_timeout(timeout).ok()?;
        let value = serde_json::from_str(&line).unwrap_or(Value::String(line));
        self.seen.push(value.clone());
        Some(value)
    }

    /// Waits for the next `{"event": name}` line.
    pub(crate) fn wait_event(&mut self, name: &str) -> Value {
        self.wait_for(name, EVENT_TIMEOUT, |event| event["event"] == name)
    }

    /// Sends a signal ("INT", "TERM", "KILL") to the process.
    pub(crate) fn signal(&self, signal: &str) {
        signal_process(self.pid(), signal).expect("kill");
    }

    /// Whether the process exits within `timeout` (it is left running
    /// otherwise; [`wait_exit`](Self::wait_exit) still collects it).
    pub(crate) fn exits_within(&mut self, timeout: Duration) -> bool {
        let child = self.child.as_mut().expect("running");
        let until = Instant::now() + timeout;
        loop {
            if child.try_wait().expect("try_wait").is_some() {
                return true;
            }
            if Instant::now() >= until {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits for the process to exit (killing it after `timeout`), and
    /// collects the rest of its output.
    pub(crate) fn wait_exit(mut self, timeout: Duration) -> WorkerExit {
        let mut child = self.child.take().expect("running");
        let until = Instant::now() + timeout;
        let status = loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                break status;
            }
            if Instant::now() >= until {
                let _ = child.kill();
                panic!(
                    "{} did not exit within {timeout:?}; seen: {:#?}",
                    self.label, self.seen
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        // The reader ends at end of file.
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(5)) {
            self.seen
                .push(serde_json::from_str(&line).unwrap_or(Value::String(line)));
        }
        // Give the stderr reader a moment to hand over what it read.
        let stderr_until = Instant::now() + Duration::from_secs(5);
        while Arc::strong_count(&self.stderr) > 1 && Instant::now() < stderr_until {
            std::thread::sleep(Duration::from_millis(10));
        }
        WorkerExit {
            code: status.code(),
            events: std::mem::take(&mut self.seen),
            stderr: self.stderr_text(),
        }
    }

    fn stderr_text(&self) -> String {
        self.stderr
            .lock()
            .map(|text| text.clone())
            .unwrap_or_default()
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `flag` followed by `args`.
/// The exit status the README documents for an error code: 3 not found,
/// 4 not signed in or not allowed, 5 conflict, 6 unavailable, 7 timed out,
/// 1 anything else (2 is a usage error, before any code).
/// `--profile PROFILE --json worker run NAME --builtin BUILTIN --from now`:
/// a builtin worker that starts at the newest message.
pub(crate) fn builtin_worker_args<'a>(
    profile: &'a str,
    name: &'a str,
    builtin: &'a str,
) -> Vec<&'a str> {
    let mut args = builtin_worker_args_no_from(profile, name, builtin);
    args.extend(["--from", "now"]);
    args
}

/// [`builtin_worker_args`] without `--from`.
pub(crate) fn builtin_worker_args_no_from<'a>(
    profile: &'a str,
    name: &'a str,
    builtin: &'a str,
) -> Vec<&'a str> {
    vec![
        "--profile",
        profile,
        "--json",
        "worker",
        "run",
        name,
        "--builtin",
        builtin,
    ]
}

/// Stops `worker` with SIGINT; it must exit 0. Its exit.
pub(crate) fn stop_worker(worker: WorkerProcess) -> WorkerExit {
    worker.signal("INT");
    let exit = worker.wait_exit(EVENT_TIMEOUT);
    assert_eq!(exit.code, Some(0), "{exit:?}");
    exit
}

/// [`stop_worker`], and its last event must be `stopped`.
pub(crate) fn stop_worker_cleanly(worker: WorkerProcess) -> WorkerExit {
    let exit = stop_worker(worker);
    assert_eq!(
        exit.events.last().expect("events")["event"],
        "stopped",
        "{exit:?}"
    );
    exit
}

/// Waits for the worker's `replied` event about `message`.
pub(crate) fn wait_replied(worker: &mut WorkerProcess, message: &str) -> Value {
    worker.wait_for(&format!("the reply to {message}"), EVENT_TIMEOUT, |e| {
        e["event"] == "replied" && e["messageId"] == message
    })
}

/// Waits for the worker's outcome event about `message_id` (`replied`,
/// `skipped`, `failed`, `dead_letter` or `handled`).
pub(crate) fn outcome_of(worker: &mut WorkerProcess, message_id: &str) -> Value {
    worker.wait_for(
        &format!("an outcome for {message_id}"),
        EVENT_TIMEOUT,
        |event| {
            event["messageId"] == message_id
                && ["replied", "skipped", "failed", "dead_letter", "handled"]
                    .contains(&event["event"].as_str().unwrap_or_default())
        },
    )
}

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
        _ => 1,
    }
}

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

/// The lease of a claimed job, as heartbeat and finish name it.
pub(crate) fn lease_of(job: &relayger_core::wire::ClaimedJob) -> relayger_core::wire::LeaseRequest {
    relayger_core::wire::LeaseRequest {
        owner: job.owner.clone(),
        version: job.version,
    }
}

/// Renews `job`'s lease `heartbeats` times through `client` (each renewal
/// granting `lease_ms`), then finishes it with `reply` through the same
/// client, which must answer `replied`.
pub(crate) async fn heartbeat_then_reply(
    client: &relayger_worker::Client,
    runtime: uuid::Uuid,
    job: &relayger_core::wire::ClaimedJob,
    (heartbeats, lease_ms): (usize, u64),
    reply: &str,
) {
    use relayger_core::wire::{FinishOutcome, FinishRequest, JobResult};
    let lease = lease_of(job);
    for _ in 0..heartbeats {
        let renewed = client
            .runtimes()
            .heartbeat(runtime, job.job_id, &lease)
            .await
            .expect("heartbeat");
        assert_eq!(renewed.lease_ms, lease_ms);
    }
    let finished = client
        .runtimes()
        .finish(
            runtime,
            job.job_id,
            &FinishRequest {
                owner: lease.owner,
                version: lease.version,
                result: JobResult {
                    reply: Some(reply.to_owned()),
                    ..JobResult::default()
                },
            },
        )
        .await
        .expect("finish");
    assert_eq!(finished.outcome, FinishOutcome::Replied);
}
