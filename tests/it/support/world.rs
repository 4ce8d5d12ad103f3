//! The test world shared by the daemon and command tests: a temp state folder,
//! HOME and config, fake runners run as `/bin/sh <script>` (never exec'd, so no
//! "Text file busy"), and a daemon guard that kills and reaps on drop.
#![allow(dead_code)]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::common::with_test_defaults;

pub use super::BIN;
/// Generous: proves nothing hangs, asserts no speed.
pub const DEADLINE: Duration = super::NO_HANG;

/// Polls `cond` until it holds or the deadline passes (then panics naming `what`).
pub fn wait_for(what: &str, deadline: Duration, cond: impl FnMut() -> bool) {
    let held = super::wait_until(Instant::now() + deadline, cond);
    assert!(held, "timed out waiting for: {what}");
}

/// One test's world: a state folder, a HOME, fake runners, a config file.
pub struct World {
    dir: tempfile::TempDir,
}

impl World {
    pub fn new() -> Self {
        let w = World {
            dir: tempfile::tempdir().expect("temp dir"),
        };
        for sub in ["state", "state/jobs", "home", "bin"] {
            fs::create_dir_all(w.path(sub)).unwrap();
            fs::set_permissions(w.path(sub), fs::Permissions::from_mode(0o700)).unwrap();
        }
        w.config("");
        w
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    pub fn state(&self) -> PathBuf {
        self.path("state")
    }

    /// Writes the config file: fsync off and a short rescan unless overridden.
    pub fn config(&self, extra: &str) {
        let mut text = format!("fsync = false\n{extra}\n");
        if !extra.contains("kill_grace_seconds") {
            text.insert_str(0, "kill_grace_seconds = 1\n");
        }
        fs::write(self.path("config.toml"), with_test_defaults(&text)).unwrap();
    }

    /// A fake runner: a shell script run as `/bin/sh <script>` (never exec'd, so no
    /// "Text file busy"). Returns the override entry for it.
    pub fn runner(&self, name: &str, body: &str) -> Value {
        let script = self.path(&format!("bin/{name}.sh"));
        fs::write(
            &script,
            format!(
                "W={}\n{}{body}\n",
                self.dir.path().display(),
                super::PID_FUNCTIONS
            ),
        )
        .unwrap();
        json!([name, ["/bin/sh", script, "{prompt}"]])
    }

    pub fn command(&self, runners: &[Value]) -> Command {
        let mut cmd = Command::new(BIN);
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.path("home"))
            .env("XDG_CONFIG_HOME", self.path("home/.config"))
            .env(
                "CATSTACK_LLM_JUDGE_RUNNERS",
                Value::Array(runners.to_vec()).to_string(),
            )
            .arg("--state-dir")
            .arg(self.state())
            .arg("--config")
            .arg(self.path("config.toml"))
            .stdin(Stdio::null());
        cmd
    }

    pub fn start(&self, runners: &[Value]) -> Daemon {
        self.start_with(self.command(runners))
    }

    pub fn start_with(&self, cmd: Command) -> Daemon {
        let n = fs::read_dir(self.dir.path()).unwrap().count();
        let err = self.path(&format!("daemon-{n}.err"));
        fs::File::create(&err).unwrap();
        self.start_logging_to(cmd, &err)
    }

    /// Starts the daemon with its stderr appended to `err`, an existing file.
    pub fn start_logging_to(&self, mut cmd: Command, err: &Path) -> Daemon {
        let file = fs::OpenOptions::new().append(true).open(err).unwrap();
        let child = cmd
            .arg("daemon")
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("start daemon");
        Daemon {
            child,
            err: err.to_path_buf(),
        }
    }

    /// Publishes a job the way producers must: hidden temp file, then rename.
    pub fn job(&self, name: &str, job: &Value) {
        let jobs = self.state().join("jobs");
        let temp = jobs.join(format!(".{name}.tmp"));
        fs::write(&temp, job.to_string()).unwrap();
        fs::rename(&temp, jobs.join(format!("{name}.json"))).unwrap();
    }

    /// Judges one job with `llm-judge run` and returns its verdict.
    pub fn run_job(&self, runners: &[Value], name: &str, job: &Value) -> Value {
        self.job(name, job);
        let path = self.state().join("jobs").join(format!("{name}.json"));
        let out = self.command(runners).arg("run").arg(path).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        self.verdict(name)
    }

    pub fn jobs_left(&self) -> Vec<String> {
        names(&self.state().join("jobs"))
    }

    /// Every verdict, as (folder, file name, content).
    pub fn verdicts(&self) -> Vec<(String, String, Value)> {
        let mut out = Vec::new();
        let Ok(folders) = fs::read_dir(self.state().join("verdicts")) else {
            return out;
        };
        for folder in folders.flatten() {
            for file in fs::read_dir(folder.path()).unwrap().flatten() {
                let name = file.file_name().to_string_lossy().into_owned();
                if name.starts_with('.') {
                    continue;
                }
                let text = fs::read_to_string(file.path()).unwrap();
                let value = serde_json::from_str(&text).unwrap_or(Value::Null);
                out.push((
                    folder.file_name().to_string_lossy().into_owned(),
                    name,
                    value,
                ));
            }
        }
        out.sort_by(|a, b| a.1.cmp(&b.1));
        out
    }

    pub fn verdict(&self, name: &str) -> Value {
        let found: Vec<Value> = self
            .verdicts()
            .into_iter()
            .filter(|(_, n, _)| n == &format!("{name}.json"))
            .map(|(_, _, v)| v)
            .collect();
        assert_eq!(found.len(), 1, "verdicts for {name}: {found:?}");
        found[0].clone()
    }

    pub fn log(&self) -> String {
        fs::read_to_string(self.state().join("judge.log")).unwrap_or_default()
    }

    pub fn wait_log(&self, what: &str) {
        wait_for(&format!("judge.log line {what:?}"), DEADLINE, || {
            self.log().contains(what)
        });
    }

    pub fn read(&self, rel: &str) -> String {
        fs::read_to_string(self.path(rel)).unwrap_or_default()
    }
}

pub fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// A running daemon, killed and reaped when dropped.
pub struct Daemon {
    pub child: Child,
    err: PathBuf,
}

impl Daemon {
    pub fn signal(&self, sig: &str) {
        let status = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.child.id().to_string())
            .status();
        assert!(status.is_ok_and(|s| s.success()), "kill -{sig}");
    }

    pub fn wait_exit(&mut self, deadline: Duration) -> ExitStatus {
        let mut status = None;
        super::wait_until(Instant::now() + deadline, || {
            status = self.child.try_wait().unwrap();
            status.is_some()
        });
        match status {
            Some(status) => status,
            None => panic!("daemon did not exit; stderr: {}", self.stderr()),
        }
    }

    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn stderr(&self) -> String {
        fs::read_to_string(&self.err).unwrap_or_default()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill9();
    }
}

pub fn answer(json_line: &str) -> String {
    format!("echo '{json_line}'")
}

/// True while the process exists and is not a zombie.
pub fn is_alive(pid: u32) -> bool {
    super::is_running(pid)
}

pub fn pids_in(text: &str) -> Vec<u32> {
    text.split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect()
}

/// The most spans open at once, from lines "start <ns>" / "end <ns>" that runners
/// append; also returns how many lines there were.
pub fn peak_overlap(spans: &str) -> (usize, i32) {
    let mut events: Vec<(u128, i32)> = spans
        .lines()
        .filter_map(|l| {
            let (kind, t) = l.split_once(' ')?;
            Some((t.parse().ok()?, if kind == "start" { 1 } else { -1 }))
        })
        .collect();
    // Ends sort before starts at the same instant.
    events.sort();
    let (mut now, mut peak) = (0, 0);
    for (_, delta) in &events {
        now += delta;
        peak = peak.max(now);
    }
    (events.len(), peak)
}
