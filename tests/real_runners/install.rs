//! Installs the pinned real CLIs once (npm, under `<target>/real-runners`), guarded by a
//! cross-process file lock and an in-process `OnceLock`, and prints their versions once.

use std::fs;
use std::io::Write;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use super::support::wait_child;

/// The pinned claude package.
pub const CLAUDE_PKG: &str = "@anthropic-ai/claude-code";
/// The pinned claude version.
pub const CLAUDE_VERSION: &str = "2.1.328";
/// The pinned codex package.
pub const CODEX_PKG: &str = "@openai/codex";
/// The pinned codex version.
pub const CODEX_VERSION: &str = "0.171.0";
/// Upper bound for the npm install.
pub const NPM_DEADLINE: Duration = Duration::from_secs(900);

/// The installed CLIs.
#[derive(Debug, Clone)]
pub struct Clis {
    /// `node_modules/.bin/claude`.
    pub claude: PathBuf,
    /// `node_modules/.bin/codex`.
    pub codex: PathBuf,
}

/// The cargo target folder (the test binary's `llm-judge` lives in `<target>/<profile>/`).
pub fn target_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(dir);
    }
    let bin = Path::new(super::support::BIN);
    bin.parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"))
}

/// `<target>/real-runners`: the npm prefix and the measurements file.
pub fn lane_dir() -> PathBuf {
    target_dir().join("real-runners")
}

fn installed_version(dir: &Path, pkg: &str) -> Option<String> {
    let text = fs::read_to_string(dir.join("node_modules").join(pkg).join("package.json")).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v.get("version")?.as_str().map(str::to_string)
}

fn up_to_date(dir: &Path) -> bool {
    dir.join("node_modules/.bin/claude").exists()
        && dir.join("node_modules/.bin/codex").exists()
        && installed_version(dir, CLAUDE_PKG).as_deref() == Some(CLAUDE_VERSION)
        && installed_version(dir, CODEX_PKG).as_deref() == Some(CODEX_VERSION)
}

fn npm_install(dir: &Path) -> Result<(), String> {
    let log = dir.join("npm-install.log");
    let out = fs::File::create(&log).map_err(|e| format!("create {}: {e}", log.display()))?;
    let err = out.try_clone().map_err(|e| format!("npm log: {e}"))?;
    let mut child = Command::new("npm")
        .arg("install")
        .arg("--prefix")
        .arg(dir)
        .args(["--no-audit", "--no-fund", "--no-save"])
        .arg(format!("{CLAUDE_PKG}@{CLAUDE_VERSION}"))
        .arg(format!("{CODEX_PKG}@{CODEX_VERSION}"))
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .map_err(|e| format!("could not start npm (is Node/npm installed?): {e}"))?;
    let tail = || fs::read_to_string(&log).unwrap_or_default();
    match wait_child(&mut child, NPM_DEADLINE) {
        Some(s) if s.success() => Ok(()),
        Some(s) => Err(format!("npm install failed ({s}): {}", tail())),
        None => Err(format!(
            "npm install did not finish in {NPM_DEADLINE:?}: {}",
            tail()
        )),
    }
}

/// `program --version`, bounded by 60 s.
fn version(program: &Path, home: &Path) -> Result<String, String> {
    let out = home.join("version.out");
    let mut child = Command::new(program)
        .arg("--version")
        .env_clear()
        .env("HOME", home)
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .stdin(Stdio::null())
        .stdout(fs::File::create(&out).map_err(|e| format!("{}: {e}", out.display()))?)
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("{} --version: {e}", program.display()))?;
    match wait_child(&mut child, Duration::from_secs(60)) {
        Some(s) if s.success() => Ok(fs::read_to_string(&out)
            .unwrap_or_default()
            .trim()
            .to_string()),
        Some(s) => Err(format!("{} --version failed: {s}", program.display())),
        None => Err(format!(
            "{} --version did not finish in 60 s",
            program.display()
        )),
    }
}

fn install() -> Result<Clis, String> {
    let dir = lane_dir();
    fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    let lock_path = dir.join("install.lock");
    let lock = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| format!("open {}: {e}", lock_path.display()))?;
    // SAFETY: flock on a file descriptor we own; released when `lock` is dropped.
    if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(format!(
            "flock {}: {}",
            lock_path.display(),
            std::io::Error::last_os_error()
        ));
    }
    if !up_to_date(&dir) {
        npm_install(&dir)?;
        if !up_to_date(&dir) {
            return Err(format!(
                "after npm install, {} does not hold claude {CLAUDE_VERSION} and codex {CODEX_VERSION}",
                dir.display()
            ));
        }
    }
    drop(lock);
    let home = tempfile::tempdir_in(&dir).map_err(|e| format!("temp HOME: {e}"))?;
    let claude = dir.join("node_modules/.bin/claude");
    let codex = dir.join("node_modules/.bin/codex");
    let claude_version = version(&claude, home.path())?;
    let codex_version = version(&codex, home.path())?;
    let line = format!("real runners tested: claude {claude_version}, codex {codex_version}\n");
    let _ = std::io::stderr().write_all(line.as_bytes());
    // A fresh measurements file per lane run, headed by the versions measured.
    let _ = fs::write(dir.join("measurements.txt"), &line);
    Ok(Clis { claude, codex })
}

/// The installed CLIs; installs them on first use. An install failure fails the test.
pub fn clis() -> &'static Clis {
    static CLIS: OnceLock<Result<Clis, String>> = OnceLock::new();
    match CLIS.get_or_init(install) {
        Ok(clis) => clis,
        Err(e) => panic!("real-runner lane: installing the pinned CLIs failed: {e}"),
    }
}
