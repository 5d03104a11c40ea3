//! The official A2A clients the end-to-end tests drive Relayger's A2A
//! server with, installed once under the target directory (pinned, like
//! `scripts/schemathesis`): the Python `a2a-sdk` from PyPI into a
//! virtualenv, the JavaScript `@a2a-js/sdk` from npm (`tests/a2a/package.json`
//! and its lock) into a folder. Each install goes to a fresh directory that
//! is renamed into place once complete, so tests installing at once in
//! parallel never see half an install.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, bail};

/// The Python SDK, as pip pins it.
pub const PYTHON_SDK: &str = "a2a-sdk==1.3.0";
/// The Python SDK's server side and the ASGI server that serves it (for
/// `tests/a2a/agent.py`, an outside agent our workers ask).
pub const PYTHON_SDK_SERVER: &[&str] = &["a2a-sdk[http-server]==1.3.0", "uvicorn==0.55.0"];
/// The JavaScript SDK's version (pinned in `tests/a2a/package.json`).
pub const JAVASCRIPT_SDK_VERSION: &str = "1.3.0";

/// `tests/a2a`: the client scripts and the JavaScript SDK's package.
pub fn scripts_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("a2a")
}

/// The repository's root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// Where the SDKs are installed: `<target>/a2a-sdks`, `<target>` being
/// `CARGO_TARGET_DIR` or the directory above the running test's profile.
fn install_root() -> anyhow::Result<PathBuf> {
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        return Ok(PathBuf::from(dir).join("a2a-sdks"));
    }
    let exe = std::env::current_exe().context("current_exe")?;
    // target/<profile>/deps/<test>
    exe.ancestors()
        .nth(3)
        .map(|target| target.join("a2a-sdks"))
        .context("the target directory of the running test")
}

/// Runs `command` (an install step); its output is in the error when it
/// fails, with `hint` first.
fn run(mut command: Command, hint: &str) -> anyhow::Result<()> {
    let output = command
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("{hint}: could not start {command:?}"))?;
    if !output.status.success() {
        bail!(
            "{hint}\n--- stdout\n{}\n--- stderr\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(())
}

/// Installs into `<root>/<name>` unless it is there: `install` fills a
/// fresh directory, which is then renamed into place (a parallel install
/// that got there first wins; this one is dropped).
fn installed(
    name: &str,
    install: impl FnOnce(&Path) -> anyhow::Result<()>,
) -> anyhow::Result<PathBuf> {
    let root = install_root()?;
    let done = root.join(name);
    if done.join(".complete").is_file() {
        return Ok(done);
    }
    std::fs::create_dir_all(&root)?;
    let fresh = root.join(format!("{name}.installing-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&fresh);
    std::fs::create_dir_all(&fresh)?;
    if let Err(err) = install(&fresh) {
        let _ = std::fs::remove_dir_all(&fresh);
        return Err(err);
    }
    std::fs::write(fresh.join(".complete"), "")?;
    if std::fs::rename(&fresh, &done).is_err() {
        // Another test installed it meanwhile (or a stale one is in the
        // way without its marker: replace it).
        if done.join(".complete").is_file() {
            let _ = std::fs::remove_dir_all(&fresh);
        } else {
            let _ = std::fs::remove_dir_all(&done);
            std::fs::rename(&fresh, &done).context("move the install into place")?;
        }
    }
    Ok(done)
}

/// The Python of a virtualenv holding [`PYTHON_SDK`].
pub fn python_sdk() -> anyhow::Result<PathBuf> {
    python_venv("python-a2a-sdk-1.3.0", &[PYTHON_SDK])
}

/// The Python of a virtualenv holding [`PYTHON_SDK_SERVER`].
pub fn python_sdk_server() -> anyhow::Result<PathBuf> {
    python_venv("python-a2a-sdk-server-1.3.0", PYTHON_SDK_SERVER)
}

/// A virtualenv `name` with `packages` from PyPI; its Python.
fn python_venv(name: &str, packages: &[&str]) -> anyhow::Result<PathBuf> {
    let venv = installed(name, |dir| {
        let mut venv = Command::new("python3");
        venv.args(["-m", "venv"]).arg(dir);
        run(
            venv,
            "creating a virtualenv failed (python3 with venv is needed)",
        )?;
        let mut pip = Command::new(dir.join("bin/python"));
        pip.args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .args(packages);
        run(
            pip,
            &format!(
                "installing {} from PyPI failed: is PyPI reachable from here?",
                packages.join(" ")
            ),
        )
    })?;
    Ok(venv.join("bin/python"))
}

/// A folder whose `node_modules` holds `@a2a-js/sdk` as
/// `tests/a2a/package-lock.json` pins it.
pub fn javascript_sdk() -> anyhow::Result<PathBuf> {
    installed(&format!("js-a2a-sdk-{JAVASCRIPT_SDK_VERSION}"), |dir| {
        for file in ["package.json", "package-lock.json"] {
            std::fs::copy(scripts_dir().join(file), dir.join(file))
                .with_context(|| format!("copy tests/a2a/{file}"))?;
        }
        let mut npm = Command::new("npm");
        npm.args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
            .current_dir(dir);
        run(
            npm,
            "installing @a2a-js/sdk from npm failed: are Node (20 or newer), npm and the npm registry reachable?",
        )
    })
}

/// Makes `dir` run `script` (a file of `tests/a2a`) with the JavaScript SDK:
/// the script is copied there beside a link to the SDK's `node_modules`
/// (Node resolves imports from the script's folder). The copied script.
pub fn javascript_script(dir: &Path, script: &str) -> anyhow::Result<PathBuf> {
    let modules = javascript_sdk()?.join("node_modules");
    let link = dir.join("node_modules");
    if !link.exists() {
        std::os::unix::fs::symlink(&modules, &link).context("link node_modules")?;
    }
    let copy = dir.join(script);
    std::fs::copy(scripts_dir().join(script), &copy).with_context(|| format!("copy {script}"))?;
    Ok(copy)
}
