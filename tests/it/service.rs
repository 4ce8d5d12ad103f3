//! Running as a service (docs/reference.md, "Service"): the rendered systemd unit and
//! launchd plist, `llm-judge service install / uninstall / status` against recording fakes
//! of `systemctl`, `loginctl` and `launchctl`, and the daemon's notify messages against a
//! datagram socket the test opens in place of systemd's `NOTIFY_SOCKET`.
//!
//! Self-contained: every test works in its own temp folder with its own HOME and
//! XDG_CONFIG_HOME and a cleared environment, so the real home and the real service
//! manager are never touched. Every wait is bounded and every process is reaped.

use std::fs;
use std::io::Read;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::net::UnixDatagram;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{BIN, NO_HANG, NO_TRANSCRIPT, World, wait_for};

const UNIT: &str = "llm-judge.service";
const LABEL: &str = "com.catstack.llm-judge";

/// One test's machine: the shared world's temp folder and HOME, an XDG_CONFIG_HOME
/// and a state folder with spaces in their names (the state folder not created: the
/// service commands make it), and fake service managers.
struct Machine {
    _world: World,
    root: PathBuf,
    home: PathBuf,
    xdg: PathBuf,
    state: PathBuf,
    fakes: PathBuf,
    calls: PathBuf,
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
            root,
            _world: shared,
        };
        for d in [&world.home, &world.xdg, &world.fakes] {
            fs::create_dir_all(d).unwrap();
        }
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

#[test]
fn dry_run_prints_the_unit_and_the_calls_and_changes_nothing() {
    let w = Machine::new();
    let mut cmd = w.service("systemd", &["install", "--dry-run"]);
    cmd.env("XDG_CONFIG_HOME", &w.xdg).env("FAKE_LINGER", "no");
    let stdout = ok(&run(cmd, NO_HANG));
    assert!(
        stdout.contains(&format!("# would write {}:\n", w.unit_path().display())),
        "{stdout}"
    );
    assert_eq!(
        line(&stdout, "ExecStart="),
        format!(
            "ExecStart={} \"daemon\" \"--state-dir\" {}",
            quoted(&bin()),
            quoted(w.state.to_str().unwrap())
        )
    );
    assert!(
        line(&stdout, "Environment=").starts_with(&format!("Environment=\"PATH={}:", w.path()))
    );
    for call in [
        "systemctl --user daemon-reload",
        "systemctl --user enable llm-judge.service",
        "systemctl --user restart llm-judge.service",
    ] {
        assert!(
            stdout.lines().any(|l| l == call),
            "{call} missing:\n{stdout}"
        );
    }
    assert!(stdout.contains("lingering is off for tester"), "{stdout}");
    assert!(stdout.contains("loginctl enable-linger tester"), "{stdout}");
    // Nothing written, created or started.
    assert!(!w.unit_path().exists());
    assert!(!w.state.exists());
    assert!(w.calls_of("systemctl").is_empty(), "{:?}", w.calls());

    // The plist too, and it parses.
    let stdout = ok(&run(
        w.service("launchd", &["install", "--dry-run"]),
        NO_HANG,
    ));
    let start = stdout.find("<?xml").unwrap();
    let end = stdout.find("</plist>\n").unwrap() + "</plist>\n".len();
    let printed = w.root.join("printed.plist");
    fs::write(&printed, &stdout[start..end]).unwrap();
    if let Some(plist) = parse_plist(&printed) {
        assert_eq!(plist["Label"], LABEL);
    }
    assert!(
        stdout.contains(&format!(
            "launchctl bootstrap gui/{} {}",
            uid(),
            w.plist_path().display()
        )),
        "{stdout}"
    );
    assert!(!w.plist_path().exists());
    assert!(w.calls_of("launchctl").is_empty(), "{:?}", w.calls());
}

#[test]
fn systemd_install_writes_the_unit_and_enables_it_then_uninstall_reverses_it() {
    let w = Machine::new();
    let config = w.root.join("my config.toml");
    fs::write(&config, "fsync = false\nshutdown_grace_seconds = 40\n").unwrap();

    let mut cmd = w.service("systemd", &["install"]);
    cmd.env("XDG_CONFIG_HOME", &w.xdg)
        .env("FAKE_LINGER", "no")
        .arg("--config")
        .arg(&config);
    let stdout = ok(&run(cmd, NO_HANG));
    assert_eq!(
        w.calls_of("systemctl"),
        [
            "systemctl --user daemon-reload",
            "systemctl --user enable llm-judge.service",
            "systemctl --user restart llm-judge.service",
        ]
    );
    assert!(stdout.contains("lingering is off for tester"), "{stdout}");
    let unit_path = w.unit_path();
    let unit = fs::read_to_string(&unit_path).unwrap();
    assert_eq!(
        fs::metadata(&unit_path).unwrap().permissions().mode() & 0o777,
        0o644
    );
    assert_eq!(
        line(&unit, "ExecStart="),
        format!(
            "ExecStart={} \"daemon\" \"--state-dir\" {} \"--config\" {}",
            quoted(&bin()),
            quoted(w.state.to_str().unwrap()),
            quoted(config.to_str().unwrap())
        )
    );
    let path = line(&unit, "Environment=\"PATH=");
    assert!(
        path.starts_with(&format!("Environment=\"PATH={}:", w.path())),
        "{path}"
    );
    assert!(
        path.contains(&format!(":{}/.local/bin", w.home.display())),
        "{path}"
    );
    // Above the configured drain grace of 40 s.
    assert_eq!(line(&unit, "TimeoutStopSec="), "TimeoutStopSec=70s");
    for want in [
        "Type=notify",
        "KillMode=mixed",
        "Restart=on-failure",
        "WatchdogSec=30s",
    ] {
        assert!(unit.lines().any(|l| l == want), "{want} missing");
    }
    // The state folder exists and is private, so the service can start.
    assert_eq!(
        fs::metadata(&w.state).unwrap().permissions().mode() & 0o777,
        0o700
    );
    systemd_verify(&w, &unit_path);

    // A reinstall with lingering on replaces the unit and restarts the service.
    w.clear_calls();
    let mut cmd = w.service("systemd", &["install"]);
    cmd.env("XDG_CONFIG_HOME", &w.xdg).env("FAKE_LINGER", "yes");
    let stdout = ok(&run(cmd, NO_HANG));
    assert!(
        stdout.contains(&format!("replaced {}", unit_path.display())),
        "{stdout}"
    );
    assert!(!stdout.contains("lingering"), "{stdout}");
    assert!(!line(&fs::read_to_string(&unit_path).unwrap(), "ExecStart=").contains("--config"));
    assert_eq!(w.calls_of("systemctl").len(), 3);

    // status passes on what systemctl says.
    w.clear_calls();
    let mut cmd = w.service("systemd", &["status"]);
    cmd.env("XDG_CONFIG_HOME", &w.xdg)
        .env("FAKE_LINGER", "yes")
        .env("UNIT_STATE", "active (running)");
    let stdout = ok(&run(cmd, NO_HANG));
    assert!(stdout.contains("fake: active (running)"), "{stdout}");
    assert_eq!(
        w.calls_of("systemctl"),
        ["systemctl --user status llm-judge.service --no-pager --lines=10"]
    );
    let mut cmd = w.service("systemd", &["status"]);
    cmd.env("XDG_CONFIG_HOME", &w.xdg)
        .env("FAKE_LINGER", "yes")
        .env("FAKE_STATUS_RC", "3");
    let out = run(cmd, NO_HANG);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).0.contains("is not running"));

    // uninstall --dry-run changes nothing; uninstall stops, disables and removes.
    w.clear_calls();
    let mut cmd = w.service("systemd", &["uninstall", "--dry-run"]);
    cmd.env("XDG_CONFIG_HOME", &w.xdg);
    let stdout = ok(&run(cmd, NO_HANG));
    assert!(
        stdout.contains("systemctl --user disable --now llm-judge.service"),
        "{stdout}"
    );
    assert!(unit_path.exists());
    assert!(w.calls().is_empty(), "{:?}", w.calls());
    let mut cmd = w.service("systemd", &["uninstall"]);
    cmd.env("XDG_CONFIG_HOME", &w.xdg);
    ok(&run(cmd, NO_HANG));
    assert!(!unit_path.exists());
    assert_eq!(
        w.calls_of("systemctl"),
        [
            "systemctl --user disable --now llm-judge.service",
            "systemctl --user daemon-reload",
            "systemctl --user reset-failed llm-judge.service",
        ]
    );
    assert!(w.state.exists(), "uninstall keeps the state folder");
    // Again: nothing to do, still fine.
    let mut cmd = w.service("systemd", &["uninstall"]);
    cmd.env("XDG_CONFIG_HOME", &w.xdg);
    assert!(ok(&run(cmd, NO_HANG)).contains("not installed"));
}

#[test]
fn systemd_unit_goes_under_home_without_xdg_config_home() {
    let w = Machine::new();
    let out = run(w.service("systemd", &["install"]), NO_HANG);
    let stdout = ok(&out);
    let unit = w.home.join(".config/systemd/user").join(UNIT);
    assert!(unit.is_file(), "{stdout}");
    assert!(!w.unit_path().exists());
    // loginctl failed: say that lingering is unknown, and how to turn it on.
    assert!(
        stdout.contains("cannot tell whether lingering is on for tester"),
        "{stdout}"
    );
}

#[test]
fn a_failing_systemctl_fails_the_install_and_says_where_to_look() {
    let w = Machine::new();
    let mut cmd = w.service("systemd", &["install"]);
    cmd.env("XDG_CONFIG_HOME", &w.xdg)
        .env("FAKE_SYSTEMCTL_RC", "1");
    let out = run(cmd, NO_HANG);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("`systemctl --user daemon-reload` failed (exit 1)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("journalctl --user -u llm-judge"),
        "{stderr}"
    );
}

#[test]
fn launchd_install_writes_a_plist_a_plist_parser_accepts_then_uninstall_reverses_it() {
    let w = Machine::new();
    let out = run(w.service("launchd", &["install"]), NO_HANG);
    ok(&out);
    let plist_path = w.plist_path();
    let domain = format!("gui/{}", uid());
    let service = format!("{domain}/{LABEL}");
    assert_eq!(
        w.calls(),
        [
            format!("launchctl print {service}"),
            format!("launchctl enable {service}"),
            format!("launchctl bootstrap {domain} {}", plist_path.display()),
        ]
    );
    assert_eq!(
        fs::metadata(&plist_path).unwrap().permissions().mode() & 0o777,
        0o644
    );
    if let Some(plist) = parse_plist(&plist_path) {
        let state = w.state.to_str().unwrap();
        assert_eq!(plist["Label"], LABEL);
        assert_eq!(
            plist["ProgramArguments"],
            json!([bin(), "daemon", "--state-dir", state])
        );
        assert_eq!(plist["RunAtLoad"], true);
        // Restart after a crash or failed exit, not after a clean exit.
        assert_eq!(plist["KeepAlive"], json!({"SuccessfulExit": false}));
        assert!(plist["ThrottleInterval"].as_u64().unwrap() >= 5);
        // Above the default drain grace (15 s) and kill grace (5 s).
        assert!(plist["ExitTimeOut"].as_u64().unwrap() > 20, "{plist}");
        assert!(
            ["Standard", "Background", "Adaptive", "Interactive"]
                .contains(&plist["ProcessType"].as_str().unwrap())
        );
        let path = plist["EnvironmentVariables"]["PATH"].as_str().unwrap();
        assert!(
            path.starts_with(&format!("{}:/usr/bin:/bin:", w.fakes.display())),
            "{path}"
        );
        // The usual install folders of claude and codex, missing from launchd's default.
        for dir in [
            format!("{}/.local/bin", w.home.display()),
            "/opt/homebrew/bin".into(),
            "/usr/local/bin".into(),
        ] {
            assert!(path.split(':').any(|d| d == dir), "{dir} not in {path}");
        }
        // Log lines stay in judge.log (rotated), not in launchd's unrotated file.
        assert_eq!(plist["EnvironmentVariables"]["LLM_JUDGE_STDERR_LOG"], "off");
        let log = format!("{state}/launchd.log");
        assert_eq!(plist["StandardOutPath"], log.as_str());
        assert_eq!(plist["StandardErrorPath"], log.as_str());
    }

    // A reinstall unloads the loaded agent first, then loads the new one.
    w.clear_calls();
    ok(&run(w.service("launchd", &["install"]), NO_HANG));
    assert_eq!(
        w.calls(),
        [
            format!("launchctl print {service}"),
            format!("launchctl bootout {service}"),
            format!("launchctl print {service}"),
            format!("launchctl enable {service}"),
            format!("launchctl bootstrap {domain} {}", plist_path.display()),
        ]
    );

    w.clear_calls();
    let stdout = ok(&run(w.service("launchd", &["status"]), NO_HANG));
    assert!(stdout.contains("state = running"), "{stdout}");

    w.clear_calls();
    ok(&run(w.service("launchd", &["uninstall"]), NO_HANG));
    assert!(!plist_path.exists());
    assert_eq!(
        w.calls(),
        [
            format!("launchctl print {service}"),
            format!("launchctl bootout {service}"),
            format!("launchctl print {service}"),
        ]
    );
    let out = run(w.service("launchd", &["status"]), NO_HANG);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).0.contains("not installed"));
}

#[test]
fn an_unknown_manager_is_a_usage_error_naming_the_variable() {
    let w = Machine::new();
    let out = run(w.service("runit", &["install", "--dry-run"]), NO_HANG);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).1.contains("LLM_JUDGE_SERVICE_MANAGER"));
}

// ---- the plan: what --dry-run prints is what install does ----

/// The shipped service files, as a person copies them.
fn shipped(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// A plan as `--dry-run` prints it, read back: the files it writes (path, mode,
/// contents), its commands in order (each with whether it only runs on a condition)
/// and its comment lines.
#[derive(Debug, Default)]
struct PrintedPlan {
    files: Vec<(PathBuf, u32, String)>,
    commands: Vec<(String, bool)>,
    comments: Vec<String>,
}

fn read_plan(stdout: &str) -> PrintedPlan {
    let mut plan = PrintedPlan::default();
    let mut lines = stdout.split_inclusive('\n');
    while let Some(raw) = lines.next() {
        let l = raw.trim_end_matches('\n');
        if let Some(path) = l
            .strip_prefix("# would write ")
            .and_then(|p| p.strip_suffix(':'))
        {
            let end = format!("# end of {path} (mode ");
            let mut contents = String::new();
            let mode = loop {
                let raw = lines
                    .next()
                    .unwrap_or_else(|| panic!("no {end:?} line in:\n{stdout}"));
                if let Some(mode) = raw.strip_prefix(&end) {
                    break u32::from_str_radix(mode.trim_end().trim_end_matches(')'), 8).unwrap();
                }
                contents.push_str(raw);
            };
            plan.files.push((PathBuf::from(path), mode, contents));
        } else if let Some(comment) = l.strip_prefix("# ") {
            plan.comments.push(comment.to_string());
        } else if !l.is_empty() {
            let (command, why) = l.split_once("  # ").unwrap_or((l, ""));
            plan.commands
                .push((command.to_string(), why.starts_with("only if")));
        }
    }
    plan
}

/// Recorded calls that change something (the read-only queries left out).
fn changing_calls(w: &Machine) -> Vec<String> {
    w.calls()
        .into_iter()
        .filter(|c| !c.starts_with("loginctl ") && !c.starts_with("launchctl print "))
        .collect()
}

/// Checks that `install` did what `plan` says: the same files with the same contents
/// and modes, the same commands in the same order (conditional ones when `loaded`), the
/// same notes and closing words.
fn assert_carried_out(w: &Machine, plan: &PrintedPlan, loaded: bool, stdout: &str) {
    assert!(!plan.files.is_empty(), "{plan:?}");
    for (path, mode, contents) in &plan.files {
        assert_eq!(
            &fs::read_to_string(path).unwrap(),
            contents,
            "{}",
            path.display()
        );
        assert_eq!(
            fs::metadata(path).unwrap().permissions().mode() & 0o777,
            *mode
        );
    }
    let want: Vec<String> = plan
        .commands
        .iter()
        .filter(|(_, conditional)| loaded || !conditional)
        .map(|(c, _)| c.clone())
        .collect();
    assert_eq!(changing_calls(w), want);
    for comment in &plan.comments {
        let told = comment
            .strip_prefix("then: ")
            .or_else(|| comment.strip_prefix("note: ").map(|_| comment.as_str()))
            .or_else(|| comment.strip_prefix("warning: ").map(|_| comment.as_str()))
            .or_else(|| {
                comment
                    .starts_with("runners on ")
                    .then_some(comment.as_str())
            });
        if let Some(told) = told {
            assert!(
                stdout.lines().any(|l| l == told),
                "{told:?} not told:\n{stdout}"
            );
        }
    }
}

#[test]
fn systemd_dry_run_prints_the_plan_install_carries_out() {
    let w = Machine::new();
    let config = w.root.join("config.toml");
    fs::write(&config, "shutdown_grace_seconds = 40\n").unwrap();
    let service = |args: &[&str]| {
        let mut cmd = w.service("systemd", args);
        cmd.env("XDG_CONFIG_HOME", &w.xdg)
            .env("FAKE_LINGER", "no")
            .arg("--config")
            .arg(&config);
        cmd
    };
    let plan = read_plan(&ok(&run(service(&["install", "--dry-run"]), NO_HANG)));
    assert_eq!(plan.files.len(), 1);
    assert_eq!(plan.files[0].0, w.unit_path());
    assert!(
        plan.comments
            .iter()
            .any(|c| c.starts_with("warning: lingering is off")),
        "{plan:?}"
    );
    assert!(changing_calls(&w).is_empty());
    let stdout = ok(&run(service(&["install"]), NO_HANG));
    assert_carried_out(&w, &plan, true, &stdout);

    // Uninstall as well.
    w.clear_calls();
    let plan = read_plan(&ok(&run(service(&["uninstall", "--dry-run"]), NO_HANG)));
    assert!(w.unit_path().exists());
    let stdout = ok(&run(service(&["uninstall"]), NO_HANG));
    assert!(!w.unit_path().exists());
    let want: Vec<String> = plan.commands.iter().map(|(c, _)| c.clone()).collect();
    assert_eq!(changing_calls(&w), want);
    assert!(
        plan.comments
            .iter()
            .any(|c| *c == format!("would remove {}", w.unit_path().display())),
        "{plan:?}"
    );
    assert!(stdout.contains("removed "), "{stdout}");
}

#[test]
fn launchd_dry_run_prints_the_plan_install_carries_out() {
    let w = Machine::new();
    // Not loaded yet: the conditional bootout is skipped.
    let plan = read_plan(&ok(&run(
        w.service("launchd", &["install", "--dry-run"]),
        NO_HANG,
    )));
    assert_eq!(plan.files.len(), 1);
    assert_eq!(plan.files[0].0, w.plist_path());
    assert_eq!(plan.commands.iter().filter(|(_, c)| *c).count(), 1);
    let stdout = ok(&run(w.service("launchd", &["install"]), NO_HANG));
    assert_carried_out(&w, &plan, false, &stdout);

    // Loaded now: the same plan, and this time the bootout runs.
    w.clear_calls();
    let again = read_plan(&ok(&run(
        w.service("launchd", &["install", "--dry-run"]),
        NO_HANG,
    )));
    assert_eq!(again.commands, plan.commands);
    let stdout = ok(&run(w.service("launchd", &["install"]), NO_HANG));
    assert_carried_out(&w, &again, true, &stdout);
}

#[test]
fn the_shipped_unit_and_plist_are_valid_as_they_are() {
    let w = Machine::new();
    // The unit names %h/.cargo/bin/llm-judge, where `cargo install` puts the binary.
    let bin_dir = w.home.join(".cargo/bin");
    fs::create_dir_all(&bin_dir).unwrap();
    fs::copy(BIN, bin_dir.join("llm-judge")).unwrap();
    let copy = w.root.join("copied").join(UNIT);
    fs::create_dir_all(copy.parent().unwrap()).unwrap();
    fs::copy(shipped("systemd/llm-judge.service"), &copy).unwrap();
    systemd_verify(&w, &copy);
    let unit = fs::read_to_string(&copy).unwrap();
    for want in [
        "Type=notify",
        "KillMode=mixed",
        "Restart=on-failure",
        "WatchdogSec=30s",
        "ExecStart=%h/.cargo/bin/llm-judge daemon",
        "TimeoutStopSec=45s",
    ] {
        assert!(unit.lines().any(|l| l == want), "{want} missing");
    }
    assert!(line(&unit, "Environment=\"PATH=").contains("/usr/bin:/bin"));

    let plist_path = shipped("launchd/com.catstack.llm-judge.plist");
    if let Some(plist) = parse_plist(&plist_path) {
        assert_eq!(plist["Label"], LABEL);
        assert_eq!(
            plist["ProgramArguments"],
            json!(["/Users/you/.cargo/bin/llm-judge", "daemon"])
        );
        assert_eq!(plist["RunAtLoad"], true);
        assert_eq!(plist["KeepAlive"], json!({"SuccessfulExit": false}));
        // Integers, not strings or placeholders.
        assert_eq!(plist["ThrottleInterval"], json!(10));
        assert_eq!(plist["ExitTimeOut"], json!(45));
        assert_eq!(plist["ProcessType"], "Standard");
        assert!(
            plist["EnvironmentVariables"]["PATH"]
                .as_str()
                .unwrap()
                .ends_with(":/usr/bin:/bin")
        );
        assert_eq!(
            plist["StandardErrorPath"],
            "/Users/you/.cache/catstack-llm-judge/launchd.log"
        );
    }
    if let Some(plutil) = find_program("plutil") {
        let mut cmd = Command::new(plutil);
        cmd.arg("-lint").arg(&plist_path);
        ok(&run(cmd, NO_HANG));
    }
}

/// The lines of `a` and `b` (same count) that differ, as pairs.
fn changed_lines<'a>(a: &'a str, b: &'a str) -> Vec<(&'a str, &'a str)> {
    let (a, b): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    assert_eq!(a.len(), b.len(), "different line counts");
    a.into_iter().zip(b).filter(|(x, y)| x != y).collect()
}

#[test]
fn install_writes_the_shipped_files_with_only_this_machines_values() {
    let w = Machine::new();
    let config = w.root.join("config.toml");
    fs::write(&config, "shutdown_grace_seconds = 40\n").unwrap();
    let mut cmd = w.service("systemd", &["install"]);
    cmd.env("XDG_CONFIG_HOME", &w.xdg)
        .env("FAKE_LINGER", "yes")
        .arg("--config")
        .arg(&config);
    ok(&run(cmd, NO_HANG));
    let shipped_unit = fs::read_to_string(shipped("systemd/llm-judge.service")).unwrap();
    let unit = fs::read_to_string(w.unit_path()).unwrap();
    let changed = changed_lines(&shipped_unit, &unit);
    let (path, _) = service_path_of(&w, "systemd");
    assert_eq!(
        changed,
        [
            (
                "ExecStart=%h/.cargo/bin/llm-judge daemon",
                format!(
                    "ExecStart={} \"daemon\" \"--state-dir\" {} \"--config\" {}",
                    quoted(&bin()),
                    quoted(w.state.to_str().unwrap()),
                    quoted(config.to_str().unwrap())
                )
                .as_str()
            ),
            (
                line(&shipped_unit, "Environment=\"PATH="),
                format!(
                    "Environment={}",
                    quoted(&format!("PATH={path}")).replace("$$", "$")
                )
                .as_str()
            ),
            ("TimeoutStopSec=45s", "TimeoutStopSec=70s"),
        ]
    );

    ok(&run(w.service("launchd", &["install"]), NO_HANG));
    let shipped_plist =
        fs::read_to_string(shipped("launchd/com.catstack.llm-judge.plist")).unwrap();
    let plist = fs::read_to_string(w.plist_path()).unwrap();
    // The ProgramArguments array may change length: compare around it.
    let split = |text: &str| -> (String, Vec<String>) {
        let start = text.find("<key>ProgramArguments</key>").unwrap();
        let end = start + text[start..].find("</array>").unwrap();
        let args = text[start..end]
            .lines()
            .filter_map(|l| l.trim().strip_prefix("<string>"))
            .filter_map(|l| l.strip_suffix("</string>"))
            .map(String::from)
            .collect();
        (format!("{}{}", &text[..start], &text[end..]), args)
    };
    let (shipped_rest, shipped_args) = split(&shipped_plist);
    let (rest, args) = split(&plist);
    assert_eq!(shipped_args, ["/Users/you/.cargo/bin/llm-judge", "daemon"]);
    assert_eq!(
        args,
        [
            bin().as_str(),
            "daemon",
            "--state-dir",
            w.state.to_str().unwrap()
        ]
    );
    let (path, _) = service_path_of(&w, "launchd");
    let log = format!("{}/launchd.log", w.state.display());
    let tag = |s: &str| format!("<string>{s}</string>");
    let changed: Vec<(String, String)> = changed_lines(&shipped_rest, &rest)
        .into_iter()
        .map(|(a, b)| (a.trim().to_string(), b.trim().to_string()))
        .collect();
    assert_eq!(
        changed,
        [
            (
                tag("/Users/you/.local/bin:/opt/homebrew/bin:/usr/local/bin:/usr/bin:/bin"),
                tag(&path)
            ),
            (
                tag("/Users/you/.cache/catstack-llm-judge/launchd.log"),
                tag(&log)
            ),
            (
                tag("/Users/you/.cache/catstack-llm-judge/launchd.log"),
                tag(&log)
            ),
        ],
        "ExitTimeOut stays 45 with the default graces"
    );
}

/// The service `PATH` that install gives with this test's environment, per its dry run.
fn service_path_of(w: &Machine, manager: &str) -> (String, String) {
    let mut cmd = w.service(manager, &["install", "--dry-run"]);
    cmd.env("XDG_CONFIG_HOME", &w.xdg).env("FAKE_LINGER", "yes");
    let stdout = ok(&run(cmd, NO_HANG));
    let path = match manager {
        "systemd" => line(&stdout, "Environment=\"PATH=")
            .trim_start_matches("Environment=\"PATH=")
            .trim_end_matches('"')
            .to_string(),
        _ => {
            let at = stdout.find("<key>PATH</key>").unwrap();
            let value = stdout[at..].lines().nth(1).unwrap().trim();
            value
                .trim_start_matches("<string>")
                .trim_end_matches("</string>")
                .to_string()
        }
    };
    (path, stdout)
}

// ---- the daemon's notify messages ----

/// A daemon started with a fake NOTIFY_SOCKET; killed and reaped on drop.
struct Daemon {
    child: Option<Child>,
}

impl Daemon {
    fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// Waits for the exit (bounded).
    fn wait(&mut self, limit: Duration) -> ExitStatus {
        let child = self.child.as_mut().unwrap();
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                self.child = None;
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "daemon did not exit within {limit:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A notify socket and everything that arrived on it, in order.
struct Notify {
    socket: UnixDatagram,
    seen: Vec<String>,
}

impl Notify {
    fn bind(path: &Path) -> Notify {
        let socket = UnixDatagram::bind(path).unwrap();
        socket
            .set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        Notify {
            socket,
            seen: Vec::new(),
        }
    }

    /// The next datagram, or `None` once `deadline` passes.
    fn next(&mut self, deadline: Instant) -> Option<String> {
        let mut buf = vec![0u8; 4096];
        loop {
            match self.socket.recv(&mut buf) {
                Ok(n) => {
                    let message = String::from_utf8_lossy(&buf[..n]).into_owned();
                    self.seen.push(message.clone());
                    return Some(message);
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    if Instant::now() >= deadline {
                        return None;
                    }
                }
                Err(e) => panic!("notify socket: {e}"),
            }
        }
    }

    /// Reads until a message satisfies `want`; panics at the deadline.
    fn until(&mut self, limit: Duration, what: &str, want: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + limit;
        loop {
            match self.next(deadline) {
                Some(m) if want(&m) => return m,
                Some(_) => {}
                None => panic!("no {what} within {limit:?}; got {:?}", self.seen),
            }
        }
    }
}

/// `(waiting, running)` from a `STATUS=<n> waiting, <m> running` line of a message.
fn queue(message: &str) -> Option<(u64, u64)> {
    let status = message.lines().find_map(|l| l.strip_prefix("STATUS="))?;
    let mut numbers = status
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<u64>().unwrap());
    let waiting = numbers.next()?;
    let running = numbers.next()?;
    assert!(
        status.contains("waiting") && status.contains("running"),
        "{status}"
    );
    Some((waiting, running))
}

/// The shared world with a config for the notify tests and a socket path for
/// `NOTIFY_SOCKET`.
struct DaemonWorld {
    w: World,
    socket: PathBuf,
}

impl DaemonWorld {
    fn new() -> DaemonWorld {
        let w = World::new();
        // No rescans during the test: a job that arrives later is found by the watch.
        fs::write(
            w.path("config.toml"),
            "fsync = false\nrescan_seconds = 3600\n",
        )
        .unwrap();
        let socket = w.path("notify.sock");
        DaemonWorld { w, socket }
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new(BIN);
        cmd.env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", &self.w.home)
            .env("XDG_CONFIG_HOME", &self.w.xdg)
            .env("TMPDIR", &self.w.tmp)
            .env(
                "CATSTACK_LLM_JUDGE_RUNNERS",
                r#"[["fake", ["/bin/echo", "{\"ok\": true}"]]]"#,
            )
            .arg("daemon")
            .arg("--state-dir")
            .arg(self.w.state())
            .arg("--config")
            .arg(self.w.path("config.toml"))
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        cmd
    }

    fn start(&self, watchdog_pid: Option<&str>) -> Daemon {
        let mut cmd = self.command();
        cmd.env("NOTIFY_SOCKET", &self.socket)
            .env("WATCHDOG_USEC", "200000")
            .stderr(fs::File::create(self.w.path("daemon.stderr")).unwrap());
        if let Some(pid) = watchdog_pid {
            cmd.env("WATCHDOG_PID", pid);
        }
        Daemon {
            child: Some(cmd.spawn().unwrap()),
        }
    }

    /// Publishes a job the way producers do (hidden temp file, then rename).
    fn job(&self, stem: &str) {
        self.w.job(
            stem,
            &json!({"prompt": "Reply with {\"ok\": true}", "hit_if_all_true": ["ok"]}),
        );
    }

    fn verdict(&self, stem: &str) -> PathBuf {
        self.w.verdict_path(NO_TRANSCRIPT, stem)
    }

    fn log(&self) -> String {
        self.w.log()
    }
}

#[test]
fn notify_ready_after_lock_scan_and_watch_then_status_watchdog_and_stopping() {
    let d = DaemonWorld::new();
    // A job already waiting: the first scan must have seen it before READY=1.
    d.job("before");
    let mut notify = Notify::bind(&d.socket);
    let mut daemon = d.start(None);

    let ready = notify.until(NO_HANG, "READY=1", |m| m.lines().any(|l| l == "READY=1"));
    // Before READY=1 only STATUS= may come (the watchdog starts with the loop).
    let before: Vec<&String> = notify.seen.iter().take(notify.seen.len() - 1).collect();
    assert!(
        before
            .iter()
            .all(|m| queue(m).is_some() && m.lines().count() == 1),
        "{before:?}"
    );
    let (waiting, running) = queue(&ready).expect("READY=1 comes with STATUS=");
    assert_eq!(
        waiting + running,
        1,
        "READY=1 before the first scan saw the waiting job: {ready:?}"
    );
    // The lock is held by now: a second daemon on the same state folder refuses at once.
    let log = d.log();
    assert!(log.contains("daemon start"), "{log}");
    let mut second = d.command();
    second.stderr(Stdio::piped());
    let out = run(second, NO_HANG);
    let (_, stderr) = text(&out);
    assert_ne!(
        out.status.code(),
        Some(0),
        "a second daemon started: {stderr}"
    );
    assert!(
        stderr.contains(&format!("pid {}", daemon.pid()))
            || d.log().contains(&format!("pid {}", daemon.pid())),
        "the second daemon does not name the first: {stderr}"
    );

    // It is watching: a job arriving now is judged without a rescan (rescans are hourly).
    d.job("after");
    wait_for("verdicts for both jobs", NO_HANG, || {
        d.verdict("before").exists() && d.verdict("after").exists()
    });

    // The watchdog is pinged from the loop, repeatedly (every WATCHDOG_USEC/2 = 100 ms).
    for _ in 0..3 {
        notify.until(NO_HANG, "WATCHDOG=1", |m| m == "WATCHDOG=1");
    }
    // STATUS= follows the queue: it ends at nothing waiting and nothing running.
    notify.until(NO_HANG, "STATUS=0 waiting, 0 running", |m| {
        queue(m) == Some((0, 0))
    });
    assert!(
        notify.seen.iter().filter(|m| m.contains("READY=1")).count() == 1,
        "READY=1 twice: {:?}",
        notify.seen
    );
    assert!(
        notify.seen.iter().all(|m| !m.contains("STOPPING=1")),
        "{:?}",
        notify.seen
    );

    // SIGTERM: STOPPING=1, then a clean exit.
    // SAFETY: kill(2) on our own, not yet reaped child.
    assert_eq!(unsafe { libc::kill(daemon.pid() as i32, libc::SIGTERM) }, 0);
    notify.until(NO_HANG, "STOPPING=1", |m| {
        m.lines().any(|l| l == "STOPPING=1")
    });
    let status = daemon.wait(NO_HANG);
    assert_eq!(
        status.code(),
        Some(0),
        "{status:?} (signal {:?})",
        status.signal()
    );

    let mut stderr = String::new();
    fs::File::open(d.w.root.join("daemon.stderr"))
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(
        stderr.contains("daemon start"),
        "the daemon logs to stderr for journald: {stderr}"
    );
}

#[test]
fn no_watchdog_pings_when_the_watchdog_is_meant_for_another_process() {
    let d = DaemonWorld::new();
    let mut notify = Notify::bind(&d.socket);
    let mut daemon = d.start(Some("1"));
    notify.until(NO_HANG, "READY=1", |m| m.lines().any(|l| l == "READY=1"));
    // At 100 ms a ping, a second would bring about ten of them.
    let deadline = Instant::now() + Duration::from_secs(1);
    while notify.next(deadline).is_some() {}
    assert!(
        notify.seen.iter().all(|m| m != "WATCHDOG=1"),
        "{:?}",
        notify.seen
    );
    // SAFETY: kill(2) on our own, not yet reaped child.
    assert_eq!(unsafe { libc::kill(daemon.pid() as i32, libc::SIGTERM) }, 0);
    assert_eq!(daemon.wait(NO_HANG).code(), Some(0));
}
