//! Running as a service (docs/reference.md, "Service"): the rendered systemd unit and
//! launchd plist, `llm-judge service install / uninstall / status` against recording fakes
//! of `systemctl`, `loginctl` and `launchctl`, and the daemon's notify messages against a
//! datagram socket the test opens in place of systemd's `NOTIFY_SOCKET`.
//!
//! Self-contained: every test works in its own temp folder with its own HOME and
//! XDG_CONFIG_HOME and a cleared environment, so the real home and the real service
//! manager are never touched. Every wait is bounded and every process is reaped.

mod install;
mod notify;
mod plan;

use std::fs;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

use crate::support::{BIN, NO_HANG, World};

const UNIT: &str = "llm-judge.service";
const LABEL: &str = "com.catstack.llm-judge";

/// One test's machine: the shared world's temp folder and HOME, an XDG_CONFIG_HOME
/// and a state folder with spaces in their names (the state folder not created: the
/// service commands make it), fake service managers, and an XDG_RUNTIME_DIR holding the
/// socket a systemd user manager listens on (`systemd/private`), so install finds a
/// user session.
struct Machine {
    _world: World,
    root: PathBuf,
    home: PathBuf,
    xdg: PathBuf,
    state: PathBuf,
    fakes: PathBuf,
    calls: PathBuf,
    runtime: PathBuf,
}

const FAKE_SYSTEMCTL: &str = r#"#!/bin/sh
echo "systemctl $*" >> "$FAKE_DIR/calls"
if [ "$2" = status ]; then
  echo "fake: $UNIT_STATE"
  exit "${FAKE_STATUS_RC:-0}"
fi
exit "${FAKE_SYSTEMCTL_RC:-0}"
"#;

const FAKE_LOGINCTL: &str = r#"#!/bin/sh
echo "loginctl $*" >> "$FAKE_DIR/calls"
if [ -z "$FAKE_LINGER" ]; then
  echo "Failed to connect to bus: No such file or directory" >&2
  exit 1
fi
echo "$FAKE_LINGER"
"#;

/// launchctl with a little state: bootstrap loads, bootout unloads, print tells.
const FAKE_LAUNCHCTL: &str = r#"#!/bin/sh
echo "launchctl $*" >> "$FAKE_DIR/calls"
case "$1" in
  print) [ -f "$FAKE_DIR/loaded" ] || { echo "Could not find service" >&2; exit 113; }
         echo "state = running" ;;
  bootstrap) : > "$FAKE_DIR/loaded" ;;
  bootout) rm -f "$FAKE_DIR/loaded" ;;
esac
exit 0
"#;

impl Machine {
    fn new() -> Machine {
        let shared = World::new();
        // No config file in HOME: the service files name one only when there is one.
        fs::remove_dir_all(shared.xdg.join("llm-judge")).unwrap();
        let root = shared.root.clone();
        let world = Machine {
            home: shared.home.clone(),
            xdg: root.join("xdg config"),
            state: root.join("state dir"),
            fakes: root.join("fakes"),
            calls: root.join("fakes/calls"),
            runtime: root.join("session"),
            root,
            _world: shared,
        };
        for d in [&world.home, &world.xdg, &world.fakes] {
            fs::create_dir_all(d).unwrap();
        }
        // The socket file stays once its listener is gone: install only looks for it.
        fs::DirBuilder::new()
            .mode(0o700)
            .recursive(true)
            .create(world.runtime.join("systemd"))
            .unwrap();
        drop(
            std::os::unix::net::UnixListener::bind(world.runtime.join("systemd/private")).unwrap(),
        );
        for (name, body) in [
            ("systemctl", FAKE_SYSTEMCTL),
            ("loginctl", FAKE_LOGINCTL),
            ("launchctl", FAKE_LAUNCHCTL),
        ] {
            let path = world.fakes.join(name);
            fs::write(&path, body).unwrap();
            fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
        }
        world
    }

    /// The PATH every command here gets: the fakes first.
    fn path(&self) -> String {
        format!("{}:/usr/bin:/bin", self.fakes.display())
    }

    /// `llm-judge --state-dir <state> service ...` with only the environment given here.
    fn service(&self, manager: &str, args: &[&str]) -> Command {
        let mut cmd = Command::new(BIN);
        cmd.env_clear()
            .env("PATH", self.path())
            .env("HOME", &self.home)
            .env("USER", "tester")
            .env("FAKE_DIR", &self.fakes)
            .env("XDG_RUNTIME_DIR", &self.runtime)
            .env("LLM_JUDGE_SERVICE_MANAGER", manager)
            .arg("--state-dir")
            .arg(&self.state)
            .arg("service")
            .args(args);
        cmd
    }

    /// The service manager calls recorded so far (loginctl's read-only query included).
    fn calls(&self) -> Vec<String> {
        fs::read_to_string(&self.calls)
            .unwrap_or_default()
            .lines()
            .map(String::from)
            .collect()
    }

    fn calls_of(&self, program: &str) -> Vec<String> {
        let prefix = format!("{program} ");
        self.calls()
            .into_iter()
            .filter(|c| c.starts_with(&prefix))
            .collect()
    }

    fn clear_calls(&self) {
        let _ = fs::remove_file(&self.calls);
    }

    fn unit_path(&self) -> PathBuf {
        self.xdg.join("systemd/user").join(UNIT)
    }

    fn plist_path(&self) -> PathBuf {
        self.home
            .join("Library/LaunchAgents")
            .join(format!("{LABEL}.plist"))
    }
}

/// Runs `cmd` to the end, killing it if it outlives `limit`.
fn run(mut cmd: Command, limit: Duration) -> Output {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().unwrap();
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = match rx.recv_timeout(limit) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            // SAFETY: kill(2) on a child we have not reaped yet (the waiter reaps it).
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            let _ = waiter.join();
            panic!("{cmd:?} did not finish within {limit:?}");
        }
    };
    let _ = waiter.join();
    out
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn ok(out: &Output) -> String {
    let (stdout, stderr) = text(out);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    stdout
}

/// The test binary's path as the unit and plist must hold it.
fn bin() -> String {
    fs::canonicalize(BIN).unwrap().to_str().unwrap().to_string()
}

fn uid() -> u32 {
    // SAFETY: getuid(2) cannot fail.
    unsafe { libc::getuid() }
}

/// The line of `text` that starts with `prefix`.
fn line<'a>(text: &'a str, prefix: &str) -> &'a str {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line starting with {prefix:?} in:\n{text}"))
}

/// The value of `key=` in a rendered unit, given the quoting rules of systemd.
fn quoted(s: &str) -> String {
    format!(
        "\"{}\"",
        s.replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('%', "%%")
            .replace('$', "$$")
    )
}

fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/bin", "/bin", "/usr/sbin", "/sbin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// `systemd-analyze verify --user` on a unit file, when the tool is installed.
fn systemd_verify(world: &Machine, unit: &Path) {
    let Some(tool) = find_program("systemd-analyze") else {
        println!(
            "note: systemd-analyze is not installed: skipping `systemd-analyze verify` (install Debian's systemd package)"
        );
        return;
    };
    let runtime = world.root.join("runtime");
    fs::DirBuilder::new().mode(0o700).create(&runtime).unwrap();
    let mut cmd = Command::new(tool);
    cmd.env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", &world.home)
        .env("XDG_RUNTIME_DIR", &runtime)
        .args(["verify", "--user"])
        .arg(unit);
    let out = run(cmd, NO_HANG);
    let (stdout, stderr) = text(&out);
    assert!(
        out.status.success(),
        "systemd-analyze verify failed:\n{stdout}\n{stderr}"
    );
    // Unknown keys and bad values are only warnings: none may mention the unit.
    let complaints: Vec<&str> = stdout
        .lines()
        .chain(stderr.lines())
        .filter(|l| l.contains(UNIT))
        .collect();
    assert!(
        complaints.is_empty(),
        "systemd-analyze verify complained:\n{}",
        complaints.join("\n")
    );
}

/// A plist parsed by a real plist parser (Python's plistlib), as JSON.
fn parse_plist(path: &Path) -> Option<Value> {
    let Some(python) = find_program("python3") else {
        println!("note: python3 is not installed: skipping the plist parse");
        return None;
    };
    let mut cmd = Command::new(python);
    cmd.env_clear().args([
        "-c",
        "import json, plistlib, sys\nwith open(sys.argv[1], 'rb') as f:\n    print(json.dumps(plistlib.load(f)))",
    ]);
    cmd.arg(path);
    let out = run(cmd, NO_HANG);
    let stdout = ok(&out);
    Some(serde_json::from_str(&stdout).unwrap())
}
