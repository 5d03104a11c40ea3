//! The web dashboard in a real headless browser (Debian's `chromium`, driven
//! by `puppeteer-core` from `tests/dashboard/`) against a real server and a
//! real worker: sign in, a runtime's counts change after a question, a dead
//! letter is retried, a contact request accepted and one declined, a sealed message shown as
//! sealed; then, with a worker that answers, the charts show the answers, a
//! search by sender finds the sender's job, a job view shows the question
//! and the error of its failed attempt, and two dead letters are retried
//! together. The screenshots in the README are taken on the way.

use crate::cli_support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use cli_support::{Befriended, CliTest, Party, text};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("repository root")
        .to_path_buf()
}

/// `tests/dashboard` with its locked dependencies installed (the same rule
/// as the SDK's test script: `npm ci` when missing or older than the lock).
fn browser_test_dir() -> PathBuf {
    let dir = repo_root().join("tests/dashboard");
    let installed = dir.join("node_modules/.package-lock.json");
    let stale = match (
        std::fs::metadata(&installed).and_then(|m| m.modified()),
        std::fs::metadata(dir.join("package-lock.json")).and_then(|m| m.modified()),
    ) {
        (Ok(installed), Ok(lock)) => lock > installed,
        _ => true,
    };
    if stale {
        let status = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund"])
            .current_dir(&dir)
            .status()
            .expect("run npm ci in tests/dashboard");
        assert!(status.success(), "npm ci in tests/dashboard failed");
    }
    dir
}

/// Debian's `chromium` (scripts/test installs it as root).
fn chromium() -> String {
    let found = Command::new("sh")
        .args(["-c", "command -v chromium"])
        .output()
        .expect("sh");
    let path = String::from_utf8_lossy(&found.stdout).trim().to_owned();
    assert!(
        found.status.success() && !path.is_empty(),
        "the dashboard test needs Debian's chromium package (scripts/test installs it as root)"
    );
    path
}

#[tokio::test(flavor = "multi_thread")]
async fn the_dashboard_in_a_browser_shows_counts_moving_retries_a_dead_letter_and_answers_a_request()
 {
    let test_dir = browser_test_dir();
    let chromium = chromium();
    let t = CliTest::start("dashboard-browser").await;
    let Befriended {
        receiver_number: assistant_number,
        room,
        ..
    } = t.register_pair(
        Party::person("asker", "Asker"),
        Party::agent("assistant", "Assistant"),
    );
    let stranger = t.new_requester(Party::person("stranger", "Stranger"), &assistant_number);
    let pest = t.new_requester(Party::person("pest", "Pest"), &assistant_number);
    // Before the worker registers (`--from now`), so only the page sees it.
    let sealed = t.json(&[
        "--profile",
        "asker",
        "send",
        "--room",
        &room,
        "the sealed plan",
        "--sealed",
    ]);

    // A handler that always fails; with maxAttempts 1 its job is a dead letter.
    std::fs::write(
        t.cwd().join("fail.sh"),
        "read -r line\necho '{\"error\":\"the model is unavailable\"}'\n",
    )
    .expect("script");
    std::fs::write(
        t.cwd().join("worker.json"),
        r#"{"executable": "sh", "argv": ["fail.sh"], "env": ["PATH"]}"#,
    )
    .expect("worker.json");
    std::fs::write(t.cwd().join("policy.json"), r#"{"maxAttempts": 1}"#).expect("policy");
    // A handler that always answers, for the charts.
    std::fs::write(
        t.cwd().join("answer.sh"),
        "read -r line\necho '{\"reply\":\"Take an umbrella.\"}'\n",
    )
    .expect("script");
    std::fs::write(
        t.cwd().join("answer.json"),
        r#"{"executable": "sh", "argv": ["answer.sh"], "env": ["PATH"]}"#,
    )
    .expect("answer.json");

    let dashboard_token = t.json(&[
        "--profile",
        "assistant",
        "tokens",
        "create",
        "--scopes",
        "read,write,contacts",
    ]);
    let asker_token = t.json(&[
        "--profile",
        "asker",
        "tokens",
        "create",
        "--scopes",
        "read,write",
    ]);

    let stranger_token = t.json(&[
        "--profile",
        "stranger",
        "tokens",
        "create",
        "--scopes",
        "read,write",
    ]);

    let cwd = t.cwd().to_string_lossy().into_owned();
    // The README's screenshots are refreshed only when asked
    // (RELAYGER_UPDATE_SCREENSHOT=1), so a test run leaves the tree clean.
    let screenshots = if std::env::var_os("RELAYGER_UPDATE_SCREENSHOT").is_some() {
        repo_root().join("docs")
    } else {
        t.cwd().to_path_buf()
    };
    let output = t
        .cli
        .shell_command(
            "node --test --test-reporter=spec dashboard.test.mjs",
            &test_dir,
        )
        .expect("node command")
        .stdin(Stdio::null())
        .envs([
            ("RELAYGER_URL", t.url()),
            ("CHROMIUM", &chromium),
            ("DASHBOARD_TOKEN", &text(&dashboard_token["secret"])),
            ("ASKER_TOKEN", &text(&asker_token["secret"])),
            ("ROOM_ID", &room),
            ("STRANGER_NUMBER", &stranger),
            ("PEST_NUMBER", &pest),
            ("SEALED_MESSAGE_ID", &text(&sealed["messageId"])),
            (
                "WORKER_COMMAND",
                "relayger --profile assistant --json worker run dash-worker --from now \
                 --process ./worker.json --policy ./policy.json",
            ),
            (
                "ANSWER_WORKER_COMMAND",
                "relayger --profile assistant --json worker run answer-worker --from now \
                 --process ./answer.json",
            ),
            ("WORKER_CWD", &cwd),
            ("STRANGER_TOKEN", &text(&stranger_token["secret"])),
            ("ASSISTANT_NUMBER", &assistant_number),
            ("SCREENSHOT_DIR", &screenshots.to_string_lossy()),
        ])
        .output()
        .expect("run node --test");
    assert!(
        output.status.success(),
        "the browser test failed\n--- stdout\n{}\n--- stderr\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    for name in [
        "dashboard.png",
        "dashboard-signin.png",
        "dashboard-charts.png",
        "dashboard-job.png",
    ] {
        let shot = std::fs::metadata(screenshots.join(name))
            .unwrap_or_else(|e| panic!("the screenshot {name} was taken: {e}"));
        assert!(shot.len() > 10_000, "{name}: {} bytes", shot.len());
    }
}
