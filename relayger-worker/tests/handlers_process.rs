//! The process handler against real programs (`python3`, `/bin/sh`): the
//! example, the request line, malformed output, limits, process-group
//! cleanup, cancellation, stdout cleanliness and the environment.

use crate::handlers_support;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use handlers_support::{
    ScratchDir, assert_cancelled_promptly, assert_times_out, cancelled_soon, examples_dir,
    is_probe, job, print_reply, probe_line, process_alive, read_pids, reason_of, reply_of, run,
    run_probe, run_text, stderr_line,
};
use relayger_core::process_abi::is_credential_variable;
use relayger_worker::{
    CancellationToken, HandlerConfigError, HandlerError, HandlerOutput, ProcessHandler, Timestamp,
    Usage,
};
use serde_json::{Value, json};

/// A `worker.json` running `script` with `/bin/sh -c`; `$1` is `arg`.
fn shell(dir: &ScratchDir, script: &str, arg: &str, extra: Value) -> ProcessHandler {
    let mut config = json!({"executable": "/bin/sh", "argv": ["-c", script, "sh", arg]});
    if let (Some(config), Value::Object(extra)) = (config.as_object_mut(), extra) {
        config.extend(extra);
    }
    let name = format!("{}.json", uuid::Uuid::new_v4());
    ProcessHandler::load(&dir.write(&name, &config.to_string())).expect("load worker.json")
}

#[tokio::test]
async fn python_example_answers() {
    let handler = ProcessHandler::load(&examples_dir().join("worker.json")).expect("load");
    let outcome = run_text(&handler, "how are the tests going").await;
    assert_eq!(
        outcome,
        Ok(HandlerOutput {
            reply: Some("5 words, 23 characters; the longest word is 'tests'.".to_owned()),
            usage: Some(Usage::default()),
            ..HandlerOutput::default()
        })
    );
}

#[tokio::test]
async fn the_request_is_one_camel_case_line_then_end_of_file() {
    let dir = ScratchDir::new();
    // Replies with the request it read, and whether stdin then ended.
    let script = dir.write(
        "echo.py",
        "import json, sys\nline = sys.stdin.readline()\nrest = sys.stdin.read()\n\
         print(json.dumps({'reply': json.dumps({'line': line, 'rest': rest})}))\n",
    );
    let config = json!({"executable": "python3", "argv": [script]});
    let handler =
        ProcessHandler::load(&dir.write("worker.json", &config.to_string())).expect("load");
    let mut question = job("what time is it?", 20_000);
    question.attempt = 2;
    question.message.deadline = Some(Timestamp::parse("2030-01-01T00:00:00Z").expect("time"));
    let outcome = run(&handler, &question, CancellationToken::new()).await;
    let echoed: Value = serde_json::from_str(reply_of(&outcome)).expect("json");
    assert_eq!(echoed["rest"], "");
    let line = echoed["line"].as_str().expect("line");
    assert!(
        line.ends_with('\n') && line.matches('\n').count() == 1,
        "{line:?}"
    );
    let request: Value = serde_json::from_str(line).expect("request json");
    assert_eq!(request["attempt"], 2);
    assert_eq!(request["jobKey"], question.job_key);
    assert_eq!(request["runtimeId"], question.runtime_id.to_string());
    assert_eq!(request["deadline"], "2030-01-01T00:00:00Z");
    assert_eq!(request["timeoutMs"], 20_000);
    assert_eq!(request["message"]["text"], "what time is it?");
    assert_eq!(request.get("opened"), None);
}

#[tokio::test]
async fn malformed_output_fails_with_a_reason() {
    let dir = ScratchDir::new();
    let limits = json!({"maxResponseBytes": 256});
    // (shell script, the start of the reason)
    let table = [
        (
            r#"printf '{"reply":"a"}\n{"reply":"b"}\n'"#,
            "invalid_output: more than one line",
        ),
        ("echo 'here is my answer'", "invalid_output: invalid JSON"),
        (
            r#"echo '{"reply":"a","confidence":1}'"#,
            "invalid_output: unknown field `confidence`",
        ),
        (
            r#"echo '{"reply":"a","skip":"b"}'"#,
            "invalid_output: `reply` and `skip`",
        ),
        ("true", "invalid_output: no response line"),
        (
            "head -c 400 /dev/zero | tr '\\0' x",
            "response_too_large: more than 256 bytes",
        ),
        (r#"echo '{"reply":"a"}'; exit 3"#, "exit_status: 3"),
        (r#"echo '{"reply":"a"}'; kill -9 $$"#, "signal: 9"),
    ];
    for (script, reason) in table {
        let handler = shell(&dir, script, "", limits.clone());
        let outcome = run_text(&handler, "q").await;
        assert!(
            reason_of(&outcome).starts_with(reason),
            "{script}: got {outcome:?}, wanted {reason:?}"
        );
    }
    // An error the handler reports itself fails the attempt with its code
    // (and nothing else: no usage it did not report).
    let handler = shell(
        &dir,
        r#"echo '{"error":"model_unavailable"}'"#,
        "",
        json!({}),
    );
    let outcome = run_text(&handler, "q").await;
    assert_eq!(
        outcome,
        Err(HandlerError {
            code: "model_unavailable".to_owned(),
            usage: None
        })
    );
}

#[tokio::test]
async fn a_request_over_the_limit_never_starts() {
    let dir = ScratchDir::new();
    let handler = shell(
        &dir,
        "echo started >> \"$1\"",
        "x",
        json!({"maxRequestBytes": 4096}),
    );
    let outcome = run_text(&handler, &"a".repeat(5000)).await;
    assert!(
        reason_of(&outcome).starts_with("request_too_large: "),
        "{outcome:?}"
    );
    assert!(!dir.path().join("x").exists());
}

/// The handler ignores SIGTERM, and so does the child it started: both
/// must be gone after the timeout plus the 1 s grace.
#[tokio::test]
async fn a_hung_process_is_killed_with_its_children_at_the_timeout() {
    let dir = ScratchDir::new();
    let pids = dir.path().join("pids");
    let script = r#"trap '' TERM
sleep 1000 &
echo "$$ $!" > "$1"
while :; do sleep 1; done"#;
    let handler = shell(&dir, script, &pids.to_string_lossy(), json!({}));
    assert_times_out(
        &handler,
        1500,
        Duration::from_millis(2500)..Duration::from_millis(5000),
    )
    .await;
    let pids = read_pids(&pids);
    assert_eq!(pids.len(), 2);
    for pid in pids {
        assert!(!process_alive(pid), "process {pid} survived");
    }
}

/// A handler that answers and exits while its child still runs (holding
/// stdout open): the answer counts, the child is ended.
#[tokio::test]
async fn no_child_outlives_a_handler_that_exited() {
    let dir = ScratchDir::new();
    let pids = dir.path().join("pids");
    let script = r#"sleep 1000 &
echo "$!" > "$1"
echo '{"reply":"done"}'"#;
    let handler = shell(&dir, script, &pids.to_string_lossy(), json!({}));
    let started = Instant::now();
    let outcome = run_text(&handler, "q").await;
    assert_eq!(reply_of(&outcome), "done");
    // Below the job's own 20 s timeout: the answer counted at once.
    assert!(started.elapsed() < Duration::from_secs(15));
    let child = read_pids(&pids)[0];
    assert!(!process_alive(child), "child {child} survived");
}

#[tokio::test]
async fn cancellation_stops_the_process_promptly() {
    let dir = ScratchDir::new();
    let pids = dir.path().join("pids");
    let handler = shell(
        &dir,
        "echo $$ > \"$1\"; exec sleep 1000",
        &pids.to_string_lossy(),
        json!({}),
    );
    assert_cancelled_promptly(&handler, cancelled_soon()).await;
    assert!(!process_alive(read_pids(&pids)[0]));
}

fn config_error(dir: &ScratchDir, config: &str) -> String {
    let path = dir.write(&format!("{}.json", uuid::Uuid::new_v4()), config);
    match ProcessHandler::load(&path) {
        Ok(handler) => panic!("{config} was accepted: {handler:?}"),
        Err(error) => error.to_string(),
    }
}

#[test]
fn worker_json_is_validated_at_load() {
    let dir = ScratchDir::new();
    // (worker.json, a part of the message)
    let table = [
        (
            r#"{"executable": "/bin/sh", "env": ["PATH", "AWS_SECRET_ACCESS_KEY"]}"#,
            "field `env`: `AWS_SECRET_ACCESS_KEY` looks like a credential",
        ),
        (
            r#"{"executable": "/bin/sh", "env": ["RELAYGER_TOKEN"]}"#,
            "`RELAYGER_TOKEN` looks like a credential",
        ),
        (
            r#"{"executable": "/bin/sh", "timeout": 5}"#,
            "field `timeout`: unknown field",
        ),
        (r#"{"executable": "./nope.sh"}"#, "is not a file"),
        (
            r#"{"executable": "no-such-program-here"}"#,
            "was not found on PATH",
        ),
        (
            r#"{"executable": "/bin/sh", "cwd": "missing-dir"}"#,
            "is not a directory",
        ),
    ];
    for (config, part) in table {
        let message = config_error(&dir, config);
        assert!(message.contains(part), "{config}: {message}");
    }
    dir.write("plain.sh", "echo hi\n");
    let message = config_error(&dir, r#"{"executable": "./plain.sh"}"#);
    assert!(message.contains("is not executable"), "{message}");
    let error = ProcessHandler::load(&dir.path().join("absent.json")).expect_err("missing");
    assert!(matches!(error, HandlerConfigError::Read { .. }), "{error}");
}

#[tokio::test]
async fn relative_paths_are_resolved_against_worker_json() {
    let dir = ScratchDir::new();
    std::fs::create_dir(dir.path().join("bin")).expect("mkdir");
    let script = dir.write(
        "bin/handler.sh",
        "#!/bin/sh\nprintf '{\"reply\":\"%s\"}\\n' \"$(basename \"$PWD\")\"\n",
    );
    make_executable(&script);
    std::fs::create_dir(dir.path().join("work")).expect("mkdir");
    let config = dir.write(
        "worker.json",
        r#"{"executable": "./bin/handler.sh", "cwd": "work"}"#,
    );
    let handler = ProcessHandler::load(&config).expect("load");
    assert!(handler.executable().is_absolute());
    let outcome = run_text(&handler, "q").await;
    assert_eq!(reply_of(&outcome), "work");
}

fn make_executable(path: &PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// The handler's stdout is the runner's pipe, never the worker's stdout;
/// its stderr reaches the worker's stderr prefixed with the file name.
#[test]
fn process_output_goes_to_stderr_never_stdout() {
    let (stdout, stderr) = run_probe("handlers_process::probe_child_output", "output", &[]);
    assert!(!stdout.contains("HANDLER-MARKER"), "stdout:\n{stdout}");
    assert!(
        stdout.contains("PROBE-REASON invalid_output: more than one line"),
        "{stdout}"
    );
    let line = stderr_line(&stderr, "HANDLER-MARKER on stderr");
    assert!(line.starts_with("[output.json "), "{line}");
}

#[tokio::test]
async fn probe_child_output() {
    if !is_probe("output") {
        return;
    }
    let dir = ScratchDir::new();
    let config = json!({"executable": "/bin/sh", "argv": ["-c",
        "echo 'HANDLER-MARKER on stdout'; echo '{}'; echo 'HANDLER-MARKER on stderr' >&2"]});
    let path = dir.write("output.json", &config.to_string());
    let handler = ProcessHandler::load(&path).expect("load");
    let outcome = run_text(&handler, "q").await;
    println!("PROBE-REASON {}", reason_of(&outcome));
}

/// The process gets only the allowed variables, never a credential, and no
/// variable holding the profile token, whatever its name.
#[test]
fn process_environment_holds_only_allowed_variables() {
    let env = [
        ("RELAYGER_TOKEN", "rt_probe_token"),
        ("DATABASE_URL", "postgres://user:pw@localhost/db"),
        ("AWS_SECRET_ACCESS_KEY", "aws-secret"),
        ("ALIAS_OF_PROFILE", "rt_probe_token"),
        ("PLAIN_SETTING", "visible"),
        ("NOT_ALLOWED", "hidden"),
    ];
    let (stdout, _) = run_probe("handlers_process::probe_child_env", "env", &env);
    let keys: Vec<&str> = probe_line(&stdout, "PROBE-ENV ").split(',').collect();
    // The interpreter may add its own (a version-manager shim, locale coercion), but
    // nothing else of the worker's environment arrives.
    assert!(
        keys.contains(&"PATH") && keys.contains(&"PLAIN_SETTING"),
        "{keys:?}"
    );
    for (name, _) in env.iter().filter(|(name, _)| *name != "PLAIN_SETTING") {
        assert!(!keys.contains(name), "{name} leaked: {keys:?}");
    }
    for key in &keys {
        assert!(!is_credential_variable(key), "{key} leaked: {keys:?}");
        assert!(
            *key != "HOME" && !key.starts_with("CARGO"),
            "{key} leaked: {keys:?}"
        );
    }
}

#[tokio::test]
async fn probe_child_env() {
    if !is_probe("env") {
        return;
    }
    let dir = ScratchDir::new();
    let script = dir.write(
        "env.py",
        "import json, os\nprint(json.dumps({'reply': ','.join(sorted(os.environ))}))\n",
    );
    let config = json!({"executable": "python3", "argv": ["-I", script],
        "env": ["PATH", "PLAIN_SETTING", "ALIAS_OF_PROFILE"]});
    let path = dir.write("env.json", &config.to_string());
    let handler = ProcessHandler::load(&path)
        .expect("load")
        .withhold_values(["rt_probe_token".to_owned()]);
    print_reply(&handler, "PROBE-ENV ").await;
}

#[tokio::test]
async fn a_context_that_cannot_be_read_fails_before_the_program_starts() {
    let dir = ScratchDir::new();
    let marker = dir.path().join("started");
    let script = format!("touch '{}'; echo '{{\"reply\":\"ran\"}}'", marker.display());
    let context = json!({"context": {"thread": {"limit": 5}, "notes": {}}});
    let handler = shell(&dir, &script, "", context.clone());
    assert!(handler.reads_context());
    // No client to read with.
    let outcome = run_text(&handler, "what was said?").await;
    let reason = reason_of(&outcome);
    assert!(reason.starts_with("context_failed: "), "{reason}");
    assert!(!marker.exists(), "the program started: {reason}");

    // A server that is not there: the thread read fails, retried like any
    // other failed attempt, and the program still never starts.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = listener.local_addr().expect("address");
    drop(listener);
    let client = relayger_worker::Client::new(format!("http://{address}"), "rt_probe_token");
    let handler = shell(&dir, &script, "", context).with_client(client);
    let outcome = run_text(&handler, "what was said?").await;
    let reason = reason_of(&outcome);
    assert!(reason.starts_with("context_failed: thread: "), "{reason}");
    assert!(!marker.exists(), "the program started: {reason}");
    assert!(!reason.contains("rt_probe_token"), "{reason}");

    // Without `context` nothing is read and the program runs.
    let plain = shell(&dir, &script, "", json!({}));
    assert!(!plain.reads_context());
    let outcome = run_text(&plain, "what was said?").await;
    assert_eq!(reply_of(&outcome), "ran");
    assert!(marker.exists());
}
