//! A Python with the official A2A SDK (`a2a-sdk[http-server]`, pinned) and
//! an ASGI server, for tests that need an outside A2A agent: a virtual
//! environment under the target directory, created once (under a file
//! lock, so concurrent test processes wait for one install) and reused.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, bail};

/// What the environment holds; a change here makes a new environment.
pub const A2A_REQUIREMENTS: &[&str] = &["a2a-sdk[http-server]==1.3.0", "uvicorn==0.55.0"];

/// The environment's directory name below the target directory.
const VENV_DIR: &str = "a2a-python-1.3.0";
/// Written last: its presence says the install finished.
const DONE_MARKER: &str = ".installed";

/// The `python` of the environment, created on first use (needs `python3`
/// with `venv` and access to PyPI).
pub fn a2a_python() -> anyhow::Result<PathBuf> {
    let relayger = crate::binary("relayger")?;
    // target/<profile>/relayger → target/
    let target = relayger
        .parent()
        .and_then(Path::parent)
        .context("the target directory")?;
    let venv = target.join(VENV_DIR);
    let python = venv.join("bin").join("python");
    let lock_path = target.join(format!("{VENV_DIR}.lock"));
    let lock = std::fs::File::create(&lock_path)
        .with_context(|| format!("create {}", lock_path.display()))?;
    lock.lock().context("lock the Python environment")?;
    if !venv.join(DONE_MARKER).is_file() {
        let _ = std::fs::remove_dir_all(&venv);
        eprintln!(
            "creating {} ({})",
            venv.display(),
            A2A_REQUIREMENTS.join(", ")
        );
        run(Command::new("python3").arg("-m").arg("venv").arg(&venv))?;
        run(Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ])
            .args(A2A_REQUIREMENTS))?;
        std::fs::write(venv.join(DONE_MARKER), A2A_REQUIREMENTS.join("\n"))?;
    }
    lock.unlock().context("unlock the Python environment")?;
    Ok(python)
}

fn run(command: &mut Command) -> anyhow::Result<()> {
    let status = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .with_context(|| format!("run {command:?}"))?;
    if !status.success() {
        bail!("{command:?} failed ({status})");
    }
    Ok(())
}
