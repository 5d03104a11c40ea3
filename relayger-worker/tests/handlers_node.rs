//! The Node module handler against a real `node`: the example, limits,
//! cancellation, malformed results, stdout cleanliness and the environment.

use crate::handlers_support;

use std::time::{Duration, Instant};

use handlers_support::{
    ScratchDir, assert_cancelled_promptly, assert_times_out, cancelled_soon, examples_dir,
    is_probe, job, print_reply, probe_line, reason_of, reply_of, run, run_probe, run_text,
    stderr_line,
};
use relayger_worker::{
    CancellationToken, HandlerConfigError, HandlerError, NodeModuleHandler, SealedContent, Usage,
};

fn module(dir: &ScratchDir, name: &str, source: &str) -> NodeModuleHandler {
    NodeModuleHandler::load(&dir.write(name, source)).expect("load module")
}

#[tokio::test]
async fn example_module_answers_and_keeps_its_note() {
    let handler =
        NodeModuleHandler::load(&examples_dir().join("message-handler.mjs")).expect("load");

    let question = job("What is the status of the build?", 20_000);
    let outcome = run(&handler, &question, CancellationToken::new()).await;
    assert_eq!(
        reply_of(&outcome),
        "7 words: \"What is the status of the build?\""
    );
    let Ok(result) = &outcome else { unreachable!() };
    assert_eq!(result.note, None);
    assert_eq!(result.usage, Some(Usage::default()));

    let remember = job("remember: the release is on Friday", 20_000);
    let outcome = run(&handler, &remember, CancellationToken::new()).await;
    assert_eq!(reply_of(&outcome), "Noted (6 words).");
    let Ok(result) = outcome else { unreachable!() };
    let note = result.note.expect("a note");
    let id = remember.message.message_id;
    assert_eq!(note.key, format!("remember:{id}"));
    assert_eq!(note.text, "the release is on Friday");
    assert_eq!(note.version, 0);
    assert_eq!(note.source_message_ids, [id]);
}

#[tokio::test]
async fn an_infinite_loop_is_terminated_at_the_timeout() {
    let dir = ScratchDir::new();
    let handler = module(
        &dir,
        "loop.mjs",
        "export function handle() { for (;;) {} }\n",
    );
    // The timeout, the 1 s grace, then the thread is terminated. Generous
    // upper bound: machines under load are slow; the point is that the loop
    // is ended, not left to run.
    assert_times_out(
        &handler,
        1500,
        Duration::from_millis(1500)..Duration::from_secs(15),
    )
    .await;
}

#[tokio::test]
async fn running_out_of_heap_fails_only_that_attempt() {
    let dir = ScratchDir::new();
    let handler = module(
        &dir,
        "hungry.mjs",
        r#"export function handle({ message }) {
  if (message.text !== 'allocate') return { reply: 'still here' };
  const hoard = [];
  for (;;) hoard.push(new Array(100000).fill({ filler: hoard.length }));
}
"#,
    );
    let started = Instant::now();
    let outcome = run(&handler, &job("allocate", 60_000), CancellationToken::new()).await;
    assert_eq!(reason_of(&outcome), "out_of_memory");
    assert!(started.elapsed() < Duration::from_secs(30));
    // The same handler serves the next job.
    let next = run_text(&handler, "hello").await;
    assert_eq!(reply_of(&next), "still here");
}

/// The whole handler process is bounded, not only the JavaScript heap: a
/// module that keeps Buffers (memory outside the heap) is stopped once the
/// process's resident memory passes 384 MiB, with a clear error, and the
/// same handler serves the next job (issue #38, item 8).
#[tokio::test]
async fn a_module_hoarding_buffers_is_stopped_at_the_process_memory_limit() {
    let dir = ScratchDir::new();
    let handler = module(
        &dir,
        "buffers.mjs",
        r#"export async function handle({ message }) {
  if (message.text !== 'allocate') return { reply: 'still here' };
  const hoard = [];
  for (;;) {
    hoard.push(Buffer.alloc(16 * 1024 * 1024, hoard.length % 251));
    await new Promise((resolve) => setImmediate(resolve));
  }
}
"#,
    );
    let started = Instant::now();
    let outcome = run(&handler, &job("allocate", 60_000), CancellationToken::new()).await;
    let reason = reason_of(&outcome);
    println!("buffers: {reason} after {:?}", started.elapsed());
    assert!(
        reason.starts_with("out_of_memory: the handler's process used "),
        "{reason}"
    );
    assert!(reason.contains("over its limit of 384 MiB"), "{reason}");
    assert!(started.elapsed() < Duration::from_secs(30));
    let next = run_text(&handler, "hello").await;
    assert_eq!(reply_of(&next), "still here");
}

#[tokio::test]
async fn cancellation_stops_the_module_promptly() {
    let dir = ScratchDir::new();
    let stubborn = module(
        &dir,
        "stubborn.mjs",
        "export function handle() { return new Promise(() => {}); }\n",
    );
    assert_cancelled_promptly(&stubborn, cancelled_soon()).await;

    // A module that honours its signal ends within the grace, and what it
    // reports about its usage is kept. It is cancelled once it has started
    // (it leaves a marker file): cancelled earlier, nothing would start and
    // there would be no usage to keep.
    let marker = dir.path().join("polite-started");
    let polite = module(
        &dir,
        "polite.mjs",
        &format!(
            r#"import {{ writeFileSync }} from 'node:fs';
export function handle({{ signal }}) {{
  const stopped = new Promise((resolve) => signal.addEventListener('abort', () => resolve({{
    error: `stopped: ${{signal.reason.name}}`,
    usage: {{ modelCalls: 1, inputTokens: 10, outputTokens: 2 }},
  }})));
  writeFileSync({marker:?}, 'started');
  return stopped;
}}
"#
        ),
    );
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    let started_marker = marker.clone();
    tokio::spawn(async move {
        // Waits on the module's own sign of life, not on a guess of how
        // long a thread takes to start on a busy machine.
        while !started_marker.exists() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        trigger.cancel();
    });
    let started = Instant::now();
    let outcome = run(&polite, &job("wait", 60_000), cancel).await;
    assert_eq!(
        outcome,
        Err(HandlerError {
            code: "cancelled".to_owned(),
            usage: Some(Usage {
                model_calls: 1,
                input_tokens: 10,
                output_tokens: 2
            }),
        })
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    // Already cancelled: nothing starts.
    let cancelled = CancellationToken::new();
    cancelled.cancel();
    assert_eq!(
        reason_of(&run(&polite, &job("x", 1000), cancelled).await),
        "cancelled"
    );
}

#[tokio::test]
async fn malformed_results_fail_with_a_reason() {
    let dir = ScratchDir::new();
    // (module body, the start of the reason)
    let table = [
        (
            "export const handle = () => ({ reply: 'a', skip: 'b' });",
            "invalid_output: `reply` and `skip`",
        ),
        (
            "export const handle = () => ({ answer: 'a' });",
            "invalid_output: unknown field `answer`",
        ),
        (
            "export const handle = () => ({ reply: null });",
            "invalid_output: `reply` must be a string, not null",
        ),
        (
            "export const handle = () => 'hello';",
            "invalid_output: expected a JSON object, found a string",
        ),
        (
            "export const handle = () => {};",
            "invalid_output: handle returned undefined",
        ),
        (
            "export const handle = () => ({ reply: 1n });",
            "invalid_output: the result is not JSON",
        ),
        (
            "export const handle = () => { throw new Error('boom'); };",
            "exception: Error: boom",
        ),
        (
            "export const handle = async () => { await null; throw new TypeError('late'); };",
            "exception: TypeError: late",
        ),
        (
            "export const handel = () => ({});",
            "module_failed: the module does not export a function `handle`",
        ),
        (
            "export const handle = () => ({ reply: 'x' }",
            "module_failed: SyntaxError",
        ),
        (
            "export const handle = () => process.exit(3);",
            "exit_status: 3",
        ),
    ];
    for (index, (source, reason)) in table.into_iter().enumerate() {
        let handler = module(&dir, &format!("bad{index}.mjs"), source);
        let outcome = run_text(&handler, "q").await;
        assert!(
            reason_of(&outcome).starts_with(reason),
            "{source}: got {outcome:?}, wanted {reason:?}"
        );
    }
}

#[tokio::test]
async fn unreported_usage_stays_unknown_and_commonjs_modules_load() {
    let dir = ScratchDir::new();
    let handler = module(
        &dir,
        "plain.js",
        "module.exports.handle = async ({ message }) => ({ reply: message.text.toUpperCase() });\n",
    );
    let outcome = run_text(&handler, "quiet").await;
    assert_eq!(reply_of(&outcome), "QUIET");
    let Ok(result) = outcome else { unreachable!() };
    assert_eq!(result.usage, None);
}

#[tokio::test]
async fn the_module_sees_exactly_the_documented_input() {
    let dir = ScratchDir::new();
    let handler = module(
        &dir,
        "input.mjs",
        "export const handle = (input) => ({ reply: JSON.stringify({ keys: Object.keys(input).sort(), \
         aborted: input.signal.aborted, opened: input.opened ?? null, attempt: input.attempt }) });\n",
    );
    let mut sealed = job("", 20_000);
    sealed.attempt = 3;
    sealed.opened = Some(SealedContent::Text {
        text: "for your eyes".to_owned(),
    });
    let outcome = run(&handler, &sealed, CancellationToken::new()).await;
    let seen: serde_json::Value = serde_json::from_str(reply_of(&outcome)).expect("json");
    assert_eq!(
        seen,
        serde_json::json!({
            "keys": ["attempt", "jobKey", "message", "opened", "runtimeId", "signal"],
            "aborted": false,
            "opened": {"text": "for your eyes"},
            "attempt": 3,
        })
    );
    let plain = run_text(&handler, "hi").await;
    let seen: serde_json::Value = serde_json::from_str(reply_of(&plain)).expect("json");
    assert_eq!(
        seen["keys"],
        serde_json::json!(["attempt", "jobKey", "message", "runtimeId", "signal"])
    );
}

#[test]
fn loading_checks_the_file() {
    let dir = ScratchDir::new();
    let text = dir.write("handler.txt", "export const handle = () => ({});");
    let missing = dir.path().join("missing.mjs");
    for path in [text, missing] {
        let error = NodeModuleHandler::load(&path).expect_err("refused");
        assert!(
            matches!(error, HandlerConfigError::Module { .. }),
            "{error}"
        );
    }
}

const CONSOLE_MODULE: &str = r#"import { writeSync } from 'node:fs';
export function handle() {
  console.log('MODULE-LOG-MARKER console.log');
  console.error('MODULE-LOG-MARKER console.error');
  process.stdout.write('MODULE-LOG-MARKER process.stdout\n');
  writeSync(1, 'MODULE-LOG-MARKER fd 1\n');
  return { reply: 'done' };
}
"#;

/// Module output must never reach the worker's stdout (where `--json`
/// prints its events). The probe child runs the module; its real stdout
/// (not libtest's capture) must not hold the marker, its stderr must hold
/// every line, prefixed with the module and message.
#[test]
fn module_output_goes_to_stderr_never_stdout() {
    let (stdout, stderr) = run_probe("handlers_node::probe_child_console", "console", &[]);
    assert!(!stdout.contains("MODULE-LOG-MARKER"), "stdout:\n{stdout}");
    assert!(stdout.contains("PROBE-OUTCOME done"), "stdout:\n{stdout}");
    for source in ["console.log", "console.error", "process.stdout", "fd 1"] {
        let line = stderr_line(&stderr, &format!("MODULE-LOG-MARKER {source}"));
        assert!(line.starts_with("[console.mjs "), "{line}");
    }
}

#[tokio::test]
async fn probe_child_console() {
    if !is_probe("console") {
        return;
    }
    let dir = ScratchDir::new();
    let handler = module(&dir, "console.mjs", CONSOLE_MODULE);
    print_reply(&handler, "PROBE-OUTCOME ").await;
}

/// The worker's credentials never reach the module: neither the thread's
/// `process.env` nor the host process's own environment.
#[test]
fn module_environment_holds_no_credentials() {
    let env = [
        ("RELAYGER_TOKEN", "rt_probe_token"),
        ("DATABASE_URL", "postgres://user:pw@localhost/db"),
        ("AWS_SECRET_ACCESS_KEY", "aws-secret"),
        ("PGPASSWORD", "pw"),
        ("HANDLER_COPY_OF_TOKEN", "rt_probe_token"),
        ("CACHE_URL", "redis://:hunter2@cache:6379/0"),
        ("APP_DB_URI", "postgres://app:hunter2@db/app"),
        ("POSTGRES_PASSWORD", "hunter2"),
        ("MYSQL_PWD", "hunter2"),
        ("SENTRY_DSN", "https://key@sentry.example/1"),
        ("PLAIN_SETTING", "visible"),
        ("DOCS_URL", "https://docs.example/relayger"),
    ];
    let (stdout, _) = run_probe("handlers_node::probe_child_env", "env", &env);
    let line = probe_line(&stdout, "PROBE-ENV ");
    let (thread, process) = line.split_once(" | ").expect("two lists");
    for keys in [thread, process] {
        let keys: Vec<&str> = keys.split(',').collect();
        assert!(keys.contains(&"PLAIN_SETTING"), "{keys:?}");
        assert!(
            keys.contains(&"DOCS_URL"),
            "a URL without a password passes: {keys:?}"
        );
        for (name, _) in &env[..10] {
            assert!(!keys.contains(name), "{name} leaked: {keys:?}");
        }
    }
}

#[tokio::test]
async fn probe_child_env() {
    if !is_probe("env") {
        return;
    }
    let dir = ScratchDir::new();
    let handler = module(
        &dir,
        "env.mjs",
        r#"import { readFileSync } from 'node:fs';
export function handle() {
  const thread = Object.keys(process.env).sort().join(',');
  const host = readFileSync('/proc/self/environ', 'utf8').split('\0')
    .filter(Boolean).map((entry) => entry.split('=')[0]).sort().join(',');
  return { reply: `${thread} | ${host}` };
}
"#,
    )
    .withhold_values(["rt_probe_token".to_owned()]);
    print_reply(&handler, "PROBE-ENV ").await;
}

/// #13 item 12: the heap limit itself. The module runs in a worker thread
/// created with `resourceLimits.maxOldGenerationSizeMb` = 128, and V8's heap
/// limit there is 128 MiB of old generation plus the young generation —
/// far below the host's default of gigabytes.
#[tokio::test]
async fn the_module_runs_with_a_128_mib_heap() {
    let dir = ScratchDir::new();
    let handler = module(
        &dir,
        "limits.mjs",
        "import { resourceLimits } from 'node:worker_threads';\n\
         import { getHeapStatistics } from 'node:v8';\n\
         export const handle = () => ({ reply: JSON.stringify({ resourceLimits, \
         heapSizeLimit: getHeapStatistics().heap_size_limit }) });\n",
    );
    let outcome = run_text(&handler, "limits?").await;
    let seen: serde_json::Value = serde_json::from_str(reply_of(&outcome)).expect("json");
    assert_eq!(
        seen["resourceLimits"]["maxOldGenerationSizeMb"], 128,
        "{seen}"
    );
    let limit = seen["heapSizeLimit"].as_u64().expect("heap size limit");
    const MIB: u64 = 1024 * 1024;
    assert!(
        (128 * MIB..=192 * MIB).contains(&limit),
        "heap limit {} MiB: {seen}",
        limit / MIB
    );
}
