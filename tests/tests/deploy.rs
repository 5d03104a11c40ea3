//! The deployment files under `deploy/` are valid for the tools that read
//! them: the systemd units pass `systemd-analyze verify` with no warning, and
//! the command lines they start parse with the real binaries.

use std::path::{Path, PathBuf};
use std::process::Command;

use relayger_tests::{binary, temp_dir};

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy")
}

/// A unit's `ExecStart=` with the installed binary paths replaced by the
/// built ones (verify refuses a command that is not executable).
fn localised(unit: &str) -> String {
    let server = binary("relayger-server").expect("relayger-server binary");
    let cli = binary("relayger").expect("relayger binary");
    unit.replace(
        "/usr/local/bin/relayger-server",
        &server.display().to_string(),
    )
    .replace("/usr/local/bin/relayger ", &format!("{} ", cli.display()))
}

fn exec_start(unit: &str) -> Vec<String> {
    let line = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("an ExecStart line");
    line.split_whitespace().map(str::to_owned).collect()
}

#[test]
fn systemd_units_pass_systemd_analyze_verify_without_warnings() {
    let dir = temp_dir("deploy-units").expect("temp dir");
    let server = std::fs::read_to_string(deploy_dir().join("systemd/relayger-server.service"))
        .expect("server unit");
    let worker = std::fs::read_to_string(deploy_dir().join("systemd/relayger-worker@.service"))
        .expect("worker unit");
    // A template is verified through an instance of it.
    let server_path = dir.join("relayger-server.service");
    let worker_path = dir.join("relayger-worker@reply-worker.service");
    std::fs::write(&server_path, localised(&server)).expect("write unit");
    std::fs::write(&worker_path, localised(&worker)).expect("write unit");

    let output = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&server_path)
        .arg(&worker_path)
        .output()
        .expect("systemd-analyze (scripts/test installs systemd when it is missing)");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "verify failed: {stderr}");
    // Unknown keys and bad values are only warnings to systemd: none allowed.
    assert!(stderr.trim().is_empty(), "verify warned: {stderr}");
}

#[test]
fn the_units_command_lines_parse_with_the_real_binaries() {
    let env = std::fs::read_to_string(deploy_dir().join("systemd/relayger-worker.env"))
        .expect("worker env example");
    let worker_args = env
        .lines()
        .find_map(|l| l.strip_prefix("RELAYGER_WORKER_ARGS="))
        .expect("RELAYGER_WORKER_ARGS in the example");
    for (unit, instance) in [
        ("relayger-server.service", None),
        ("relayger-worker@.service", Some("reply-worker")),
    ] {
        let text = std::fs::read_to_string(deploy_dir().join("systemd").join(unit)).expect("unit");
        let mut argv: Vec<String> = exec_start(&localised(&text))
            .into_iter()
            .flat_map(|arg| match arg.as_str() {
                "$RELAYGER_WORKER_ARGS" => {
                    worker_args.split_whitespace().map(str::to_owned).collect()
                }
                _ => vec![arg.replace("%i", instance.unwrap_or_default())],
            })
            .collect();
        // `--help` after the unit's own arguments: clap refuses an unknown
        // flag or a bad value before it prints help.
        argv.push("--help".to_owned());
        let output = Command::new(&argv[0])
            .args(&argv[1..])
            .output()
            .expect("run the unit's command");
        assert!(
            output.status.success(),
            "{unit}: {argv:?} does not parse: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}
